"""Labels on CPython: click-to-label, classes (rename, delete), GeoJSON round trip, storage and URL, escaping."""
from __future__ import annotations

import json

import numpy as np
import pytest

from app.state import UrlState
from app.tools import labels as lab, panes
from conftest import run_async
from tools_util import opened, pixel_lonlat, zone_vectors

HOSTILE = "<img src=x onerror=\"window.__pwned=1\">"


def valid_rc(store, zone, k):
    v = zone_vectors(store, zone)
    r, c = np.argwhere(np.isfinite(v[..., 0]))[k]
    return int(r), int(c)


def test_label_clicks_add_the_pixels_vectors_to_the_active_class(store):
    async def run():
        state = await opened(store)
        L = state.tools.labels
        L.add_class("water")
        L.add_class("field")
        L.mode = True
        truth = zone_vectors(store, "utm30")
        for k in (3, 50, 200):
            await state.click(*pixel_lonlat(store, "utm30", *valid_rc(store, "utm30", k)))
        L.active = "water"
        await state.click(*pixel_lonlat(store, "utm30", *valid_rc(store, "utm30", 400)))
        assert [p.cls for p in L.points] == ["field", "field", "field", "water"]
        for p, k in zip(L.points, (3, 50, 200, 400)):
            np.testing.assert_array_equal(p.vector, truth[valid_rc(store, "utm30", k)])
            assert p.year == 2024
        assert state.selected is None  # label mode does not select
        # a click on no data labels nothing and says so
        nan_rc = np.argwhere(np.isnan(truth[..., 0]))[0]
        await state.click(*pixel_lonlat(store, "utm30", *map(int, nan_rc)))
        assert len(L.points) == 4 and "not labelled" in state.status
        L.mode = False
        await state.click(*pixel_lonlat(store, "utm30", *valid_rc(store, "utm30", 3)))
        assert state.selected is not None and len(L.points) == 4
        # rename and delete
        L.rename("field", "meadow")
        assert L.names() == ["water", "meadow"] and [p.cls for p in L.points].count("meadow") == 3
        with pytest.raises(ValueError, match="already a class"):
            L.rename("meadow", "water")
        with pytest.raises(ValueError, match="empty"):
            L.add_class("   ")
        colours = dict(L.classes)
        assert len(set(colours.values())) == 2
        L.delete("water")
        assert L.names() == ["meadow"] and len(L.points) == 3 and L.active == "meadow"
    run_async(run())


def test_geojson_round_trip_storage_and_url(store):
    async def run():
        state = await opened(store)
        L = state.tools.labels
        for i, k in enumerate((5, 60, 300)):
            await L.add(*pixel_lonlat(store, "utm31", *valid_rc(store, "utm31", k)), cls=["a", "b", HOSTILE][i])
        doc = json.loads(json.dumps(lab.to_geojson(L.classes, L.points)))
        assert doc["type"] == "FeatureCollection" and len(doc["features"]) == 3
        f = doc["features"][2]
        assert f["geometry"]["type"] == "Point" and f["properties"]["class"] == HOSTILE and f["properties"]["year"] == 2024
        before = [(p.cls, p.year, p.lon, p.lat, p.vector.tolist()) for p in L.points]
        classes = list(L.classes)
        L.clear()
        assert L.points == [] and L.classes == []
        await L.load(*lab.from_geojson(json.dumps(doc)))
        assert [(p.cls, p.year, p.lon, p.lat, p.vector.tolist()) for p in L.points] == before
        assert L.classes == classes
        # storage: a new explorer on the same storage gets the same labels back
        again = await opened(store)
        again.tools.labels.storage = L.storage
        await again.tools.labels.restore()
        got = again.tools.labels.points
        assert [p.cls for p in got] == [b[0] for b in before]  # lon/lat kept to 7 decimals (1 cm)
        np.testing.assert_allclose([(p.lon, p.lat) for p in got], [b[2:4] for b in before], rtol=0, atol=1e-7)
        assert [p.vector.tolist() for p in got] == [b[4] for b in before]
        # URL: a small set goes in the hash and comes back
        back = UrlState.from_url("", state.url().to_hash())
        third = await opened(store)
        await third.tools.labels.restore(back.labels)
        assert [(p.cls, p.year) for p in third.tools.labels.points] == [b[:2] for b in before]
        np.testing.assert_allclose([p.lon for p in third.tools.labels.points], [b[2] for b in before], atol=1e-7)
        # class names are shown escaped
        out = panes.labels_html(L)
        assert HOSTILE not in out and "&lt;img src=x onerror=&quot;window.__pwned=1&quot;&gt;" in out
    run_async(run())


@pytest.mark.parametrize("doc, message", [
    ("not json", "not JSON"),
    ({"type": "Feature"}, "not a GeoJSON FeatureCollection"),
    ({"type": "FeatureCollection", "features": [{"geometry": {"type": "LineString", "coordinates": [[0, 0]]}}]},
     "feature 0 is not a Point"),
    ({"type": "FeatureCollection", "features": [{"geometry": {"type": "Point", "coordinates": [0, 0]},
                                                 "properties": {}}]}, "no 'class' property"),
    ({"type": "FeatureCollection", "features": [{"geometry": {"type": "Point", "coordinates": [500, 0]},
                                                 "properties": {"class": "a"}}]}, "outside lon/lat"),
])
def test_bad_geojson_is_refused_in_one_line(doc, message):
    with pytest.raises(ValueError, match=message) as e:
        lab.from_geojson(doc if isinstance(doc, str) else json.dumps(doc))
    assert "\n" not in str(e.value)
