"""The explorer's data layer and state on a geoemb: store (CPython, zarr-python Source, no browser).

The store is written by tests/geoemb_writer.py (zarr-python, not the builder); expected values come from the
tiles themselves (tile_points: their own int8 * scale) and plain numpy.
"""
from __future__ import annotations

import json

import jsonschema
import numpy as np
import pytest
import zarr

from app import render
from builder.core.reader import StoreModel
from builder.core.source import SourceError
from builder.reader.source import ZarrSource
from app.session import Explorer
from app.state import UrlState
from conftest import run_async
from geoemb_writer import YEARS, tile_points, write_geoemb


@pytest.fixture(scope="module")
def plain_store(tmp_path_factory, tiles2):
    """The same store without consolidated metadata: the explorer asks for each utmNN/zarr.json."""
    return write_geoemb(tiles2, YEARS, tmp_path_factory.mktemp("geoemb-plain") / "plain.zarr", consolidated=False)


def open_model(path, year=None) -> StoreModel:
    return run_async(StoreModel(ZarrSource(str(path)), jsonschema=jsonschema).open(year))


@pytest.mark.parametrize("which", ["consolidated", "plain"])
def test_opens_a_geoemb_store_with_its_years_and_zones(geoemb_store, plain_store, which):
    m = open_model(geoemb_store if which == "consolidated" else plain_store)
    assert m.layout.name == "geoemb:" and m.years == YEARS and m.year == YEARS[-1]
    assert sorted(m.zones) == ["utm30", "utm31", "utm34"] and all(z.times == tuple(YEARS) for z in m.zones.values())
    z34 = m.zones["utm34"]
    assert (z34.zone, z34.south) == (34, False) and z34.origin_n < 0  # northern CRS extended south
    w, s, e, n = z34.lonlat
    assert w < 18.45 < e and s < -33.95 < n and m.levels == [] and m.preview_array == "embeddings"
    at = m.kind.showing(m, 2023)  # builder/core/kinds.py: the store shows any year of its time axis itself
    assert at.year == 2023 and at.source is m.source and m.year == YEARS[-1]  # no second store; m unchanged
    assert m.kind.showing(m, 1999) is None and m.kind.own_years(m) == YEARS


@pytest.mark.parametrize("year", YEARS)
def test_pixels_match_the_tiles_with_water_and_no_data(geoemb_store, tiles2, year):
    m = open_model(geoemb_store, year)
    pts = tile_points(tiles2, year, "geoemb:")
    assert {p["status"] for p in pts} == {"valid", "water", "nodata"}

    async def run():
        return [await m.pixel_at(p["lon"], p["lat"]) for p in pts]
    for p, px in zip(pts, run_async(run())):
        assert px is not None and px.zone == p["zone"] and px.status == p["status"], (p, px)
        if p["status"] == "valid":
            np.testing.assert_array_equal(px.vector, p["vector"])  # bit-exact: int8 * float32 scale
        else:
            assert px.vector is None and not px.valid
            assert np.isnan(px.scale) if p["status"] == "water" else px.scale == np.inf


def test_region_scales_are_nan_wherever_there_is_no_data(geoemb_store):
    m = open_model(geoemb_store, 2023)
    z = m.zones["utm30"]
    raw = zarr.open_group(str(geoemb_store / "utm30"), mode="r")["scales"][0]
    assert np.isposinf(raw).any() and np.isnan(raw).any()
    emb = zarr.open_group(str(geoemb_store / "utm30"), mode="r")["embeddings"][0]

    async def run():
        return (await m.region(z, "scales", 0, z.height, 0, z.width),
                await m.region(z, "embeddings", 10, 50, 20, 90))
    s, e = run_async(run())
    np.testing.assert_array_equal(s, np.where(np.isfinite(raw), raw, np.nan))
    np.testing.assert_array_equal(e, np.moveaxis(emb[:, 10:50, 20:90], 0, -1))


def test_a_store_of_neither_layout_is_one_line(tmp_path):
    root = tmp_path / "other.zarr"
    root.mkdir()
    (root / "zarr.json").write_text(json.dumps({"zarr_format": 3, "node_type": "group", "attributes": {
        "zarr_conventions": [{"uuid": "0000", "name": "other:", "schema_url": "x", "spec_url": "y"}]}}))
    with pytest.raises(SourceError) as e:
        open_model(root)
    msg = str(e.value)
    assert e.value.kind == "invalid" and "\n" not in msg
    assert "neither a tessera: v1 nor a geoemb: store (its zarr_conventions: other: (0000))" in msg


def numpy_vectors(path, zone: str, t: int) -> np.ndarray:
    g = zarr.open_group(str(path / zone), mode="r")
    q, s = g["embeddings"][t].astype(np.float32), g["scales"][t]
    with np.errstate(invalid="ignore"):  # 0 * inf where there is no data: masked below
        v = np.moveaxis(q, 0, -1) * s[..., None]
    v[~np.isfinite(s)] = np.nan
    return v


def test_a_catalogs_truth_for_a_geoemb_stores_year_is_kept(geoemb_store):
    """The store's own years replace its catalog entries; each year's "truth" stays with that year."""
    url = str(geoemb_store)

    async def run():
        state = Explorer([{"year": 2024, "url": url, "truth": "truth/2024.zarr"}], UrlState(store=url),
                         source_factory=ZarrSource)
        await state.open_year(2024)
        return state
    state = run_async(run())
    assert state.catalog == [{"year": 2023, "url": url, "label": "2023"},
                             {"year": 2024, "url": url, "label": "2024", "truth": "truth/2024.zarr"}]
    assert state.tools.classify.ctx.truth(2024)[1] == "truth/2024.zarr"


def test_explorer_years_selection_years_plot_similarity_and_map(geoemb_store, tiles2):
    url = str(geoemb_store)
    g = zarr.open_group(url + "/utm30", mode="r")
    tr = g.attrs["spatial:transform"]
    rc = lambda p: (int((tr[5] - p["n"]) // 10), int((p["e"] - tr[2]) // 10))
    p = next(p for p in tile_points(tiles2, 2024, "geoemb:") if p["status"] == "valid" and p["zone"] == "utm30"
             and np.isfinite(g["scales"][0][rc(p)]))  # valid in both years

    async def run():
        state = Explorer([{"year": 0, "url": url}], UrlState(store=url), source_factory=ZarrSource)
        await state.open_year(0)
        assert state.model.year == 2024 and state.years_model is not None
        assert state.param["year"].objects == {"2023": 2023, "2024": 2024}
        assert "geoemb: store, years 2023, 2024" in state.status and "false colour" in state.status
        state.year = 2024
        await state.settle()
        first = state.model
        px = await state.select(p["lon"], p["lat"])
        np.testing.assert_array_equal(px.vector, p["vector"])
        # the years plot: the same pixel at both time indexes, from the one store
        zone, row, col, vecs = state.years_pixel
        assert (zone.name, row, col) == ("utm30", *rc(p))
        for t, v in enumerate(vecs):
            want = g["embeddings"][t, :, row, col].astype(np.float32) * g["scales"][t, row, col]
            np.testing.assert_array_equal(v, want)
        # the year switch: another time index of the same source
        state.year = 2023
        await state.settle()
        assert state.model.year == 2023 and state.model.source is first.source
        np.testing.assert_array_equal(state.selected.vector, vecs[0])
        # similarity over the view vs numpy
        state.centre_view(p["lon"], p["lat"], 4000)
        state.tools.similarity.on = True
        await state.settle()
        got = state.tools.similarity.result
        _, (r0, r1, c0, c1), sim = got.zone, got.window, got.values
        v = numpy_vectors(geoemb_store, "utm30", 0)[r0:r1, c0:c1]
        target = v[row - r0, col - c0]
        with np.errstate(invalid="ignore"):
            want = v @ target / (np.linalg.norm(v, axis=-1) * np.linalg.norm(target))
        np.testing.assert_allclose(sim, want, rtol=0, atol=1e-5, equal_nan=True)
        # the map zoomed in: the pixel under the centre in false colour of its first three dimensions
        state.centre_view(px.lon, px.lat, 2000)
        await state.settle()
        q = g["embeddings"][0, :3, row, col].astype(np.float32)
        assert tuple(state.base[1][260, 380]) == (*np.clip(128 + 1.5 * q, 0, 255).astype(np.uint8), 255)
        # zoomed out: no overview in this store, the zones' grids are tinted
        state.centre_view(p["lon"], p["lat"], 200_000)
        await state.settle()
        assert state.render_view().metres_per_pixel() > render.ZONE_ZOOM_M
        assert tuple(state.base[1][260, 380]) == (128, 128, 128, 90)
        assert state.url().year == 2023
    run_async(run())
