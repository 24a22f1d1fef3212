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
    ("global_rgb/3/rgb/zarr.json", lambda d: d["attributes"].update(chunks_present=[[0, 5, 2]]),
     "global_rgb/3/rgb: chunks_present: run [0, 5, 2] is outside"),
    ("global_rgb/3/rgb/zarr.json", lambda d: d["attributes"].update(chunks_present="all"),
     "global_rgb/3/rgb: chunks_present is not a list"),
    ("utm30/scales/zarr.json", lambda d: d["attributes"].update(chunks_present=[[0, 0, 99]]),
     "utm30/scales: chunks_present: run [0, 0, 99] is outside"),
    ("utm30/embeddings/zarr.json", lambda d: d["attributes"].update(chunks_present=[[0, 0, 1], [0, 0, 1]]),
     "utm30/embeddings: chunks_present: runs are not sorted at [0, 0, 1]"),
]


@pytest.mark.parametrize("path,change,needle", CASES, ids=[c[2][:40] for c in CASES])
def test_planted_violation_is_caught(copy, path, change, needle):
    edit(copy / path, change)
    probs = validate(str(copy))
    assert any(needle in p for p in probs), probs
    p = run_cli("validate", str(copy), check=False)
    assert p.returncode == 1 and needle in p.stdout


@pytest.mark.parametrize("value", [float("nan"), float("inf"), float("-inf"), 10**400],
                         ids=["NaN", "Infinity", "-Infinity", "400-digit integer"])
def test_a_transform_that_is_not_finite_is_a_violation(copy, value):
    """It was `internal: OverflowError` (exit 3): the overview grid was computed from the transform unchecked."""
    def f(doc):
        doc["attributes"]["spatial:transform"][2] = value
    edit(copy / "utm30" / "zarr.json", f)
    edit(copy / "zarr.json", lambda d: f(d["consolidated_metadata"]["metadata"]["utm30"]))
    p = run_cli("validate", str(copy), check=False)
    assert p.returncode == 1 and "internal" not in p.stderr and "Traceback" not in p.stderr, p.stderr
    named = [ln for ln in p.stdout.splitlines() if ln.startswith("utm30: spatial:transform") and "not finite" in ln]
    assert len(named) == 1, p.stdout


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


# ------------------------------------------------------------ --deep (corruption) --
def _shard_chunks(shard: Path, n_chunks: int):
    from builder.core.shardio import EMPTY, read_index
    index = read_index(shard.read_bytes(), n_chunks)
    return [(i, int(off), int(ln)) for i, (off, ln) in enumerate(index) if off != EMPTY]


def test_deep_passes_an_intact_store(store):
    p = run_cli("validate", "--deep", str(store))
    assert "valid tessera:v1 store" in p.stdout and "checked" in p.stdout


def test_deep_finds_100_zeroed_bytes_inside_a_chunk(copy, store):
    import numpy as np
    meta = json.loads((copy / "utm30" / "embeddings" / "zarr.json").read_text())
    shard_shape = meta["chunk_grid"]["configuration"]["chunk_shape"]
    inner = meta["codecs"][0]["configuration"]["chunk_shape"]
    grid = [s // c for s, c in zip(shard_shape, inner)]
    shard = sorted(p for p in (copy / "utm30" / "embeddings" / "c").rglob("*") if p.is_file())[-1]
    chunks = _shard_chunks(shard, int(np.prod(grid)))
    i, off, ln = max(chunks, key=lambda c: c[2])  # the largest chunk: 100 bytes well inside its data
    assert ln > 140
    data = bytearray(shard.read_bytes())
    index_start = len(data) - 16 * int(np.prod(grid)) - 4
    assert off + 120 < index_start  # the chunk data, not the shard index
    data[off + 20: off + 120] = bytes(100)
    shard.write_bytes(bytes(data))
    key = shard.relative_to(copy).as_posix()
    coord = tuple(int(x) for x in np.unravel_index(i, grid))

    assert validate(str(copy)) == []  # the plain validator reads metadata and coordinates only
    p = run_cli("validate", "--deep", str(copy), check=False)
    assert p.returncode == 1 and "Traceback" not in p.stderr, p.stdout + p.stderr
    lines = [ln for ln in p.stdout.splitlines() if ln.strip()]
    assert len(lines) == 1 and lines[0].startswith(f"{key}: inner chunk {coord}") and "checksum" in lines[0], lines
    # readers that verify the per-chunk crc32c (zarr-python, hence xarray) refuse the chunk instead of
    # returning wrong values
    sr, sc = int(shard.parts[-3]), int(shard.parts[-2])
    r0, c0 = sr * shard_shape[0] + coord[0] * inner[0], sc * shard_shape[1] + coord[1] * inner[1]
    with pytest.raises(Exception, match="checksum"):
        zarr.open_group(copy / "utm30", mode="r")["embeddings"][r0:r0 + inner[0], c0:c0 + inner[1]]
    np.testing.assert_array_equal(  # the other chunks of the shard still read
        zarr.open_group(copy / "utm30", mode="r")["scales"][:], zarr.open_group(store / "utm30", mode="r")["scales"][:])


def test_deep_without_chunk_checksums_says_so_once(copy, store):
    """A store whose inner chunks carry no crc32c (an older layout) can only be decoded: --deep says so
    once per array and still decodes every chunk."""
    from builder.arrayfiles import ShardedArrayFiles
    arr = copy / "utm30" / "scales"
    shards = sorted(p for p in (arr / "c").rglob("*") if p.is_file())
    old = ShardedArrayFiles(arr)
    data = {(int(p.parts[-2]), int(p.parts[-1])): old.read(int(p.parts[-2]), int(p.parts[-1])) for p in shards}
    edit(arr / "zarr.json", lambda d: d["codecs"][0]["configuration"].__setitem__(
        "codecs", [c for c in d["codecs"][0]["configuration"]["codecs"] if c["name"] != "crc32c"]))
    edit(copy / "zarr.json", lambda d: d["consolidated_metadata"]["metadata"]["utm30/scales"]["codecs"][0][
        "configuration"].__setitem__("codecs", [c for c in d["consolidated_metadata"]["metadata"]["utm30/scales"][
            "codecs"][0]["configuration"]["codecs"] if c["name"] != "crc32c"]))
    new = ShardedArrayFiles(arr)
    for (sr, sc), v in data.items():
        new.write(sr, sc, v)
    import numpy as np
    np.testing.assert_array_equal(zarr.open_group(copy / "utm30", mode="r")["scales"][:],
                                  zarr.open_group(store / "utm30", mode="r")["scales"][:])
    assert validate(str(copy)) == []
    p = run_cli("validate", "--deep", str(copy), check=False)
    lines = [ln for ln in p.stdout.splitlines() if ln.strip()]
    assert p.returncode == 1 and lines == ["utm30/scales: inner chunks carry no crc32c checksum; --deep decoded "
                                           f"them ({len(shards)} shards) but cannot verify them"], lines


def test_deep_compares_each_global_rgb_level_record_with_its_chunk_files(copy):
    """A level's chunks_present names the chunks readers ask for: one it omits is never drawn, one it lists
    without a file is a failed request.  --deep lists the files and says both."""
    level = copy / "global_rgb" / "0" / "rgb"
    files = sorted(p for p in (level / "c").rglob("*") if p.is_file())
    gone = files[0]
    gone.unlink()  # recorded, no file
    doc = json.loads((level / "zarr.json").read_text())
    runs = doc["attributes"]["chunks_present"]
    last = runs.pop()
    if last[2] - last[1] > 1:
        runs.append([last[0], last[1], last[2] - 1])  # its last chunk has a file, not recorded
    (level / "zarr.json").write_text(json.dumps(doc))
    zarr.consolidate_metadata(str(copy))
    assert validate(str(copy)) == []  # a plain validate lists no chunk files
    probs = validate(str(copy), deep=True)
    i, j = int(gone.parts[-3]), int(gone.parts[-2])
    assert f"global_rgb/0/rgb: chunks_present lists chunks that have no file: 1, the first ({i}, {j})" in probs, probs
    assert f"global_rgb/0/rgb: chunks_present omits chunk files: 1, the first ({last[0]}, {last[2] - 1})" in probs


def test_deep_compares_each_zone_arrays_record_of_its_shards_with_its_shard_files(copy):
    """A zone array's chunks_present names the shards readers ask for (the others are read as fill, with no
    request): a shard it omits is data never shown, one it lists without a file a failed request."""
    scales, emb = copy / "utm30" / "scales", copy / "utm30" / "embeddings"
    gone = sorted(p for p in (scales / "c").rglob("*") if p.is_file())[0]
    gone.unlink()  # recorded, no file
    doc = json.loads((emb / "zarr.json").read_text())
    runs = doc["attributes"]["chunks_present"]
    first = runs[0]
    runs[0] = [first[0], first[1] + 1, first[2]]  # its first shard has a file, not recorded
    doc["attributes"]["chunks_present"] = [r for r in runs if r[1] < r[2]]
    (emb / "zarr.json").write_text(json.dumps(doc))
    zarr.consolidate_metadata(str(copy))
    assert validate(str(copy)) == []  # a plain validate lists no shard files
    probs = validate(str(copy), deep=True)
    i, j = int(gone.parts[-2]), int(gone.parts[-1])
    assert f"utm30/scales: chunks_present lists chunks that have no file: 1, the first ({i}, {j})" in probs, probs
    assert f"utm30/embeddings: chunks_present omits chunk files: 1, the first ({first[0]}, {first[1]})" in probs, probs


def test_deep_finds_a_corrupt_global_rgb_chunk(copy):
    chunk = max((p for p in (copy / "global_rgb" / "0" / "rgb" / "c").rglob("*") if p.is_file()),
                key=lambda p: p.stat().st_size)
    data = bytearray(chunk.read_bytes())
    assert len(data) > 60
    data[20:40] = bytes(20)  # inside the compressed payload, before the 4-byte checksum
    chunk.write_bytes(bytes(data))
    assert validate(str(copy)) == []
    p = run_cli("validate", "--deep", str(copy), check=False)
    key = chunk.relative_to(copy).as_posix()
    assert p.returncode == 1 and "Traceback" not in p.stderr, p.stdout + p.stderr
    assert [ln for ln in p.stdout.splitlines() if key in ln and "checksum" in ln], p.stdout
