"""The validator passes a good store and catches each planted violation, naming where."""
from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
import zarr

from builder.validate import validate
from conftest import run_cli


def edit(path: Path, fn) -> None:
    doc = json.loads(path.read_text())
    fn(doc)
    path.write_text(json.dumps(doc))


@pytest.fixture()
def copy(store, tmp_path) -> Path:
    dst = tmp_path / "2024.zarr"
    shutil.copytree(store, dst)
    return dst


def test_good_store_is_valid(store):
    assert validate(str(store)) == []
    p = run_cli("validate", str(store))
    assert "valid tessera:v1 store" in p.stdout


def _attrs(key, value):
    def f(doc):
        if value is KeyError:
            del doc["attributes"][key]
        else:
            doc["attributes"][key] = value
    return f


CASES = [
    ("zarr.json", _attrs("tessera:dataset_version", "v9"), "root: tessera:dataset_version"),
    ("zarr.json", _attrs("tessera:year", "2024"), "root: tessera:year"),
    ("zarr.json", _attrs("zarr_conventions", []), "root: convention 'tessera:' is not registered"),
    ("utm30/zarr.json", _attrs("tessera:n_tiles", -1), "utm30: tessera:n_tiles"),
    ("utm30/zarr.json", _attrs("tessera:model_version", KeyError), "'tessera:model_version' is a required property"),
    ("utm30/zarr.json", _attrs("tessera:utm_zone", 31), "utm30: tessera:utm_zone=31 does not match the group name"),
    ("utm30/zarr.json", _attrs("proj:code", "EPSG:32631"), "utm30: proj:code EPSG:32631 is for zone 31"),
    ("utm30/zarr.json", _attrs("proj:code", "EPSG:4326"), "utm30: proj:code"),
    ("utm34/zarr.json", lambda d: d["attributes"]["spatial:transform"].__setitem__(5, 10_512_000.0),
     "impossible for southern EPSG:32734"),
    ("utm30/zarr.json", _attrs("tessera:year", 2023), "utm30: tessera:year=2023 differs from the root's 2024"),
    ("utm30/zarr.json", _attrs("tessera:n_bands", 64), "utm30: tessera:n_bands=64 but embeddings has 128"),
    ("utm30/zarr.json", _attrs("spatial:bbox", [0, 0, 1, 1]), "utm30: spatial:bbox [0, 0, 1, 1] disagrees"),
    ("utm30/zarr.json", _attrs("spatial:registration", "node"), "spatial:registration"),
    ("utm30/zarr.json", _attrs("tessera:has_rgb_preview", False), "rgb array present but tessera:has_rgb_preview"),
    ("utm30/embeddings/zarr.json", lambda d: d.update(data_type="int16"), "utm30/embeddings: dtype int16, expected int8"),
    ("utm30/scales/zarr.json", lambda d: d.update(fill_value=0.0), "utm30/scales: fill_value 0.0, expected nan"),
    ("utm30/embeddings/zarr.json", lambda d: d.update(dimension_names=["y", "x", "band"]), "utm30/embeddings: dimension_names"),
    ("utm30/band/zarr.json", lambda d: d.update(dimension_names=["b"]), "utm30/band: dimension_names"),
    ("global_rgb/zarr.json", lambda d: d["attributes"].update({"proj:code": "EPSG:3857"}), "global_rgb: proj:code"),
    ("global_rgb/zarr.json", lambda d: d["attributes"]["multiscales"]["layout"][1].update(derived_from="7"),
     "global_rgb/1: derived_from '7'"),
    ("global_rgb/zarr.json", lambda d: d["attributes"]["multiscales"]["layout"][2]["spatial:transform"].__setitem__(0, 0.5),
     "global_rgb/2: resolution 0.5 is not twice"),
]


@pytest.mark.parametrize("path,change,needle", CASES, ids=[c[2][:40] for c in CASES])
def test_planted_violation_is_caught(copy, path, change, needle):
    edit(copy / path, change)
    probs = validate(str(copy))
    assert any(needle in p for p in probs), probs
    p = run_cli("validate", str(copy), check=False)
    assert p.returncode == 1 and needle in p.stdout


def test_wrong_coordinates_and_missing_array(copy):
    z = zarr.open_group(copy / "utm30", mode="r+")
    e = z["easting"][:]
    e[3] += 1
    z["easting"][:] = e
    shutil.rmtree(copy / "utm31" / "scales")
    probs = validate(str(copy))
    assert any("utm30/easting: values are not origin + (i + 0.5) * 10" in p for p in probs)
    assert any("utm31/scales: required array is missing" in p for p in probs)


def test_unsnapped_grid_and_compressed_coordinates(copy):
    edit(copy / "utm30" / "band" / "zarr.json",
         lambda d: d["codecs"].append({"name": "zstd", "configuration": {"level": 1, "checksum": False}}))
    probs = validate(str(copy))
    assert any("utm30/band: coordinate arrays must be uncompressed" in p for p in probs)


def test_not_a_store(tmp_path):
    probs = validate(str(tmp_path / "nothing"))
    assert len(probs) == 1 and "cannot open" in probs[0]
    p = run_cli("validate", str(tmp_path / "nothing"), check=False)
    assert p.returncode == 1 and "Traceback" not in p.stderr
