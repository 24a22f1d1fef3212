"""The browser app's pure-Python parts, run on CPython against real stores."""
from __future__ import annotations

import io

import jsonschema
import numpy as np
import pytest
import zarr
from pyproj import Transformer

from app import geo, render
from app.export import to_csv, to_npy
from builder.core.reader import StoreModel
from builder.core.quant import cosine_map, cosine_table
from builder.core.source import SourceError
from builder.reader.source import ZarrSource
from app.state import UrlState
from builder.core.geometry import central_meridian
from app.tools.region import read_window
from conftest import run_async


@pytest.mark.parametrize("zone,south", [(30, False), (31, False), (34, True), (1, False), (60, True)])
def test_utm_formulas_match_pyproj(zone, south):
    rng = np.random.default_rng(zone)
    cm = central_meridian(zone)
    lon = cm + rng.uniform(-3.6, 3.6, 2000)
    lat = rng.uniform(0.1, 83.5, 2000) * (-1 if south else 1)
    t = Transformer.from_crs(4326, (32700 if south else 32600) + zone, always_xy=True)
    e, n = t.transform(lon, lat)
    e2, n2 = geo.lonlat_to_utm(lon, lat, zone, south)
    assert np.abs(e2 - e).max() < 1e-3 and np.abs(n2 - n).max() < 1e-3  # better than a millimetre
    lon2, lat2 = geo.utm_to_lonlat(e, n, zone, south)
    assert np.abs(lon2 - lon).max() < 1e-8 and np.abs(lat2 - lat).max() < 1e-8


def test_utm_of_the_maps_grids_matches_pyproj_and_dense_points():
    """The map's grids are broadcast lines (View.lonlat_grid): projected one column or row at a time where a term
    depends on longitude or latitude alone, they give what pyproj and the same points laid out densely give."""
    x, y = geo.lonlat_to_merc(np.array([-3.3, -3.1]), np.array([51.4, 51.55]))
    v = render.View(float(x[0]), float(x[1]), float(y[0]), float(y[1]), 760, 520)
    lon, lat = v.lonlat_grid()
    assert lon.strides[0] == 0 and lat.strides[1] == 0  # what the map passes: broadcast lines
    e, n = geo.lonlat_to_utm(lon, lat, 30, False)
    de, dn = geo.lonlat_to_utm(np.ascontiguousarray(lon), np.ascontiguousarray(lat), 30, False)
    assert e.shape == n.shape == (520, 760)
    np.testing.assert_array_equal(e, de)
    np.testing.assert_array_equal(n, dn)
    pe, pn = Transformer.from_crs(4326, 32630, always_xy=True).transform(lon, lat)
    assert np.abs(e - pe).max() < 1e-3 and np.abs(n - pn).max() < 1e-3
    e1, n1 = geo.lonlat_to_utm(lon[7], lat[7], 30, False)  # one row of it, and one point
    np.testing.assert_array_equal(e1, e[7])
    assert geo.lonlat_to_utm(float(lon[3, 5]), float(lat[3, 5]), 30, False) == (e[3, 5], n[3, 5])


def test_mercator_round_trip_matches_pyproj():
    lon, lat = np.array([-179.9, -0.05, 18.45, 120.0]), np.array([-80.0, 50.85, -33.95, 10.0])
    x, y = geo.lonlat_to_merc(lon, lat)
    px, py = Transformer.from_crs(4326, 3857, always_xy=True).transform(lon, lat)
    np.testing.assert_allclose(x, px, atol=1e-6)
    np.testing.assert_allclose(y, py, atol=1e-6)
    lo, la = geo.merc_to_lonlat(x, y)
    np.testing.assert_allclose(lo, lon, atol=1e-10)
    np.testing.assert_allclose(la, lat, atol=1e-10)


def test_url_state_round_trip():
    s = UrlState(store="https://example.org/a b/2024.zarr", year=2024, lon=0.05, lat=50.85, span=3000,
                 sel=(0.051, 50.849), pins=[(0.1, 50.8), (18.45, -33.95)], parts={"sim": "0.85", "sim_mode": "max"})
    back = UrlState.from_url("?embed=1", s.to_hash())
    assert back.store == s.store and back.year == 2024 and back.span == 3000
    assert back.parts == {"sim": "0.85", "sim_mode": "max"}  # an overlay tool's own parts, as text
    assert back.sel == pytest.approx(s.sel) and back.pins == [pytest.approx(p) for p in s.pins]
    assert back.embed is True
    q = UrlState.from_url("?store=data/x.zarr", "#year=2023&lon=bad")
    assert q.store == "data/x.zarr" and q.year == 2023 and q.lon is None


def test_a_broken_field_in_a_link_is_named_and_the_others_still_apply():
    """A hand-edited hash: each field that does not parse is left out and named (the page shows one line, escaped
    there by views.html); the fields after it still apply. The fields it does not know are the overlay tools' (their
    own checks: tests/test_tools_share.py), bounded in number and length."""
    q = UrlState.from_url("", "#year=20x3&lon=inf&lat=50.85&span=-5&sel=1,2,3&pins=0.1,50.8;oops;18.45,-33.95"
                              "&sim=abc&sim_mode=max")
    assert (q.year, q.lon, q.lat, q.span, q.sel) == (None, None, None, None, None)
    assert q.pins == [(0.1, 50.8), (18.45, -33.95)] and q.parts == {"sim": "abc", "sim_mode": "max"}
    assert q.problems == ["year '20x3' is not a whole number", "lon,lat 'inf,50.85' are not finite numbers",
                          "span '-5' is not a positive number", "sel '1,2,3' is not lon,lat",
                          "pins 'oops' is not lon,lat"]
    long = UrlState.from_url("", "#sim=" + "x" * 2001 + "&sim_mode=max")
    assert long.problems == ["sim is longer than 2000 characters"] and long.parts == {"sim_mode": "max"}
    many = UrlState.from_url("", "#" + "&".join(f"k{i}={i}" for i in range(40)))
    assert list(many.parts) == [f"k{i}" for i in range(16)]
    assert UrlState.from_url("", UrlState(year=2024, lon=0.05, lat=50.85, span=3000,
                                          parts={"sim": "0.50"}).to_hash()).problems == []


def test_the_link_names_the_tool_tabs_shown():
    """`?tools=` (what the tessera-explorer directive's :tools: writes): the tabs in the explorer's order, none, or
    all; anything else is named once and all tabs are shown."""
    assert UrlState.from_url("?tools=Scatter,similarity", "").tools == ["similarity", "scatter"]
    assert UrlState.from_url("?tools=none", "").tools == []
    assert UrlState.from_url("", "").tools is None and UrlState.from_url("?tools=", "").tools is None
    bad = UrlState.from_url("?tools=similarity,<b>umap</b>", "")
    assert bad.tools is None and bad.problems == [
        "tools 'similarity,<b>umap</b>' is not a list of tools (labels, classify, regression, clusters, change, "
        "similarity, scatter) or none"]  # escaped where it is shown (views.html), as every other problem


def run(coro):
    return run_async(coro)


def test_model_reads_the_same_pixels_as_zarr(store):
    m = run(StoreModel(ZarrSource(str(store)), jsonschema=jsonschema).open())
    assert m.year == 2024 and sorted(m.zones) == ["utm30", "utm31", "utm34"]
    assert len(m.levels) == 12 and m.levels[0].res == 0.0001
    z = zarr.open_group(store / "utm34", mode="r")
    s = z["scales"][:]
    r, c = map(int, np.argwhere(~np.isnan(s))[len(np.argwhere(~np.isnan(s))) // 2])
    zone = m.zones["utm34"]
    lon, lat = zone.centre_lonlat(r, c)
    hit = m.locate(lon, lat)
    assert hit is not None and hit[0].name == "utm34" and hit[1:] == (r, c)
    px = run(m.pixel_at(lon, lat))
    np.testing.assert_array_equal(px.vector, z["embeddings"][r, c].astype(np.float32) * s[r, c])
    e, n = Transformer.from_crs(4326, 32734, always_xy=True).transform(lon, lat)
    assert abs(e - px.easting) < 1e-3 and abs(n - px.northing) < 1e-3


class GatedSource(ZarrSource):
    """zarr-python reads, counted; each waits for `gate` (set: reads go through) and fails while `fail` is set."""

    def __init__(self, url: str):
        super().__init__(url)
        self.reads, self.fail, self.gate = [], False, None

    async def read(self, path, box, hint="pixel"):
        import asyncio
        self.reads.append(path)
        self.gate = self.gate or asyncio.Event()
        await self.gate.wait()
        if self.fail:
            raise SourceError("network", f"{path}: refused (test)")
        return await super().read(path, box, hint)


def test_a_pixel_read_in_flight_or_done_is_not_read_or_decoded_again(store):
    """A click joins the read-ahead of its pixel (a resting mouse, a finger going down) rather than reading and
    decoding it again; a waiter given up (cancelled) leaves the read to the others; a failed read is not kept."""
    import asyncio
    src = GatedSource(str(store))
    m = StoreModel(src, jsonschema=jsonschema)
    run(_open_ungated(m, src))
    z = zarr.open_group(store / "utm30", mode="r")
    s = z["scales"][:]
    (r, c), (r2, c2) = (map(int, rc) for rc in np.argwhere(~np.isnan(s))[[5, 500]])
    lon, lat = m.zones["utm30"].centre_lonlat(r, c)
    want = z["embeddings"][r, c].astype(np.float32) * s[r, c]

    async def ahead_then_clicks():
        src.gate, src.reads = asyncio.Event(), []
        ahead = asyncio.ensure_future(m.pixel_at(lon, lat))  # the read-ahead, in flight
        await asyncio.sleep(0)
        given_up = asyncio.ensure_future(m.pixel_at(lon, lat))  # a waiter that is cancelled
        click = asyncio.ensure_future(m.pixel_at(lon, lat))
        await asyncio.sleep(0)
        given_up.cancel()
        src.gate.set()
        px, px2 = await ahead, await click
        return px, px2, given_up.cancelled(), list(src.reads)

    px, px2, cancelled, reads = run(ahead_then_clicks())
    assert cancelled and sorted(reads) == ["utm30/embeddings", "utm30/scales"]  # one read of each array, not three
    np.testing.assert_array_equal(px.vector, want)
    np.testing.assert_array_equal(px2.vector, want)
    again = run(_reads_of(src, m.pixel_at(lon, lat)))  # done: kept, read from nowhere
    assert again[1] == [] and np.array_equal(again[0].vector, want)

    lon2, lat2 = m.zones["utm30"].centre_lonlat(r2, c2)
    src.fail = True
    with pytest.raises(SourceError, match="refused"):
        run(_reads_of(src, m.pixel_at(lon2, lat2)))
    src.fail = False  # a failure is not kept: the next click reads again, and gets the pixel
    px3, reads3 = run(_reads_of(src, m.pixel_at(lon2, lat2)))
    assert sorted(reads3) == ["utm30/embeddings", "utm30/scales"]
    np.testing.assert_array_equal(px3.vector, z["embeddings"][r2, c2].astype(np.float32) * s[r2, c2])


async def _open_ungated(m, src):
    import asyncio
    src.gate = asyncio.Event()
    src.gate.set()
    await m.open()


async def _reads_of(src, coro):
    """(what `coro` returns, the paths it read), reads let through at once."""
    import asyncio
    src.gate, src.reads = asyncio.Event(), []
    src.gate.set()
    return await coro, list(src.reads)


def test_similarity_equals_a_direct_numpy_cosine(store):
    m = run(StoreModel(ZarrSource(str(store)), jsonschema=jsonschema).open())
    zone = m.zones["utm30"]
    z = zarr.open_group(store / "utm30", mode="r")
    v = z["embeddings"][:].astype(np.float32) * z["scales"][:][..., None]
    r, c = map(int, np.argwhere(~np.isnan(v[..., 0]))[10])
    win = (max(r - 300, 0), r + 300, max(c - 300, 0), c + 300)
    sim = cosine_map(run(read_window(m, zone, win)), v[r, c])
    win = (win[0], min(win[1], zone.height), win[2], min(win[3], zone.width))
    sim = sim[:win[1] - win[0], :win[3] - win[2]]
    sub = v[win[0]:win[1], win[2]:win[3]]
    want = (sub @ v[r, c]) / (np.linalg.norm(sub, axis=-1) * np.linalg.norm(v[r, c]))
    np.testing.assert_allclose(sim, want, rtol=1e-5, equal_nan=True)
    assert sim[r - win[0], c - win[2]] == pytest.approx(1.0)
    assert np.isnan(sim).any()  # no-data pixels stay NaN
    t = cosine_table([v[r, c], v[r, c] * 2, -v[r, c]])
    np.testing.assert_allclose(t, [[1, 1, -1], [1, 1, -1], [-1, -1, 1]], atol=1e-6)


def test_store_errors_are_classified(tmp_path, store):
    with pytest.raises(SourceError) as e:
        run(StoreModel(ZarrSource(str(tmp_path / "nope.zarr")), jsonschema=jsonschema).open())
    assert e.value.kind == "notfound"
    import json
    import shutil
    bad = tmp_path / "v2.zarr"
    shutil.copytree(store, bad)
    doc = json.loads((bad / "zarr.json").read_text())
    doc["attributes"]["tessera:dataset_version"] = "v2"
    (bad / "zarr.json").write_text(json.dumps(doc))
    with pytest.raises(SourceError) as e:
        run(StoreModel(ZarrSource(str(bad)), jsonschema=jsonschema).open())
    assert e.value.kind == "version" and "'v2'" in str(e.value)


def test_level_choice_and_overview_sampling(store):
    m = run(StoreModel(ZarrSource(str(store)), jsonschema=jsonschema).open())
    x0, y0 = geo.lonlat_to_merc(-180, -80)
    x1, y1 = geo.lonlat_to_merc(180, 80)
    world = render.View(x0, x1, y0, y1, 760, 520)
    lvl = render.choose_level(m.levels, world)
    assert lvl.index == len(m.levels) - 1 and len(render.chunks_in_view(lvl, world)) <= render.MAX_CHUNKS
    x0, y0 = geo.lonlat_to_merc(-0.1, 50.8)
    x1, y1 = geo.lonlat_to_merc(0.1, 50.9)
    local = render.View(x0, x1, y0, y1, 760, 520)
    fine = render.choose_level(m.levels, local)
    assert fine.index < 3 and fine.res <= (0.2 / 760) * 2
    chunks = {}
    for ci, cj in render.chunks_in_view(fine, local):
        a = zarr.open_array(store / "global_rgb" / str(fine.index) / "rgb", mode="r")
        chunks[(ci, cj)] = a[ci * 256:(ci + 1) * 256, cj * 256:(cj + 1) * 256]
    lon, lat = local.lonlat_grid()
    img = render.sample_level(fine, chunks, lon, lat)
    assert (img[..., 3] > 0).mean() > 0.005  # the (96 px) Sussex tiles show up
    bok = render.to_bokeh_image(img)
    assert bok.shape == (520, 760) and bok.dtype == np.uint32


def test_an_overview_level_is_sampled_pixel_for_pixel_from_its_chunks():
    """Every view pixel gets the level's pixel under its centre: the level's row and column, counted from 90N and
    180W, looked up pixel by pixel in the chunk that holds it. A chunk not given is transparent, as is the world
    outside the level (here its last row of chunks is cut short)."""
    from builder.core.describe import Level
    lvl = Level(index=5, res=0.01, height=1300, width=36000, chunk=256)  # 2.56 degrees per chunk, 13 degrees tall
    x0, y0 = geo.lonlat_to_merc(-6.0, 74.0)
    x1, y1 = geo.lonlat_to_merc(4.0, 79.5)
    view = render.View(x0, x1, y0, y1, 500, 330)
    ijs = render.chunks_in_view(lvl, view)
    assert len(ijs) >= 9 and max(i for i, _ in ijs) == lvl.height // lvl.chunk  # the last, short row of chunks
    rng = np.random.default_rng(7)
    chunks = {ij: rng.integers(0, 256, (lvl.chunk, lvl.chunk, 4), dtype=np.uint8) for ij in ijs}
    for (i, j), data in chunks.items():  # as StoreModel.level_chunk gives them: padded with zeros past the level
        data[max(0, lvl.height - i * lvl.chunk):] = 0
    dropped = ijs[len(ijs) // 2]
    del chunks[dropped]
    lon, lat = view.lonlat_grid()
    img = render.sample_level(lvl, chunks, lon, lat)
    want = np.zeros_like(img)
    for y in range(view.height):
        for x in range(view.width):
            r = int(np.floor((90.0 - lat[y, x]) / lvl.res))
            k = int(np.floor((lon[y, x] + 180.0) / lvl.res))
            ij = (r // lvl.chunk, k // lvl.chunk)
            if r < lvl.height and ij in chunks:
                want[y, x] = chunks[ij][r % lvl.chunk, k % lvl.chunk]
    assert 0.2 < (want[..., 3] > 0).mean() < 0.8  # data, the dropped chunk and the world below the level
    np.testing.assert_array_equal(img, want)


def test_exports(store):
    m = run(StoreModel(ZarrSource(str(store)), jsonschema=jsonschema).open())
    z = m.zones["utm31"]
    s = zarr.open_group(store / "utm31", mode="r")["scales"][:]
    pts = np.argwhere(~np.isnan(s))[[5, 500]]
    pixels = [run(m.pixel(z, int(r), int(c))) for r, c in pts]
    arr = np.load(io.BytesIO(to_npy(pixels)))
    np.testing.assert_array_equal(arr, np.stack([p.vector for p in pixels]))
    rows = to_csv(pixels).decode().splitlines()
    assert len(rows) == 3 and rows[1].startswith(f"utm31,{pts[0][0]},{pts[0][1]},")
    np.testing.assert_array_equal(np.array(rows[2].split(",")[8:], dtype=np.float32), pixels[1].vector)


def test_similarity_colours():
    sim = np.array([[np.nan, -1.0, 0.5, 0.9, 1.0]], dtype=np.float32)
    rgba = render.similarity_rgba(sim, 0.8)
    assert list(rgba[0, :, 3]) == [0, 0, 0, 210, 210]
    assert tuple(rgba[0, 4, :3]) == (0xFD, 0xE7, 0x24)  # the top of viridis (#FDE724 in Bokeh's Viridis256)
    assert tuple(rgba[0, 3, :3]) != tuple(rgba[0, 4, :3])
    assert np.isnan(cosine_map(np.zeros((1, 1, 4), np.float32), np.ones(4, np.float32))).all()


class _DocSource(ZarrSource):
    def __init__(self, doc):
        self.doc = doc

    async def meta(self):
        return self.doc


@pytest.mark.parametrize("edit,want", [
    (lambda d: d.update(attributes="x"), "not a tessera store: "),
    (lambda d: d["attributes"].pop("tessera:year"),
     "not a tessera store: store root: attributes: 'tessera:year' is a required property"),
    (lambda d: d["attributes"].update({"tessera:year": 1899}),
     "not a tessera store: store root: tessera:year: 1899 is less than the minimum of 1900"),
    (lambda d: d["consolidated_metadata"]["metadata"]["utm30"]["attributes"].update({"spatial:shape": "wide"}),
     "not a tessera store: "),
    (lambda d: d["consolidated_metadata"]["metadata"]["utm30"]["attributes"].pop("proj:code"),
     "not a tessera store: missing 'proj:code'"),
    (lambda d: d.pop("consolidated_metadata"), "not a tessera store: no consolidated metadata"),
])
def test_metadata_that_is_not_a_tessera_store_is_one_line(store, edit, want):
    import json
    doc = json.loads((store / "zarr.json").read_text())
    edit(doc)
    with pytest.raises(SourceError) as e:
        run_async(StoreModel(_DocSource(doc), jsonschema=jsonschema).open())
    assert e.value.kind == "invalid" and str(e.value).startswith(want) and "\n" not in str(e.value)


def test_rgba_sampling_and_compositing_move_whole_pixels_into_slices_of_an_image():
    """render.sample_window and render.composite move each pixel as one 32-bit word (render.rgba_words): checked
    pixel by pixel against the rules they state, into a slice of a larger image (what the map passes)."""
    rng = np.random.default_rng(5)
    values = rng.integers(0, 256, (6, 9, 4), dtype=np.uint8)
    image = rng.integers(0, 256, (10, 12, 4), dtype=np.uint8)
    before = image.copy()
    row, col = rng.integers(-2, 9, (4, 5)), rng.integers(-3, 12, (4, 5))
    mask = rng.random((4, 5)) < 0.7
    render.sample_window(values, 1, 2, row, col, mask, image[3:7, 4:9])
    want = before.copy()
    for i in range(4):
        for j in range(5):
            r, c = row[i, j] - 1, col[i, j] - 2
            if mask[i, j] and 0 <= r < 6 and 0 <= c < 9:
                want[3 + i, 4 + j] = values[r, c]
    np.testing.assert_array_equal(image, want)  # outside the slice, and where nothing was sampled: untouched
    under, over = rng.integers(0, 256, (2, 7, 8, 4), dtype=np.uint8)
    over[..., 3][rng.random((7, 8)) < 0.5] = 0
    out = render.composite(under, over)
    for i in range(7):
        for j in range(8):
            np.testing.assert_array_equal(out[i, j], over[i, j] if over[i, j, 3] > 0 else under[i, j])
    out[0, 0] = 1  # a new image: writable, and neither input changes
    assert out.shape == under.shape and not np.shares_memory(out, under) and not np.shares_memory(out, over)


def test_the_map_image_is_the_maps_screen_size_times_the_pixel_ratio_capped():
    """app/session.py image_size: one image pixel per device pixel of the map, at most MAP_PX_MAX pixels (2.4 M)
    at the map's aspect; a size from the page that is not a screen's is refused (None)."""
    from app.session import image_size
    assert image_size(1461, 1000, 1) == (1461, 1000)
    assert image_size(982, 672, 1.5) == (1473, 1008)
    assert image_size(1461, 1000, 2) == (1873, 1282)  # 2.4 M pixels: 1461 x 1000 scaled by sqrt(2.4e6 / 1.461e6)
    for bad in [(0, 500, 1), (float("nan"), 500, 1), (500, 500, 0), (500, 10**6, 1), ("982", 672, 1), (982, 672, None),
                (True, 672, 1)]:
        assert image_size(*bad) is None, bad
