"""Polygon labels on CPython (app/tools/polygon.py): the pixels labelled are the valid pixels whose centres are inside
the polygon on the map, by matplotlib's point-in-polygon on pyproj's projections (shapely is not installed here), and a
seeded sample of them when there are more than the cap."""
from __future__ import annotations

import html

import numpy as np
import pytest
from matplotlib.path import Path as MplPath
import zarr
from pyproj import Transformer

from app.tools import polygon
from conftest import run_async
from tools_util import opened, pixel_lonlat, zone_vectors

TO_MERC = Transformer.from_crs(4326, 3857, always_xy=True)


def shape_in_utm30(store, scale: float = 1.0):
    """An irregular pentagon (lon/lat) over valid data in utm30, west of 0 deg (utm30's own side of the overlap), its
    vertices a quarter pixel off any pixel centre."""
    v = zone_vectors(store, "utm30")
    ok = np.isfinite(v[..., 0])
    rows, cols = np.nonzero(ok)
    west = [k for k in range(0, len(rows), 97) if pixel_lonlat(store, "utm30", int(rows[k]), int(cols[k]))[0] < -0.02]
    r, c = int(rows[west[len(west) // 2]]), int(cols[west[len(west) // 2]])
    offsets = np.array([(-12, -9), (-10, 14), (6, 17), (15, 0), (3, -15)]) * scale + 0.25
    return [list(pixel_lonlat(store, "utm30", r + dr - 0.5, c + dc - 0.5)) for dr, dc in offsets]


def expected(store, coords):
    """(rows, cols) of utm30's valid pixels whose centres are inside `coords` on Web Mercator: matplotlib's
    contains_points on pyproj's projections of every valid pixel centre of the zone."""
    g = zarr.open_group(store / "utm30", mode="r")
    t, epsg = g.attrs["spatial:transform"], int(g.attrs["proj:code"].split(":")[1])
    rows, cols = np.nonzero(np.isfinite(zone_vectors(store, "utm30")[..., 0]))
    x, y = Transformer.from_crs(epsg, 3857, always_xy=True).transform(t[2] + (cols + 0.5) * 10, t[5] - (rows + 0.5) * 10)
    poly = MplPath(np.array([TO_MERC.transform(lon, lat) for lon, lat in coords]))
    hit = poly.contains_points(np.column_stack([x, y]))
    return {(int(r), int(c)) for r, c in zip(rows[hit], cols[hit])}


def pixels_of(store, lonlat) -> list:
    """utm30's (row, col) under each lon/lat, by pyproj (a label lies on its pixel's centre, 5 m from any edge)."""
    g = zarr.open_group(store / "utm30", mode="r")
    t, epsg = g.attrs["spatial:transform"], int(g.attrs["proj:code"].split(":")[1])
    lon, lat = np.array(lonlat, np.float64).reshape(-1, 2).T
    e, n = Transformer.from_crs(4326, epsg, always_xy=True).transform(lon, lat)
    return list(zip(np.floor((t[5] - n) / 10).astype(int).tolist(), np.floor((e - t[2]) / 10).astype(int).tolist()))


def test_a_polygon_labels_every_valid_pixel_inside_it_and_says_how_many(store):
    coords = shape_in_utm30(store)
    want = expected(store, coords)
    assert 200 < len(want) < polygon.MAX_LABELS  # the shape holds some hundreds of valid pixels

    async def run():
        state = await opened(store)
        got = await polygon.label(state, coords, "<b>field</b>")
        assert got == {"class": "<b>field</b>", "labelled": len(want), "inside": len(want)}
        got_px = pixels_of(store, [(p.lon, p.lat) for p in state.tools.labels.points])
        assert len(set(got_px)) == len(got_px) and set(got_px) == want
        assert f"Labelled {len(want):,} of {len(want):,} pixels inside the polygon as <b>&lt;b&gt;field" \
            in state.status
        v = zone_vectors(store, "utm30")
        for p, (r, c) in zip(state.tools.labels.points, got_px):
            np.testing.assert_array_equal(p.vector, v[r, c])
    run_async(run())


def test_over_the_cap_a_seeded_sample_is_labelled_and_the_count_shown(store):
    coords = shape_in_utm30(store)
    want = expected(store, coords)

    async def run():
        picks = []
        for _ in range(2):
            state = await opened(store)
            got = await polygon.label(state, coords, "a", seed=7, cap=100)
            assert got == {"class": "a", "labelled": 100, "inside": len(want)}
            assert f"Labelled 100 of {len(want):,} pixels inside the polygon" in state.status
            picks.append([(p.lon, p.lat) for p in state.tools.labels.points])
        assert picks[0] == picks[1] and len(set(picks[0])) == 100  # seeded: the same sample
        assert set(pixels_of(store, picks[0])) <= want
    run_async(run())


@pytest.mark.parametrize("coords, line", [
    ([[0, 0], [1, 1]], "a polygon is a list of 3 to 1000 [lon, lat] vertices"),
    ([[0, 0], [1, 1], ["<b>", 2]], "polygon vertex 2 coordinates are not numbers"),
    ([[0, 0], [1, 1], [500, 2]], "polygon vertex 2 has coordinates outside lon/lat ranges"),
    ([[0, 0], [1, 1], [2]], "polygon vertex 2 is not [lon, lat]"),
    ([[0, 0]] * 2000, "a polygon is a list of 3 to 1000 [lon, lat] vertices"),
    ("<script>", "a polygon is a list of 3 to 1000 [lon, lat] vertices"),
])
def test_a_bad_polygon_is_one_line_and_labels_nothing(store, coords, line):
    async def run():
        state = await opened(store)
        with pytest.raises(ValueError, match=line.replace("[", r"\[").replace("]", r"\]")):
            await polygon.label(state, coords, "a")
        assert state.status == "<b>Polygon not labelled:</b> " + html.escape(line) and not state.tools.labels.points
    run_async(run())


def test_a_polygon_larger_than_a_tool_region_is_refused(store):
    async def run():
        state = await opened(store)
        coords = shape_in_utm30(store, scale=40)
        with pytest.raises(ValueError, match="more than 768 pixels per side"):
            await polygon.label(state, coords, "a")
        assert not state.tools.labels.points
    run_async(run())
