"""builder.reader: tessera: v1 year stores and geoemb: multi-year stores read from Python.

Every path (probe, sample_points, read_region, the xarray engine, the sample CLI) is compared with the
tiles themselves and with direct zarr-python reads, on local files and over HTTP with Range requests.
Request counts come from a logging proxy in front of `python -m builder serve`, i.e. from the wire.
"""
from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import xarray as xr
import zarr
from pyproj import CRS, Transformer

from browser_util import counting_proxy
from builder.reader import open_store
from conftest import PX, run_cli
from geoemb_writer import YEARS, geoemb_root, geoemb_zone, read_tiles, tile_points, write_geoemb

INNER = {"tessera:v1": 4, "geoemb:": 32}  # inner chunk edges the stores under test were written with


# ------------------------------------------------------------------ fixtures --
@pytest.fixture(scope="module")
def served(tmp_path_factory, store, tiles2):
    """One directory served over HTTP: the session's 2024 store, a 2023 store next to it with catalog.json,
    a geoemb: store of both years, and the same geoemb: store without consolidated metadata."""
    root = tmp_path_factory.mktemp("rd-served")
    shutil.copytree(store, root / "v1" / "2024.zarr")
    run_cli("build", str(tiles2), "--year", "2023", "--store", str(root / "v1" / "2023.zarr"),
            "--record", str(root / "rec"), "--scheduler", "threads", "-q")
    run_cli("catalog", str(root / "v1"))
    write_geoemb(tiles2, YEARS, root / "geoemb.zarr")
    write_geoemb(tiles2, YEARS, root / "geoemb-plain.zarr", consolidated=False)
    (root / "index.html").write_text("stores for tests/test_reader.py")  # `builder serve` wants a site root
    return root


@pytest.fixture(scope="module")
def http(served):
    from browser_util import static_server
    with static_server(served) as base, counting_proxy(base) as (url, log):
        yield url, log


def url_of(served, http, transport: str, rel: str) -> str:
    return (http[0] + rel) if transport == "http" else str(served / rel)


# ------------------------------------------------------- expected values ----
def zone_attrs(store_path: Path, zone: str) -> dict:
    return json.loads((store_path / zone / "zarr.json").read_text())["attributes"]


def expected_rowcol(store_path: Path, p: dict) -> tuple[int, int]:
    tr = zone_attrs(store_path, p["zone"])["spatial:transform"]
    return int((tr[5] - p["n"]) // 10), int((p["e"] - tr[2]) // 10)


def direct_pixel(store_path: Path, layout: str, p: dict, t: int) -> tuple[np.ndarray, float]:
    """(int8 vector, scale) of a point read with zarr-python alone."""
    g = zarr.open_group(str(store_path), mode="r")[p["zone"]]
    r, c = expected_rowcol(store_path, p)
    if layout == "geoemb:":
        return g["embeddings"][t, :, r, c], float(g["scales"][t, r, c])
    return g["embeddings"][r, c, :], float(g["scales"][r, c])


def store_path(served: Path, layout: str, year: int) -> Path:
    return served / ("geoemb.zarr" if layout == "geoemb:" else f"v1/{year}.zarr")


REL = {"tessera:v1": "v1/2024.zarr", "geoemb:": "geoemb.zarr"}


# ---------------------------------------------------------------- opening --
def test_geoemb_writer_follows_the_layout_note(served):
    """The test store itself: what the layout note says (zarr-python alone)."""
    g = zarr.open_group(str(served / "geoemb.zarr"), mode="r")
    assert any(c["uuid"] == "61c12cc5-0e28-4056-999a-480cf3fb7e4c" for c in g.attrs["zarr_conventions"])
    z = g["utm34"]
    assert z.attrs["proj:code"] == "EPSG:32634" and z.attrs["spatial:transform"][5] < 0  # south: negative northings
    e, s = z["embeddings"], z["scales"]
    assert e.shape[:2] == (2, 128) and e.chunks == (1, 128, 32, 32) and e.metadata.dimension_names == ("time", "band", "y", "x")
    assert np.isposinf(s.fill_value) and s.metadata.dimension_names == ("time", "y", "x")
    assert list(z["time"][:]) == YEARS and (np.diff(z["y"][:]) < 0).all()
    vals = np.concatenate([g[k]["scales"][:].ravel() for k in ("utm30", "utm31", "utm34")])
    assert np.isnan(vals).any() and np.isposinf(vals).any() and np.isfinite(vals).any()  # water, no data, data


@pytest.mark.parametrize("transport", ["local", "http"])
def test_open_store_detects_both_layouts(served, http, transport):
    v1 = open_store(url_of(served, http, transport, "v1/2024.zarr"))
    assert (v1.layout, v1.years, sorted(v1.zones())) == ("tessera:v1", [2024], ["utm30", "utm31", "utm34"])
    ge = open_store(url_of(served, http, transport, "geoemb.zarr"))
    assert (ge.layout, ge.years, sorted(ge.zones(2023))) == ("geoemb:", YEARS, ["utm30", "utm31", "utm34"])


def test_store_of_neither_layout_is_one_clear_error(tmp_path):
    g = zarr.open_group(str(tmp_path / "other.zarr"), mode="w", zarr_format=3)
    g.attrs["zarr_conventions"] = [{"uuid": "00000000-0000-0000-0000-000000000000", "name": "other:"}]
    with pytest.raises(ValueError) as e:
        open_store(str(tmp_path / "other.zarr"))
    msg = str(e.value)
    assert "\n" not in msg and str(tmp_path / "other.zarr") in msg and "other:" in msg
    assert "tessera:" in msg and "geoemb:" in msg
    (tmp_path / "empty").mkdir()
    with pytest.raises(ValueError, match=r"empty: no zarr\.json and no catalog\.json"):
        open_store(str(tmp_path / "empty"))


def test_other_tessera_dataset_version_is_refused(tmp_path, store):
    shutil.copytree(store, tmp_path / "s.zarr")
    doc = json.loads((tmp_path / "s.zarr" / "zarr.json").read_text())
    doc["attributes"]["tessera:dataset_version"] = "v2"
    (tmp_path / "s.zarr" / "zarr.json").write_text(json.dumps(doc))
    with pytest.raises(ValueError, match=r"tessera:dataset_version 'v2'.*reads 'v1'"):
        open_store(str(tmp_path / "s.zarr"))


def test_years_of_a_catalog_a_directory_and_a_mapping(served, http):
    for url in (str(served / "v1"), str(served / "v1" / "catalog.json"), http[0] + "v1/catalog.json",
                {2023: str(served / "v1" / "2023.zarr"), 2024: str(served / "v1" / "2024.zarr")}):
        s = open_store(url)
        assert s.years == YEARS
    with pytest.raises(ValueError, match=r"year 2020 is not in .*\[2023, 2024\]"):
        s.probe(0.0, 50.0, 2020)
    with pytest.raises(ValueError, match=r"has 2 years \[2023, 2024\]; pass year="):
        s.probe(0.0, 50.0)


# ---------------------------------------------------------------- points --
@pytest.mark.parametrize("transport", ["local", "http"])
@pytest.mark.parametrize("layout", ["tessera:v1", "geoemb:"])
def test_probe_and_sample_points_match_tiles_and_zarr(served, http, tiles2, layout, transport):
    year = 2024
    s = open_store(url_of(served, http, transport, REL[layout]))
    pts = tile_points(tiles2, year, layout)
    assert {p["status"] for p in pts} >= {"valid", "nodata"} and len(pts) > 10
    df = s.sample_points([(p["lon"], p["lat"]) for p in pts] + [(10.0, 10.0)], year)
    assert list(df.columns[:7]) == ["lon", "lat", "zone", "row", "col", "status", "scale"]
    assert list(df.columns[7:]) == [f"b{i}" for i in range(128)]
    path = store_path(served, layout, year)
    t = YEARS.index(year) if layout == "geoemb:" else None
    for k, p in enumerate(pts):
        row = df.iloc[k]
        assert (row["zone"], row["status"]) == (p["zone"], p["status"]), p
        assert (row["row"], row["col"]) == expected_rowcol(path, p)
        q, scale = direct_pixel(path, layout, p, t)
        np.testing.assert_array_equal(np.float32(row["scale"]), np.float32(scale))
        np.testing.assert_array_equal(np.float32(scale), np.float32(p["scale"]))  # the store holds the tile
        vec, status = s.probe(p["lon"], p["lat"], year)
        assert status == p["status"]
        b = row.iloc[7:].to_numpy(dtype=np.float32)
        if p["status"] == "valid":
            np.testing.assert_array_equal(b, p["vector"])
            np.testing.assert_array_equal(vec, p["vector"])
            np.testing.assert_array_equal(vec, q.astype(np.float32) * np.float32(scale))
        else:
            assert vec is None and np.isnan(b).all()
    last = df.iloc[-1]
    assert last["status"] == "outside" and pd.isna(last["zone"]) and pd.isna(last["row"]) and np.isnan(last["scale"])
    assert s.probe(10.0, 10.0, year) == (None, "outside")
    # a DataFrame with lon/lat columns gives the same frame
    pd.testing.assert_frame_equal(s.sample_points(df[["lon", "lat"]], year), df)


def test_probe_each_year_of_a_geoemb_store_and_a_catalog(served, tiles2):
    ge, v1 = open_store(str(served / "geoemb.zarr")), open_store(str(served / "v1" / "catalog.json"))
    for year in YEARS:
        for p in tile_points(tiles2, year, "geoemb:"):
            if p["status"] == "valid":
                np.testing.assert_array_equal(ge.probe(p["lon"], p["lat"], year)[0], p["vector"])
                np.testing.assert_array_equal(v1.probe(p["lon"], p["lat"], year)[0], p["vector"])


def shard_ranges(store_root: Path, zone: str, array: str, rows, cols, t: int | None) -> tuple[set, set]:
    """Ideal requests for pixels (rows, cols), from the shard files themselves: the index of every touched shard
    (a suffix range) and the byte range of every touched non-empty inner chunk (inclusive end, as in HTTP)."""
    meta = json.loads((store_root / zone / array / "zarr.json").read_text())
    shard = meta["chunk_grid"]["configuration"]["chunk_shape"]
    inner = meta["codecs"][0]["configuration"]["chunk_shape"]
    ya, xa = (meta["dimension_names"].index(d) for d in (("y", "x") if "y" in meta["dimension_names"]
                                                         else ("northing", "easting")))
    sy, sx, iy, ix = shard[ya], shard[xa], inner[ya], inner[xa]
    n = int(np.prod([a // b for a, b in zip(shard, inner)]))
    idx, chunks = set(), set()
    for r, c in zip(rows, cols):
        lead = [str(t), "0"] if (t is not None and array == "embeddings") else [str(t)] if t is not None else []
        tail = ["0"] if (t is None and array == "embeddings") else []
        key = "/".join([zone, array, "c", *lead, str(r // sy), str(c // sx), *tail])
        f = store_root / key
        if not f.exists():
            continue
        buf = f.read_bytes()
        table = np.frombuffer(buf[len(buf) - 16 * n - 4:len(buf) - 4], dtype="<u8").reshape(n, 2)
        off, ln = table[(r % sy) // iy * (sx // ix) + (c % sx) // ix]
        idx.add((key, f"bytes=-{16 * n + 4}"))
        if off != 2**64 - 1:
            chunks.add((key, f"bytes={off}-{off + ln - 1}"))
    return idx, chunks


@pytest.mark.parametrize("layout", ["tessera:v1", "geoemb:"])
def test_sampling_reads_one_inner_chunk_per_point_and_each_shard_index_once(served, http, tiles2, layout):
    base, log = http
    rel = REL[layout]
    s = open_store(base + rel)
    pts = [p for p in tile_points(tiles2, 2024, layout) if p["status"] == "valid"]
    path = store_path(served, layout, 2024)
    t = YEARS.index(2024) if layout == "geoemb:" else None
    # points in distinct inner chunks, and one more point in the first point's inner chunk
    seen, chosen = set(), []
    for p in pts:
        r, c = expected_rowcol(path, p)
        if (p["zone"], r // INNER[layout], c // INNER[layout]) not in seen:
            seen.add((p["zone"], r // INNER[layout], c // INNER[layout]))
            chosen.append(p)
    assert len(chosen) >= 6
    r0, c0 = expected_rowcol(path, chosen[0])
    twin_r = r0 + 1 if (r0 + 1) % INNER[layout] else r0 - 1
    tr = zone_attrs(path, chosen[0]["zone"])["spatial:transform"]
    to_ll = Transformer.from_crs(CRS(zone_attrs(path, chosen[0]["zone"])["proj:code"]), 4326, always_xy=True)
    twin = to_ll.transform(tr[2] + (c0 + 0.5) * 10, tr[5] - (twin_r + 0.5) * 10)
    s.zones(2024)  # metadata (and geoemb: time axes) are read once at open; what follows is data only
    log.clear()
    df = s.sample_points([(p["lon"], p["lat"]) for p in chosen] + [twin], 2024)
    assert (df["status"][:-1] == "valid").all()  # (the twin's status does not matter: its chunk is the first's)
    want_idx, want_chunks = set(), set()
    for zone in {p["zone"] for p in chosen}:
        rc = [expected_rowcol(path, p) for p in chosen if p["zone"] == zone]
        for array in ("embeddings", "scales"):
            i, c = shard_ranges(path, zone, array, [x[0] for x in rc], [x[1] for x in rc], t)
            want_idx |= i
            want_chunks |= c
    got = [(p.split(rel + "/", 1)[1], rng) for p, rng, status, _ in log]
    assert all(status == 206 for _, _, status, _ in log)
    assert sorted(got) == sorted(want_idx | want_chunks)  # each index once, each inner chunk once, nothing else
    assert len(want_chunks) == 2 * len(chosen)  # embeddings + scales: one inner chunk per point per array
    size = lambda rng: int(rng.split("-")[-1]) if rng.startswith("bytes=-") else (  # noqa: E731
        int(rng.split("-")[1]) - int(rng[6:].split("-")[0]) + 1)
    assert sum(b for *_, b in log) == sum(size(r) for _, r in want_idx | want_chunks)  # and not a byte more
    # the shard indexes are cached per shard: sampling again costs the inner chunks only
    log.clear()
    s.sample_points([(p["lon"], p["lat"]) for p in chosen], 2024)
    assert sorted((p.split(rel + "/", 1)[1], rng) for p, rng, _, _ in log) == sorted(want_chunks)


# ---------------------------------------------------------------- regions --
def tile_bbox(tiles_root: Path, name: str, year: int = 2024) -> tuple[dict, tuple]:
    t = next(t for t in read_tiles(tiles_root, year) if t["name"] == name)
    to_ll = Transformer.from_crs(t["epsg"], 4326, always_xy=True)
    # inside the tile by 100 m on each side
    w, s = to_ll.transform(t["e0"] + 100, t["n0"] - PX * 10 + 100)
    e, n = to_ll.transform(t["e0"] + PX * 10 - 100, t["n0"] - 100)
    return t, (w, s, e, n)


@pytest.mark.parametrize("transport", ["local", "http"])
@pytest.mark.parametrize("layout,name", [("tessera:v1", "grid_0.05_50.85"), ("geoemb:", "grid_18.45_-33.95"),
                                         ("tessera:v1", "grid_18.45_-33.95")])
def test_read_region_matches_zarr_and_tiles(served, http, tiles2, layout, name, transport):
    s = open_store(url_of(served, http, transport, REL[layout]))
    t, bbox = tile_bbox(tiles2, name)
    ds = s.read_region(bbox, 2024)
    zone = f"utm{t['epsg'] % 100:02d}"
    path = store_path(served, layout, 2024)
    za = zone_attrs(path, zone)
    assert ds.embeddings.dims == ("y", "x", "band") and ds.embeddings.dtype == np.float32
    assert ds.attrs["proj:code"] == za["proj:code"] and ds.attrs["zone"] == zone
    assert CRS.from_wkt(ds["spatial_ref"].attrs["crs_wkt"]) == CRS(za["proj:code"])
    assert ds.embeddings.attrs["grid_mapping"] == "spatial_ref"
    # lazily dask-backed, chunks on the store's shard lattice (v1: the 256 shards; geoemb: 256-pixel blocks)
    import dask.array as da
    assert isinstance(ds.embeddings.data, da.Array)
    tr = za["spatial:transform"]
    r0, c0 = round((tr[5] - float(ds.y[0]) - 5) / 10), round((float(ds.x[0]) - 5 - tr[2]) / 10)
    edges_y = r0 + np.cumsum(ds.embeddings.chunks[0])[:-1]
    edges_x = c0 + np.cumsum(ds.embeddings.chunks[1])[:-1]
    assert (edges_y % 256 == 0).all() and (edges_x % 256 == 0).all() and max(ds.embeddings.chunks[0]) <= 256
    st = ds.attrs["spatial:transform"]
    assert st == [10.0, 0.0, float(ds.x[0]) - 5, 0.0, -10.0, float(ds.y[0]) + 5]
    h, w = ds.sizes["y"], ds.sizes["x"]
    # the window covers the bbox's envelope in the zone's CRS: the tile interior (760 m) grown by the meridian
    # convergence (about 2.5 degrees here: some 35 m a side each way) and rounding to whole pixels
    for size in (h, w):
        assert PX * 10 - 200 <= size * 10 <= PX * 10 - 200 + 120
    # direct zarr-python read of the same window
    g = zarr.open_group(str(path), mode="r")[zone]
    if layout == "geoemb:":
        q = np.moveaxis(g["embeddings"][1, :, r0:r0 + h, c0:c0 + w], 0, -1)
        sc = g["scales"][1, r0:r0 + h, c0:c0 + w]
        ok = np.isfinite(sc)
    else:
        q, sc = g["embeddings"][r0:r0 + h, c0:c0 + w], g["scales"][r0:r0 + h, c0:c0 + w]
        ok = ~np.isnan(sc)
    with np.errstate(invalid="ignore"):  # inf * 0 where geoemb has no data: masked
        want = np.where(ok[..., None], q.astype(np.float32) * sc[..., None], np.float32(np.nan))
    got = ds.embeddings.values
    np.testing.assert_array_equal(got, want)
    np.testing.assert_array_equal(ds.scales.values, sc)
    # and the tile: the same pixels by their coordinates
    n_tile = t["n0"] - (10_000_000 if (layout == "geoemb:" and t["epsg"] // 100 == 327) else 0)
    ti = np.round((n_tile - ds.y.values - 5) / 10).astype(int)
    tj = np.round((ds.x.values - 5 - t["e0"]) / 10).astype(int)
    tq, ts, land = t["q"][np.ix_(ti, tj)], t["scales"][np.ix_(ti, tj)], t["land"][np.ix_(ti, tj)]
    tv = np.where((land & np.isfinite(ts))[..., None], tq.astype(np.float32) * ts[..., None], np.float32(np.nan))
    np.testing.assert_array_equal(got, tv)
    assert np.isfinite(got).any() and np.isnan(got).any()


def test_v1_region_reads_each_shard_whole_once(served, http, tiles2):
    """A v1 region costs one GET per touched shard and array (not one range request per 4x4 inner chunk)."""
    base, log = http
    s = open_store(base + "v1/2024.zarr")
    t, bbox = tile_bbox(tiles2, "grid_0.05_50.85")
    ds = s.read_region(bbox, 2024)
    log.clear()
    ds.load()
    za = zone_attrs(served / "v1" / "2024.zarr", "utm31")["spatial:transform"]
    r0, c0 = round((za[5] - float(ds.y[0]) - 5) / 10), round((float(ds.x[0]) - 5 - za[2]) / 10)
    r1, c1 = r0 + ds.sizes["y"] - 1, c0 + ds.sizes["x"] - 1
    shards = {(sr, sc) for sr in (r0 // 256, r1 // 256) for sc in (c0 // 256, c1 // 256)}
    want = sorted([(f"/v1/2024.zarr/utm31/embeddings/c/{sr}/{sc}/0", None) for sr, sc in shards] +
                  [(f"/v1/2024.zarr/utm31/scales/c/{sr}/{sc}", None) for sr, sc in shards])
    assert sorted((p, rng) for p, rng, _, _ in log) == want
    assert all(status == 200 for *_, status, _ in log)


def test_v1_region_reads_ask_for_no_shard_the_store_never_wrote(served, http):
    """A shard without a valid pixel is never written, and the zone's arrays record those that are
    (builder/core/chunkruns.py): a region across an unwritten shard reads it as fill, with no request for it (a 404
    on the wire before), and the shard beside it as zarr-python does."""
    from sparse_util import missing_beside_present
    base, log = http
    path = served / "v1" / "2024.zarr"
    zone, missing, present, (r0, r1, c0, c1) = missing_beside_present(path)
    za = zone_attrs(path, zone)
    tr = za["spatial:transform"]
    to_ll = Transformer.from_crs(za["proj:code"], 4326, always_xy=True)
    # the window's pixel centres, one pixel in from its edges: the region read covers at least them
    bbox = to_ll.transform_bounds(tr[2] + c0 * 10 + 15, tr[5] - r1 * 10 + 15, tr[2] + c1 * 10 - 15, tr[5] - r0 * 10 - 15)
    ds = open_store(base + "v1/2024.zarr").read_region(bbox, 2024, zone=zone)
    log.clear()
    ds.load()
    assert [p for p, _, status, _ in log if status != 200] == [], log
    shards = {tuple(map(int, p.split("/c/")[1].split("/")[:2])) for p, *_ in log}
    assert present in shards and missing not in shards, shards
    y0, x0 = round((tr[5] - float(ds.y[0]) - 5) / 10), round((float(ds.x[0]) - 5 - tr[2]) / 10)
    h, w = ds.sizes["y"], ds.sizes["x"]
    assert y0 <= r0 + 1 and y0 + h >= r1 - 1 and x0 <= c0 + 1 and x0 + w >= c1 - 1, (y0, x0, h, w)
    g = zarr.open_group(str(path), mode="r")[zone]
    q, sc = g["embeddings"][y0:y0 + h, x0:x0 + w], g["scales"][y0:y0 + h, x0:x0 + w]
    want = np.where(np.isfinite(sc)[..., None], q.astype(np.float32) * sc[..., None], np.float32(np.nan))
    np.testing.assert_array_equal(ds.embeddings.values, want)
    assert np.isfinite(want).any() and np.isnan(want).any()


def test_v1_point_reads_ask_for_no_shard_the_store_never_wrote(served, http):
    """Points read through zarr-python's coordinate selections (sample_points, probe, xarray's point indexing) skip
    the shards the zone's record says do not exist, as region reads do: a point in an unwritten shard is no data
    with no request for it (a 404 for its shard index on the wire before), a point beside it reads zarr-python's
    values."""
    from sparse_util import missing_beside_present
    base, log = http
    path = served / "v1" / "2024.zarr"
    zone, missing, present, (r0, r1, c0, c1) = missing_beside_present(path)
    tr = zone_attrs(path, zone)["spatial:transform"]
    to_ll = Transformer.from_crs(zone_attrs(path, zone)["proj:code"], 4326, always_xy=True)
    g = zarr.open_group(str(path), mode="r")[zone]
    sc = g["scales"][r0:r1, c0:c1]
    (vr, vc), = [np.argwhere(np.isfinite(sc))[0]]
    at_present = (r0 + int(vr), c0 + int(vc))
    at_missing = (missing[0] * 256 + 100, missing[1] * 256 + 100)
    pts = [to_ll.transform(tr[2] + c * 10 + 5, tr[5] - r * 10 - 5) for r, c in (at_missing, at_present)]
    s = open_store(base + "v1/2024.zarr")
    log.clear()
    df = s.sample_points(pts, 2024)
    assert [p for p, _, status, _ in log if status not in (200, 206)] == [], log  # ranged reads: 206
    shards = {tuple(map(int, p.split("/c/")[1].split("/")[:2])) for p, *_ in log if "/c/" in p}
    assert present in shards and missing not in shards, shards
    assert list(df["zone"]) == [zone, zone] and [(int(a), int(b)) for a, b in zip(df["row"], df["col"])] == \
        [at_missing, at_present]
    assert np.isnan(df["scale"][0]) and np.isnan(df.iloc[0, 7:].to_numpy(dtype=np.float32)).all()
    q, scale = g["embeddings"][at_present], g["scales"][at_present]
    assert df["scale"][1] == scale
    np.testing.assert_array_equal(df.iloc[1, 7:].to_numpy(dtype=np.float32), q.astype(np.float32) * scale)


def test_read_region_over_two_zones_asks_for_a_zone(served, tiles2):
    s = open_store(str(served / "v1" / "2024.zarr"))
    bbox = (-0.06, 50.84, 0.06, 50.86)  # both sides of the Greenwich meridian: zones 30 and 31
    with pytest.raises(ValueError, match=r"covers zones utm30, utm31; pass zone=") as e:
        s.read_region(bbox, 2024)
    assert "\n" not in str(e.value)
    ds = s.read_region(bbox, 2024, zone="utm31")
    assert ds.attrs["proj:code"] == "EPSG:32631" and np.isfinite(ds.embeddings.values).any()
    with pytest.raises(ValueError, match=r"covers no zone"):
        s.read_region((10.0, 10.0, 10.1, 10.1), 2024)


def test_read_region_of_a_large_area_streams_in_bounded_memory(tmp_path):
    """A 2048 x 2048 px geoemb: window (2 GiB of float32) computed a block at a time: the peak of traced
    allocations (numpy's included) stays a small fraction of the whole."""
    import tracemalloc
    path = tmp_path / "big.zarr"
    x0, y1, n = 600_000.0, 5_650_000.0, 2048
    emb, scl = geoemb_zone(geoemb_root(path), 30, x0, y1, n, n, [2024])
    emb[0, :, 1000:1040, 300:332] = 3  # one patch of data; the rest is unwritten (+inf: no data)
    scl[0, 1000:1040, 300:332] = 0.5
    zarr.consolidate_metadata(zarr.storage.LocalStore(path))
    to_ll = Transformer.from_crs(32630, 4326, always_xy=True)
    w, s_, e, n_ = to_ll.transform_bounds(x0 + 50, y1 - n * 10 + 50, x0 + n * 10 - 50, y1 - 50)
    ds = open_store(str(path)).read_region((w, s_, e, n_), 2024)
    assert ds.sizes["y"] == ds.sizes["x"] == n and ds.embeddings.nbytes == n * n * 128 * 4
    tracemalloc.start()
    try:
        total = float(ds.embeddings.sum().compute(scheduler="threads", num_workers=2))  # any machine: 2 blocks in flight
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert total == 40 * 32 * 128 * 1.5
    assert peak < ds.embeddings.nbytes / 8, f"peak {peak / 2**20:.0f} MiB"


# ---------------------------------------------------------------- xarray --
@pytest.mark.parametrize("transport", ["local", "http"])
def test_xarray_engine_v1(served, http, transport):
    assert "tessera" in xr.backends.list_engines()
    url = url_of(served, http, transport, "v1/2024.zarr")
    ds = xr.open_dataset(url, engine="tessera", group="utm30")
    assert ds.embeddings.dims == ("y", "x", "band") and ds.rgb.dims == ("y", "x", "rgb_band")
    raw = xr.open_zarr(str(served / "v1" / "2024.zarr"), group="utm30", drop_variables=["rgb"], chunks=None)
    assert ds.sizes["y"] == 1536  # two tiles a shard-row apart: compared a shard row at a time (bounded memory)
    valid = 0
    for r in range(0, ds.sizes["y"], 256):
        q, sc = raw.embeddings[r:r + 256].values, raw.scales[r:r + 256].values
        want = np.where(~np.isnan(sc)[..., None], q.astype(np.float32) * sc[..., None], np.float32(np.nan))
        np.testing.assert_array_equal(ds.embeddings[r:r + 256].values, want)
        valid += int(np.isfinite(want).sum())
    assert valid > 0
    np.testing.assert_array_equal(ds.x.values, raw.easting.values)
    np.testing.assert_array_equal(ds.y.values, raw.northing.values)
    np.testing.assert_array_equal(ds.rgb.values, zarr.open_array(str(served / "v1/2024.zarr/utm30/rgb"), mode="r")[:])
    assert ds.attrs["proj:code"] == "EPSG:32630"
    # chunks={}: dask, one chunk per shard
    dk = xr.open_dataset(url, engine="tessera", group="utm30", chunks={})
    assert dk.embeddings.chunks[0][0] == 256 and dk.embeddings.chunks[2] == (128,)
    q, sc = raw.embeddings[250:270, 20:30].values, raw.scales[250:270, 20:30].values
    np.testing.assert_array_equal(dk.embeddings[250:270, 20:30].values,
                                  np.where(~np.isnan(sc)[..., None], q.astype(np.float32) * sc[..., None], np.nan))


def test_xarray_engine_geoemb(served, http):
    url = http[0] + "geoemb.zarr"
    ds = xr.open_dataset(url, engine="tessera", group="utm34")
    assert ds.embeddings.dims == ("time", "y", "x", "band") and list(ds.time.values) == YEARS
    g = zarr.open_group(str(served / "geoemb.zarr"), mode="r")["utm34"]
    for t in range(len(YEARS)):
        q, sc = g["embeddings"][t], g["scales"][t]
        with np.errstate(invalid="ignore"):  # inf * 0 where geoemb has no data: masked
            want = np.where(np.isfinite(sc)[None], q.astype(np.float32) * sc[None], np.float32(np.nan))
        np.testing.assert_array_equal(ds.embeddings[t].values, np.moveaxis(want, 0, -1))
        assert np.isfinite(want).any() and np.isnan(want).any()
    one = xr.open_dataset(url, engine="tessera", group="utm34", year=2024)
    assert one.embeddings.dims == ("y", "x", "band")
    np.testing.assert_array_equal(one.embeddings[10:50, 100:140].values, np.moveaxis(want[:, 10:50, 100:140], 0, -1))
    np.testing.assert_array_equal(one.scales.values, sc)
    assert (ds.y.values < 0).all()  # southern data: the northern CRS extended south
    with pytest.raises(ValueError, match=r"group= one of utm30, utm31, utm34"):
        xr.open_dataset(url, engine="tessera")


def test_geoemb_without_consolidated_metadata_over_http(served, http, tiles2):
    s = open_store(http[0] + "geoemb-plain.zarr")
    assert sorted(s.zones(2024)) == ["utm30", "utm31", "utm34"]
    p = next(p for p in tile_points(tiles2, 2024, "geoemb:") if p["status"] == "valid")
    np.testing.assert_array_equal(s.probe(p["lon"], p["lat"], 2024)[0], p["vector"])


# ---------------------------------------------------------------- CLI --
def test_sample_cli(served, tiles2, tmp_path):
    pts = tile_points(tiles2, 2023, "tessera:v1")
    pd.DataFrame({"lon": [p["lon"] for p in pts], "lat": [p["lat"] for p in pts]}).to_csv(tmp_path / "p.csv", index=False)
    out = tmp_path / "out.parquet"
    r = run_cli("sample", str(served / "v1"), str(tmp_path / "p.csv"), "-o", str(out), "--year", "2023")
    assert str(out) in r.stdout
    df = pd.read_parquet(out)
    assert list(df["status"]) == [p["status"] for p in pts]
    for k, p in enumerate(pts):
        if p["status"] == "valid":
            np.testing.assert_array_equal(df.iloc[k, 7:].to_numpy(np.float32), p["vector"])
    bad = run_cli("sample", str(served / "v1"), str(tmp_path / "missing.csv"), "-o", str(out), check=False)
    assert bad.returncode == 2 and bad.stderr.count("\n") == 1 and "missing.csv" in bad.stderr
    (tmp_path / "q.csv").write_text("x,y\n1,2\n")
    bad = run_cli("sample", str(served / "v1"), str(tmp_path / "q.csv"), "-o", str(out), "--year", "2023", check=False)
    assert bad.returncode == 2 and "lon" in bad.stderr and bad.stderr.count("\n") == 1
