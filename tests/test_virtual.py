"""Virtual Zarr indexes over tiles, year stores and the pyramid, read back by zarr-python and xarray."""
from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np
import pytest
import xarray as xr
import zarr

from builder import demo
from builder.errors import BuildError
from builder.tiles import EMBEDDINGS_DIR
from builder.virtual.parsers import PyramidParser, TileParser, YearsParser
from builder.virtual.writer import open_index, write_tile_index
from conftest import PX, run_async, run_cli


@pytest.fixture(scope="module")
def two_years(tmp_path_factory, world):
    """2023 with one tile, 2024 with a second tile to the north: the zone grids differ by whole shards."""
    root = tmp_path_factory.mktemp("vt")
    demo.write_tile(root, 2023, -0.05, 50.85, PX, world=world)
    demo.write_tile(root, 2024, -0.05, 50.85, PX, world=world)
    demo.write_tile(root, 2024, -0.05, 50.95, PX, world=world)
    out = root / "stores"
    run_cli("build", str(root), "--year", "2023", "--year", "2024", "--out", str(out), "--scheduler", "sync", "-q")
    return root, out


def tile_npy(root: Path, year: int, name: str) -> Path:
    return root / EMBEDDINGS_DIR / str(year) / name / f"{name}.npy"


@pytest.mark.parametrize("fmt,ext", [(3, "json"), (2, "json"), (2, "parquet")])
def test_tile_index_reads_identical_values(tiles_root, tmp_path, fmt, ext):
    name = "grid_18.45_-33.95"
    store = TileParser()(str(tile_npy(tiles_root, 2024, name)))
    out = tmp_path / f"tile.{ext}"
    write_tile_index(store, str(out), zarr_format=fmt)
    g = open_index(str(out), allow=[str(tiles_root)])
    np.testing.assert_array_equal(g["embeddings"][:], np.load(tile_npy(tiles_root, 2024, name)))
    np.testing.assert_array_equal(g["scales"][:], np.load(tile_npy(tiles_root, 2024, name).with_name(f"{name}_scales.npy")))
    assert g.attrs["proj:code"] == "EPSG:32734" and g.attrs["spatial:shape"] == [PX, PX]
    t = g.attrs["spatial:transform"]
    np.testing.assert_array_equal(g["easting"][:], t[2] + (np.arange(PX) + 0.5) * 10)
    if ext == "json":  # no pixel byte is in the index: it is references and metadata only
        assert out.stat().st_size < 20_000


def test_tile_index_cli_and_xarray(tiles_root, tmp_path):
    out = tmp_path / "tiles.json"
    p = run_cli("index", "tiles", str(tiles_root), "--year", "2024", "-o", str(out))
    assert "wrote" in p.stdout
    g = open_index(str(out), allow=[str(tiles_root)])
    assert sorted(g.group_keys()) == sorted(f"grid_{lon:.2f}_{lat:.2f}" for lon, lat in
                                            [(-0.05, 50.85), (0.05, 50.85), (-0.05, 50.75), (18.45, -33.95)])
    ds = xr.open_zarr(g.store, group="grid_0.05_50.85", consolidated=False, zarr_format=3, chunks=None)
    np.testing.assert_array_equal(ds["embeddings"].values, np.load(tile_npy(tiles_root, 2024, "grid_0.05_50.85")))
    assert ds["embeddings"].dims == ("northing", "easting", "band")


def test_years_index_stacks_years_without_copying(two_years, tmp_path):
    root, stores = two_years
    out = tmp_path / "years.json"
    run_cli("index", "years", str(stores / "2023.zarr"), str(stores / "2024.zarr"), "-o", str(out))
    doc = json.loads(out.read_text())
    targets = {v[0] for v in doc["refs"].values() if isinstance(v, list)}
    assert targets and all("/c/" in t for t in targets)  # whole shard files of the year stores
    assert all(v[1] == 0 for v in doc["refs"].values() if isinstance(v, list))
    g = open_index(str(out), allow=[f"file://{stores}/"])
    e = g["utm30/embeddings"]
    assert e.metadata.dimension_names == ("year", "northing", "easting", "band")
    assert list(g["utm30/year"][:]) == [2023, 2024]
    z23 = zarr.open_group(stores / "2023.zarr" / "utm30", mode="r")
    z24 = zarr.open_group(stores / "2024.zarr" / "utm30", mode="r")
    t = g["utm30"].attrs["spatial:transform"]
    assert t[5] == z24.attrs["spatial:transform"][5] > z23.attrs["spatial:transform"][5]  # 2024 grew north
    valid24 = np.argwhere(~np.isnan(z24["scales"][:]))
    (r0, c0), (r1, c1) = valid24.min(axis=0), valid24.max(axis=0) + 1
    np.testing.assert_array_equal(e[1, r0:r1, c0:c1], z24["embeddings"][r0:r1, c0:c1])
    np.testing.assert_array_equal(g["utm30/scales"][1], z24["scales"][:])
    dr = round((t[5] - z23.attrs["spatial:transform"][5]) / 2560) * 256
    h23 = z23["embeddings"].shape[0]
    valid23 = np.argwhere(~np.isnan(z23["scales"][:]))
    (a0, b0), (a1, b1) = valid23.min(axis=0), valid23.max(axis=0) + 1
    np.testing.assert_array_equal(e[0, dr + a0:dr + a1, b0:b1], z23["embeddings"][a0:a1, b0:b1])
    np.testing.assert_array_equal(g["utm30/scales"][0, dr:dr + h23], z23["scales"][:])
    assert np.isnan(g["utm30/scales"][0, :dr]).all()  # 2023 has nothing north of its grid
    np.testing.assert_array_equal(g["utm30/northing"][:], z24["northing"][:])
    ds = xr.open_zarr(g.store, group="utm30", consolidated=False, zarr_format=3, chunks=None)
    np.testing.assert_array_equal(ds["scales"].sel(year=2024).values, z24["scales"][:])


def test_years_index_v2_references_inner_chunks(two_years, tmp_path):
    _, stores = two_years
    store = YearsParser()([str(stores / "2023.zarr"), str(stores / "2024.zarr")])
    write_tile_index(store, str(tmp_path / "y2.json"), zarr_format=2)
    g = open_index(str(tmp_path / "y2.json"), allow=[str(stores)])
    z24 = zarr.open_group(stores / "2024.zarr" / "utm30", mode="r")
    np.testing.assert_array_equal(g["utm30/embeddings"][1], z24["embeddings"][:])
    np.testing.assert_array_equal(g["utm30/scales"][1], z24["scales"][:])


def test_templates_and_url_overrides(two_years, tmp_path):
    _, stores = two_years
    store = YearsParser()([str(stores / "2023.zarr"), str(stores / "2024.zarr")])
    out = tmp_path / "rel.json"
    write_tile_index(store, str(out), template_base="{{base}}")
    doc = json.loads(out.read_text())
    assert doc["templates"] == {"base": ""}
    assert all(v[0].startswith("{{base}}20") for v in doc["refs"].values() if isinstance(v, list))
    with pytest.raises(ValueError, match="pass base"):
        open_index(str(out))
    moved = tmp_path / "moved"
    shutil.copytree(stores, moved)
    g = open_index(str(out), base=str(moved) + "/")
    np.testing.assert_array_equal(g["utm30/embeddings"][1], zarr.open_group(moved / "2024.zarr/utm30")["embeddings"][:])
    over = tmp_path / "over.json"
    write_tile_index(store, str(over), url_overrides={f"file://{stores}/": f"file://{moved}/"})
    doc = json.loads(over.read_text())
    assert all(str(moved) in v[0] for v in doc["refs"].values() if isinstance(v, list))
    np.testing.assert_array_equal(open_index(str(over))["utm30/scales"][1],
                                  zarr.open_group(moved / "2024.zarr/utm30")["scales"][:])


def test_pyramid_index_keeps_multiscales(store, tmp_path):
    out = tmp_path / "pyr.json"
    write_tile_index(PyramidParser()(str(store)), str(out))
    g = open_index(str(out), allow=[str(store)])
    src = zarr.open_group(store / "global_rgb", mode="r")
    assert g.attrs["multiscales"] == src.attrs["multiscales"]
    k = len(g.attrs["multiscales"]["layout"]) - 1
    np.testing.assert_array_equal(g[f"{k}/rgb"][:], src[f"{k}/rgb"][:])
    f = sorted(p for p in (store / "global_rgb" / "0" / "rgb" / "c").rglob("*") if p.is_file())[0]
    i, j = int(f.parts[-3]), int(f.parts[-2])
    np.testing.assert_array_equal(g["0/rgb"][i * 256:(i + 1) * 256, j * 256:(j + 1) * 256],
                                  src["0/rgb"][i * 256:(i + 1) * 256, j * 256:(j + 1) * 256])
    write_tile_index(PyramidParser()(str(store)), str(tmp_path / "two.json"), segments=["0", "2"])
    assert sorted(open_index(str(tmp_path / "two.json"), allow=[str(store)]).group_keys()) == ["0", "2"]


def test_writer_argument_errors(tiles_root, tmp_path):
    store = TileParser()(str(tile_npy(tiles_root, 2024, "grid_0.05_50.85")))
    cases = [(dict(output=str(tmp_path / "x.txt")), "must end in .json or .parquet"),
             (dict(output=str(tmp_path / "x.json"), zarr_format=4), "zarr_format must be 2 or 3"),
             (dict(output=str(tmp_path / "x.json"), template_base="{{base}}", url_overrides={"a": "b"}), "mutually exclusive"),
             (dict(output=str(tmp_path / "x.parquet"), parquet_engine="polars"), "parquet_engine must be"),
             (dict(output=str(tmp_path / "x.json"), segments=["nope"]), "unknown segment")]
    for kw, msg in cases:
        output = kw.pop("output")
        with pytest.raises(ValueError, match=msg):
            write_tile_index(store, output, **kw)
    p = run_cli("index", "tiles", str(tiles_root), "--year", "2024", "-o", str(tmp_path / "x.json"), "--zarr-format", "5",
                check=False)
    assert p.returncode == 2 and "zarr_format must be 2 or 3" in p.stderr and "Traceback" not in p.stderr


def test_bad_tiles_and_vanished_files(tiles_root, tmp_path, world):
    root = tmp_path / "t"
    shutil.copytree(tiles_root, root)
    d = root / EMBEDDINGS_DIR / "2024" / "grid_0.05_50.85"
    f = d / "grid_0.05_50.85.npy"
    data = f.read_bytes()
    f.write_bytes(data[:4000])
    p = run_cli("index", "tiles", str(root), "--year", "2024", "-o", str(tmp_path / "a.json"), check=False)
    assert p.returncode == 2 and "truncated" in p.stderr and "grid_0.05_50.85.npy" in p.stderr
    np.save(f, np.load(tile_npy(tiles_root, 2024, "grid_0.05_50.85"))[..., :64])
    p = run_cli("index", "tiles", str(root), "--year", "2024", "-o", str(tmp_path / "a.json"), check=False)
    assert p.returncode == 2 and "64 bands" in p.stderr
    shutil.rmtree(d)
    with pytest.raises(BuildError, match="file not found"):
        TileParser()(str(f))
    # an index whose target file disappears: the read error names the key and the URL
    out = tmp_path / "ok.json"
    run_cli("index", "tiles", str(root), "--year", "2024", "-o", str(out))
    g = open_index(str(out))
    victim = root / EMBEDDINGS_DIR / "2024" / "grid_-0.05_50.85" / "grid_-0.05_50.85_scales.npy"
    victim.unlink()
    with pytest.raises(Exception) as e:
        g["grid_-0.05_50.85/scales"][:]
    assert "grid_-0.05_50.85/scales/c/0/0" in str(e.value) and str(victim) in str(e.value)


def test_years_that_cannot_be_stacked(two_years, tmp_path):
    _, stores = two_years
    other = tmp_path / "other.zarr"
    shutil.copytree(stores / "2024.zarr", other)
    meta = other / "utm30" / "zarr.json"
    doc = json.loads(meta.read_text())
    doc["attributes"]["tessera:model_version"] = "2.0"
    doc["attributes"]["tessera:year"] = 2025
    meta.write_text(json.dumps(doc))
    root = json.loads((other / "zarr.json").read_text())
    root["attributes"]["tessera:year"] = 2025
    root.pop("consolidated_metadata", None)
    (other / "zarr.json").write_text(json.dumps(root))
    with pytest.raises(BuildError, match="model_version '2.0' differs"):
        YearsParser()([str(stores / "2024.zarr"), str(other)])
    with pytest.raises(BuildError, match="given twice"):
        YearsParser()([str(stores / "2024.zarr"), str(stores / "2024.zarr")])


def test_tile_parser_reads_headers_over_http_with_range_requests(tiles_root, tmp_path):
    """The parser on an http:// URL (our Range-honouring server): references point at the HTTP files."""
    from browser_util import static_server
    name = "grid_0.05_50.85"
    served = tmp_path / "served"
    shutil.copytree(tiles_root, served)
    (served / "index.html").write_text("tiles")  # `builder serve` serves a site root
    with static_server(served) as base:
        url = f"{base}{EMBEDDINGS_DIR}/2024/{name}/{name}.npy"
        store = TileParser()(url)
        out = tmp_path / "http.json"
        write_tile_index(store, str(out))
        doc = json.loads(out.read_text())
        assert all(v[0].startswith(base) for v in doc["refs"].values() if isinstance(v, list))
        g = open_index(str(out), allow=[base])
        np.testing.assert_array_equal(g["embeddings"][:], np.load(tile_npy(tiles_root, 2024, name)))


# ------------------------------------------------------------ containment --
ESCAPES = {
    "template ..": ("{{base}}" + "../" * 40 + "etc/passwd", "/etc/"),
    "file URL": ("file:///etc/passwd", "file:///etc/"),
    "other host": ("http://other-host/data/x.npy", "http://other-host/"),
    "absolute path": ("/etc/passwd", "/etc"),
}


@pytest.mark.parametrize("case", list(ESCAPES))
def test_index_references_outside_base_are_refused_unless_allowed(two_years, tmp_path, case):
    _, stores = two_years
    moved = tmp_path / "moved"
    shutil.copytree(stores, moved)
    out = tmp_path / "rel.json"
    write_tile_index(YearsParser()([str(moved / "2023.zarr"), str(moved / "2024.zarr")]), str(out),
                     template_base="{{base}}")
    doc = json.loads(out.read_text())
    key = sorted(k for k, v in doc["refs"].items() if isinstance(v, list))[0]
    url, prefix = ESCAPES[case]
    doc["refs"][key] = [url] if case == "template .." else [url, 0, 100]
    out.write_text(json.dumps(doc))
    with pytest.raises(ValueError) as e:
        open_index(str(out), base=str(moved) + "/")
    msg = str(e.value)
    assert key in msg and url in msg and "allow" in msg, msg
    assert "\n" not in msg
    g = open_index(str(out), base=str(moved) + "/", allow=[prefix])  # the caller's explicit consent
    assert list(g["utm30/year"][:]) == [2023, 2024]
    if case == "template ..":  # and what it then reads is exactly what the reference names
        from zarr.core.buffer import default_buffer_prototype
        from zarr.core.sync import sync
        assert sync(g.store.get(key, default_buffer_prototype())).to_bytes() == Path("/etc/passwd").read_bytes()


def test_index_containment_default_is_the_index_directory(two_years, tmp_path):
    """An untemplated index opens without allow= when every file it references lies below its own
    directory; a reference that escapes by `..` is refused even though it names a path below it."""
    _, stores = two_years
    here = tmp_path / "data"
    shutil.copytree(stores, here)
    out = here / "years.json"
    write_tile_index(YearsParser()([str(here / "2023.zarr"), str(here / "2024.zarr")]), str(out))
    g = open_index(str(out))
    assert list(g["utm30/year"][:]) == [2023, 2024]
    doc = json.loads(out.read_text())
    key = sorted(k for k, v in doc["refs"].items() if isinstance(v, list))[0]
    doc["refs"][key][0] = doc["refs"][key][0].replace("/2023.zarr/", "/2023.zarr/../../../outside/")
    out.write_text(json.dumps(doc))
    with pytest.raises(ValueError, match="outside"):
        open_index(str(out))
    (tmp_path / "elsewhere").mkdir()
    (here / "link").symlink_to(tmp_path / "elsewhere")  # a path below the directory that leads out of it
    for target in (f"{here}/link/x", f"file://{here}/2023.zarr/%2e%2e/%2e%2e/x"):
        doc["refs"][key][0] = target
        out.write_text(json.dumps(doc))
        with pytest.raises(ValueError, match="outside"):
            open_index(str(out))
    doc["gen"] = [{"key": "x/{{i}}", "url": "file:///etc/passwd", "dimensions": {"i": 2}}]
    del doc["refs"][key]
    out.write_text(json.dumps(doc))
    with pytest.raises(ValueError, match="gen"):
        open_index(str(out))


def test_parquet_index_references_are_checked_at_open(tiles_root, tmp_path):
    name = "grid_0.05_50.85"
    out = tmp_path / "tile.parquet"
    write_tile_index(TileParser()(str(tile_npy(tiles_root, 2024, name))), str(out), zarr_format=2)
    with pytest.raises(ValueError, match="outside") as e:
        open_index(str(out))
    assert f"{name}.npy" in str(e.value)
    g = open_index(str(out), allow=[f"file://{tiles_root}"])
    np.testing.assert_array_equal(g["embeddings"][:], np.load(tile_npy(tiles_root, 2024, name)))


# -------------------------------------------------- the multi-year index --
STACK_UUID = "7789f970-f176-4ae4-9cec-d7244be8f2b4"


def _years_index(stores: Path, out: Path, **kw) -> Path:
    write_tile_index(YearsParser()([str(stores / "2023.zarr"), str(stores / "2024.zarr")]), str(out), **kw)
    return out


def _docs(g) -> dict:
    """Every node's zarr.json inside an index, as the index serves it."""
    from zarr.core.buffer import default_buffer_prototype
    from zarr.core.sync import sync
    root = json.loads(sync(g.store.get("zarr.json", default_buffer_prototype())).to_bytes())
    out = {"": root}
    for key in root["consolidated_metadata"]["metadata"]:
        out[key] = json.loads(sync(g.store.get(f"{key}/zarr.json", default_buffer_prototype())).to_bytes())
    return out


@pytest.mark.parametrize("ext", ["json", "parquet"])
def test_multi_year_index_declares_its_own_convention_not_tessera_v1(two_years, tmp_path, ext):
    _, stores = two_years
    g = open_index(str(_years_index(stores, tmp_path / f"y.{ext}")), allow=[str(stores)])
    docs = _docs(g)
    years = sorted(zarr.open_group(stores / f"{y}.zarr", mode="r").attrs["tessera:year"] for y in (2023, 2024))
    root = docs[""]["attributes"]
    assert [c["uuid"] for c in root["zarr_conventions"]] == [STACK_UUID]
    assert root["zarr_conventions"][0]["name"] == "tessera-stack:"
    assert root["tessera-stack:years"] == years and "tessera:year" not in root and "tessera:years" not in root
    zone = docs["utm30"]["attributes"]
    src = zarr.open_group(stores / "2024.zarr" / "utm30", mode="r").attrs
    uuids = [c["uuid"] for c in zone["zarr_conventions"]]
    assert uuids[0] == STACK_UUID and "e7f90d5f-019e-4a38-802f-9fa695e26c71" not in uuids  # not a v1 zone group
    assert [c for c in zone["zarr_conventions"] if c["uuid"] != STACK_UUID] == [
        c for c in src["zarr_conventions"] if c["name"] in ("proj:", "spatial:")]
    assert "tessera:year" not in zone and zone["tessera-stack:years"] == years
    assert zone["proj:code"] == src["proj:code"] and zone["tessera:n_bands"] == src["tessera:n_bands"]


def test_validate_checks_a_multi_year_index(two_years, tmp_path):
    """`validate` opens an index file (JSON or Parquet; a templated one relative to its own directory) and
    checks it against the tessera-stack: rules; each broken rule is one line naming where."""
    _, stores = two_years
    data = tmp_path / "data"
    shutil.copytree(stores, data)
    for name, kw in (("years.json", dict(template_base="{{base}}")), ("years.parquet", dict(template_base="{{base}}")),
                     ("abs.json", {}), ("v2.json", dict(zarr_format=2))):
        out = _years_index(data, data / name, **kw)
        p = run_cli("validate", str(out), check=False)
        if name == "v2.json":
            assert p.returncode == 1 and "Zarr format 2" in p.stdout, p.stdout + p.stderr
            continue
        assert p.returncode == 0, p.stdout + p.stderr
    p = run_cli("validate", str(data / "years.parquet"), "--deep")  # every shard the index references
    n_shards = sum(1 for y in (2023, 2024) for a in ("embeddings", "scales")
                   for f in (data / f"{y}.zarr" / "utm30" / a / "c").rglob("*") if f.is_file())
    assert f"in {n_shards} files" in p.stdout, p.stdout
    doc = json.loads((data / "abs.json").read_text())
    refs = doc["refs"]
    breakages = {
        "root registers tessera: v1": ("zarr.json", lambda d: d["attributes"]["zarr_conventions"].append(
            zarr.open_group(data / "2024.zarr", mode="r").attrs["zarr_conventions"][0]), "root"),
        "zone without its years": ("utm30/zarr.json", lambda d: d["attributes"].pop("tessera-stack:years"),
                                   "utm30"),
        "zone claims a year": ("utm30/zarr.json", lambda d: d["attributes"].update({"tessera:year": 2024}), "utm30"),
        "no year dimension": ("utm30/embeddings/zarr.json", lambda d: d.update(
            dimension_names=["time", "northing", "easting", "band"]), "utm30/embeddings"),
        "wrong years": ("utm30/year/c/0", None, "utm30/year"),
    }
    for what, (key, edit, where) in breakages.items():
        bad = json.loads(json.dumps(doc))
        if edit is None:
            import base64
            bad["refs"][key] = "base64:" + base64.b64encode(np.array([2023, 2025], "<i4").tobytes()).decode()
        else:
            d = json.loads(refs[key])
            edit(d)
            bad["refs"][key] = json.dumps(d)
            if key != "zarr.json":  # keep the consolidated copy in step, so that only the rule is broken
                root = json.loads(bad["refs"]["zarr.json"])
                root["consolidated_metadata"]["metadata"][key[: -len("/zarr.json")]] = d
                bad["refs"]["zarr.json"] = json.dumps(root)
        (data / "bad.json").write_text(json.dumps(bad))
        p = run_cli("validate", str(data / "bad.json"), check=False)
        assert p.returncode == 1, (what, p.stdout)
        assert any(line.startswith(where) for line in p.stdout.splitlines()), (what, p.stdout)


# The upstream proj: and spatial: v1 JSON schemas (descriptions left out), pinned at the commits whose
# registration objects are the ones builder.core.convention writes (name "proj:" / "spatial:"):
# zarr-conventions/geo-proj 0113bc4 and zarr-conventions/spatial 71e4d0d.
_ARR = {"type": "array", "items": {"type": "number"}}
UPSTREAM_PROJ = {
    "type": "object", "required": ["zarr_format", "node_type", "attributes"], "additionalProperties": True,
    "properties": {"zarr_format": {"type": "integer"}, "node_type": {"type": "string", "enum": ["array", "group"]},
                   "attributes": {"type": "object", "required": ["zarr_conventions"], "$ref": "#/$defs/projAttributes",
                                  "properties": {"zarr_conventions": {"type": "array", "contains": {
                                      "$ref": "#/$defs/conventionMetadata"}}}}},
    "$defs": {
        "conventionMetadata": {
            "type": "object", "additionalProperties": False,
            "anyOf": [{"required": ["schema_url"]}, {"required": ["spec_url"]}, {"required": ["uuid"]}],
            "properties": {
                "schema_url": {"type": "string", "const": "https://raw.githubusercontent.com/zarr-experimental/geo-proj/refs/tags/v1/schema.json"},
                "spec_url": {"type": "string", "const": "https://github.com/zarr-experimental/geo-proj/blob/v1/README.md"},
                "uuid": {"type": "string", "const": "f17cb550-5864-4468-aeb7-f3180cfb622f"},
                "name": {"type": "string", "const": "proj:"},
                "description": {"type": "string", "const": "Coordinate reference system information for geospatial data"}}},
        "projAttributes": {
            "type": "object", "additionalProperties": True,
            "properties": {"zarr_conventions": True, "proj:code": {"type": "string", "pattern": "^[A-Z]+:[0-9]+$"},
                           "proj:wkt2": {"type": "string"},
                           "proj:projjson": {"$ref": "https://proj.org/schemas/v0.7/projjson.schema.json"}},
            "oneOf": [{"required": ["proj:code"]}, {"required": ["proj:wkt2"]}, {"required": ["proj:projjson"]}]}},
}
UPSTREAM_SPATIAL = {
    "type": "object", "required": ["zarr_format", "node_type", "attributes"], "additionalProperties": True,
    "properties": {"zarr_format": {"type": "integer"}, "node_type": {"type": "string", "enum": ["array", "group"]},
                   "attributes": {"type": "object", "required": ["zarr_conventions"],
                                  "$ref": "#/$defs/spatialAttributes",
                                  "properties": {"zarr_conventions": {"type": "array", "contains": {
                                      "$ref": "#/$defs/conventionMetadata"}}}}},
    "$defs": {
        "conventionMetadata": {
            "type": "object", "additionalProperties": False,
            "anyOf": [{"required": ["schema_url"]}, {"required": ["spec_url"]}, {"required": ["uuid"]}],
            "properties": {
                "schema_url": {"type": "string", "const": "https://raw.githubusercontent.com/zarr-conventions/spatial/refs/tags/v1/schema.json"},
                "spec_url": {"type": "string", "const": "https://github.com/zarr-conventions/spatial/blob/v1/README.md"},
                "uuid": {"type": "string", "const": "689b58e2-cf7b-45e0-9fff-9cfc0883d6b4"},
                "name": {"type": "string", "const": "spatial:"},
                "description": {"type": "string", "const": "Spatial coordinate information"}}},
        "spatialAttributes": {
            "type": "object", "additionalProperties": True, "required": ["spatial:dimensions"],
            "properties": {
                "zarr_conventions": True,
                "spatial:dimensions": {"type": "array", "items": {"type": "string"},
                                       "oneOf": [{"minItems": 2, "maxItems": 2}, {"minItems": 3, "maxItems": 3}]},
                "spatial:bbox": {**_ARR, "oneOf": [{"minItems": 4, "maxItems": 4}, {"minItems": 6, "maxItems": 6}]},
                "spatial:transform_type": {"type": "string"},
                "spatial:transform": {**_ARR, "oneOf": [{"minItems": 6, "maxItems": 6}, {"minItems": 9, "maxItems": 9}]},
                "spatial:shape": {"type": "array", "items": {"type": "integer", "minimum": 1},
                                  "oneOf": [{"minItems": 2, "maxItems": 2}, {"minItems": 3, "maxItems": 3}]},
                "spatial:registration": {"type": "string", "enum": ["node", "pixel"]},
                "multiscales": {"type": "object"}},
            "if": {"properties": {"multiscales": {"required": ["layout"]}}, "required": ["multiscales"]},
            "then": {"not": {"anyOf": [{"required": ["spatial:transform"]}, {"required": ["spatial:shape"]}]}}}},
}


@pytest.mark.parametrize("ext", ["json", "parquet"])
def test_index_zone_groups_pass_the_upstream_proj_and_spatial_schemas(two_years, store, tmp_path, ext):
    import jsonschema
    _, stores = two_years
    g = open_index(str(_years_index(stores, tmp_path / f"y.{ext}")), allow=[str(stores)])
    out = tmp_path / f"one.{ext}"  # and a one-year stack of three zones, one of them southern
    write_tile_index(YearsParser()([str(store)]), str(out))
    docs = {**_docs(g), **{f"one/{k}": v for k, v in _docs(open_index(str(out), allow=[str(store)])).items()}}
    zones = [k for k in docs if k.split("/")[-1].startswith("utm") and k.count("/") <= 1 and docs[k].get(
        "node_type") == "group"]
    assert sorted(zones) == ["one/utm30", "one/utm31", "one/utm34", "utm30"]
    for schema in (UPSTREAM_PROJ, UPSTREAM_SPATIAL):
        v = jsonschema.Draft202012Validator(schema)
        for z in zones:
            assert [e.message for e in v.iter_errors(docs[z])] == [], z
        bad = json.loads(json.dumps(docs[zones[0]]))  # the check can fail: a registration that is not theirs
        for c in bad["attributes"]["zarr_conventions"]:
            c["name"] = c["name"].rstrip(":")
        assert list(v.iter_errors(bad))


def test_explorer_recognises_the_index_by_its_registration(two_years, tmp_path):
    import jsonschema

    from builder.core.reader import StoreModel
    from builder.core.source import Source, SourceError, as_slices
    _, stores = two_years
    g = open_index(str(_years_index(stores, tmp_path / "y.json")), allow=[str(stores)])
    root = _docs(g)[""]

    class IndexSource(Source):
        url = "years.json"
        prefetches = False

        def __init__(self, doc):
            self.doc = doc

        async def meta(self):
            return self.doc

        async def read(self, path, box, hint="pixel"):  # the Source protocol (app/reader.py)
            return g[path][as_slices(box)]

    m = run_async(StoreModel(IndexSource(root), jsonschema=jsonschema).open())
    assert m.years == [2023, 2024] and m.year is None
    z24 = zarr.open_group(stores / "2024.zarr" / "utm30", mode="r")
    r, c = (int(x) for x in np.argwhere(~np.isnan(z24["scales"][:]))[0])
    from pyproj import Transformer
    t = z24.attrs["spatial:transform"]
    lon, lat = Transformer.from_crs(32630, 4326, always_xy=True).transform(t[2] + (c + 0.5) * 10, t[5] - (r + 0.5) * 10)
    zone, row, col, vecs = run_async(m.pixel_years(lon, lat))
    want = z24["embeddings"][r, c].astype(np.float32) * z24["scales"][r, c]
    np.testing.assert_array_equal(vecs[1], want)
    # A window of each year, read by its year index (builder/core/kinds.py YearsIndex): the index shows no year itself.
    from app.tools.region import read_window
    zone = m.zones["utm30"]
    win = max(r - 3, 0), min(r + 5, zone.height), max(c - 2, 0), min(c + 6, zone.width)
    for t, year in enumerate((2023, 2024)):
        q, s = g["utm30/embeddings"][t, win[0]:win[1], win[2]:win[3]], g["utm30/scales"][t, win[0]:win[1], win[2]:win[3]]
        np.testing.assert_array_equal(run_async(read_window(m, zone, win, year)), q.astype(np.float32) * s[..., None])
    assert m.kind.showing(m, 2024) is None
    with pytest.raises(ValueError, match="2022"):
        run_async(read_window(m, zone, win, 2022))
    unregistered = json.loads(json.dumps(root))
    unregistered["attributes"]["zarr_conventions"] = []
    with pytest.raises(SourceError, match="not a tessera store"):
        run_async(StoreModel(IndexSource(unregistered), jsonschema=jsonschema).open())


def test_the_python_reader_opens_the_index_as_its_own_kind_by_its_registration(two_years, tmp_path):
    from builder.reader import open_store
    from builder.reader.stack import StackStore
    _, stores = two_years
    idx = open_store(str(_years_index(stores, tmp_path / "y.json")), allow=[str(stores)])
    assert isinstance(idx, StackStore) and idx.years == [2023, 2024]
    with pytest.raises(ValueError, match="is outside"):  # its references are held to its directory, as a catalog's
        open_store(str(_years_index(stores, tmp_path / "z.json")))
