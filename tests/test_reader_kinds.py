"""builder.reader on the upstream distributions: a geoemb: v2 store with nested-depth arrays and the dClimate
v1.1 plain copy (256 x 256 x 128 inner chunks, PCodec scales, quality arrays, years_complete).

The stores are written by tests/distributions.py with zarr-python from its own random arrays, and every
expected value here comes from those arrays (never from the reader), compared bit for bit; each kind is
read from the local files and over HTTP Range requests (`python -m builder serve`).
"""
from __future__ import annotations

import json

import numpy as np
import pytest
import zarr
from pyproj import Transformer

from builder.reader import open_store
from builder.reader.store import DClimateStore, GeoembStore
from distributions import add_depth_array, write_dclimate, write_geoemb_v2

ROWS = np.array([3, 70, 200, 255, 256, 300, 511])  # water corner, inner, a shard and inner-chunk edge, the last
COLS = np.array([5, 70, 100, 255, 256, 480, 511])


@pytest.fixture(scope="module")
def served(tmp_path_factory):
    root = tmp_path_factory.mktemp("kinds")
    truths = {"geoemb-v2": write_geoemb_v2(root / "geoemb-v2.zarr"), "dclimate": write_dclimate(root / "dclimate.zarr"),
              "geoemb-d016": write_geoemb_v2(root / "geoemb-d016.zarr", depth_names={16: "embeddings_d016"})}
    for name, bands in (("embeddings_d0", 0), ("embeddings_d128", 128), ("embeddings_d200", 200)):
        add_depth_array(root / "geoemb-d016.zarr", name, bands)  # no nested depth: none, all or more than all bands
    (root / "index.html").write_text("stores for tests/test_reader_kinds.py")
    return root, truths


@pytest.fixture(scope="module")
def http(served):
    from browser_util import static_server
    with static_server(served[0]) as base:
        yield base


def url(served, http, transport, name):
    return f"{http}{name}.zarr" if transport == "http" else str(served[0] / f"{name}.zarr")


def lonlat(zone, row, col):
    """The lon/lat of a pixel centre of a writer's zone (its northern CRS, southern data at negative y)."""
    e, n = zone.pixel_centre(row, col)
    num = int(zone.name[3:])
    south = n < 0
    crs = (32700 if south else 32600) + num
    return Transformer.from_crs(crs, 4326, always_xy=True).transform(e, n + 10_000_000 if south else n)


def test_writers_follow_the_facts(served):
    """The fixtures themselves: depth arrays are byte prefixes with larger chunks, dClimate scales are PCodec,
    inner chunks are 256 x 256 x 128, quality arrays and years_complete are there."""
    root, _ = served
    g = zarr.open_group(str(root / "geoemb-v2.zarr"), mode="r")
    assert g.attrs["geoemb:depths"] == [4, 16]
    z = g["utm30"]
    for d in (4, 16):
        a = z[f"embeddings_d{d}"]
        assert a.metadata.dimension_names == ("time", f"band_d{d}", "y", "x")
        assert np.prod(a.chunks) > np.prod(z["embeddings"].chunks) // 128 * d  # larger inner chunks
        np.testing.assert_array_equal(a[:, :, 40:90, 10:20], z["embeddings"][:, :d, 40:90, 10:20])
    dc = json.loads((root / "dclimate.zarr" / "utm34" / "scales" / "zarr.json").read_text())
    assert dc["codecs"][0]["configuration"]["codecs"][0]["name"] == "numcodecs.pcodec"
    emb = zarr.open_group(str(root / "dclimate.zarr"), mode="r")["utm31/embeddings"]
    assert emb.chunks == (1, 128, 256, 256)
    assert dict(zarr.open_group(str(root / "dclimate.zarr"), mode="r")["utm31"].attrs)["years_complete"] == [2024]


@pytest.mark.parametrize("transport", ["local", "http"])
def test_open_store_tells_the_kinds_apart(served, http, transport):
    assert type(open_store(url(served, http, transport, "geoemb-v2"))) is GeoembStore
    s = open_store(url(served, http, transport, "dclimate"))
    assert type(s) is DClimateStore and s.years == [2024, 2025] and sorted(s.zones(2024)) == ["utm31", "utm34"]


@pytest.mark.parametrize("transport", ["local", "http"])
@pytest.mark.parametrize("depth", [None, 4, 16])
def test_geoemb_depth_arrays_read_the_written_prefixes(served, http, transport, depth):
    truth = served[1]["geoemb-v2"]
    s = open_store(url(served, http, transport, "geoemb-v2"))
    z = truth.zones["utm30"]
    for t, year in enumerate(truth.years):
        v = s.view("utm30", year)
        assert v.depths == [4, 16]
        d = 128 if depth is None else depth
        q, sc = v.pixels(ROWS, COLS, depth=depth)
        np.testing.assert_array_equal(q, z.emb[t, :d, ROWS, COLS])
        assert sc.tobytes() == z.scales[t, ROWS, COLS].tobytes()  # bit for bit, NaN and +inf included
        q, sc = v.box(slice(250, 290), slice(20, 70), depth=depth)
        np.testing.assert_array_equal(q, np.moveaxis(z.emb[t, :d, 250:290, 20:70], 0, -1))
        assert sc.tobytes() == z.scales[t, 250:290, 20:70].tobytes()
        got = v.dequantised(slice(0, 80), slice(0, 80), depth=depth)
        s_ = z.scales[t, :80, :80]
        want = np.where(np.isfinite(s_)[..., None], np.moveaxis(z.emb[t, :d, :80, :80], 0, -1) * s_[..., None], np.nan)
        np.testing.assert_array_equal(got, want.astype(np.float32))


def test_a_missing_depth_is_one_line(served):
    v = open_store(served[0] / "geoemb-v2.zarr").view("utm30", 2024)
    with pytest.raises(ValueError, match=r"^utm30: no depth-8 array \(embeddings_d\{D\} depths: 4, 16\)$"):
        v.pixels(ROWS, COLS, depth=8)


@pytest.mark.parametrize("transport", ["local", "http"])
def test_a_depth_array_is_read_by_its_name_and_arrays_of_no_depth_are_refused_in_one_line(served, http, transport):
    """`embeddings_d016` is depth 16; arrays named as depths of 0, all 128 or 200 bands are no nested depth of
    128-band vectors (builder/core/layout.py's rule, the explorer's too): not listed, and asked for, one line."""
    z = served[1]["geoemb-d016"].zones["utm30"]
    v = open_store(url(served, http, transport, "geoemb-d016")).view("utm30", 2024)
    assert v.depths == [4, 16]
    q, sc = v.pixels(ROWS, COLS, depth=16)
    np.testing.assert_array_equal(q, z.emb[1, :16, ROWS, COLS])
    q, _ = v.box(slice(250, 290), slice(20, 70), depth=16)
    np.testing.assert_array_equal(q, np.moveaxis(z.emb[1, :16, 250:290, 20:70], 0, -1))
    for d in (0, 128, 200):
        with pytest.raises(ValueError, match=rf"^utm30/embeddings_d{d}: {d} bands; a nested depth has 1 to 127 of "
                                             rf"the embeddings' 128$"):
            v.pixels(ROWS, COLS, depth=d)


@pytest.mark.parametrize("transport", ["local", "http"])
def test_dclimate_reads_the_written_values_and_years_complete(served, http, transport):
    truth = served[1]["dclimate"]
    s = open_store(url(served, http, transport, "dclimate"))
    for name, z in truth.zones.items():
        v = s.view(name, 2024)
        q, sc = v.pixels(ROWS, COLS)
        np.testing.assert_array_equal(q, z.emb[0, :, ROWS, COLS])
        assert sc.tobytes() == z.scales[0, ROWS, COLS].tobytes()  # PCodec scales, bit for bit
        q, sc = v.box(slice(240, 270), slice(500, 512))  # across an inner chunk edge
        np.testing.assert_array_equal(q, np.moveaxis(z.emb[0, :, 240:270, 500:512], 0, -1))
        assert sc.tobytes() == z.scales[0, 240:270, 500:512].tobytes()
        qual = s.quality(name, 2024, ROWS, COLS)
        assert sorted(qual) == sorted(z.quality)
        for k, a in z.quality.items():
            np.testing.assert_array_equal(qual[k], a[0, ROWS, COLS])
        # a probe at a pixel centre: the written vector times its scale
        lon, lat = lonlat(z, 300, 480)
        vec, status = s.probe(lon, lat, 2024)
        assert status == "valid"
        np.testing.assert_array_equal(vec, z.emb[0, :, 300, 480].astype(np.float32) * z.scales[0, 300, 480])
        # 2025 is on the time axis and holds written values, but is not in years_complete: no data
        assert np.isfinite(z.scales[1, 300, 480])
        assert s.probe(lon, lat, 2025) == (None, "nodata")
        q, sc = s.view(name, 2025).box(slice(0, 10), slice(0, 10))
        assert (q == 0).all() and np.isposinf(sc).all()


@pytest.mark.parametrize("bad", ["2024", [2024.5], [True], list(range(1001))])
def test_a_bad_years_complete_is_one_line(tmp_path, bad):
    dst = write_dclimate(tmp_path / "dc.zarr", px=256).path
    g = zarr.open_group(str(dst), mode="r+", use_consolidated=False)
    g["utm31"].attrs["years_complete"] = bad
    zarr.consolidate_metadata(str(dst))
    with pytest.raises(ValueError, match=r"utm31: years_complete .* is not a list of at most 1000 integer years$"):
        open_store(dst)
