"""Labels on CPython: click-to-label, classes (rename, delete), GeoJSON round trip, storage and URL, escaping."""
from __future__ import annotations

import html
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


def fc(*features) -> dict:
    return {"type": "FeatureCollection", "features": list(features)}


def point(coords, **props) -> dict:
    return {"type": "Feature", "geometry": {"type": "Point", "coordinates": coords}, "properties": props}


def cls(name, **more) -> dict:
    return {"class": name, **more}


# Label files with wrong types everywhere: each is refused with one line naming what is wrong (and which feature).
# Before, nine of them raised TypeError, AttributeError, OverflowError or RecursionError, which the UI does not catch
# (the status line said nothing), and others were taken silently (strings or booleans as coordinates, a list as a class).
MALFORMED = {
    "features-not-a-list": ({"type": "FeatureCollection", "features": {"0": point([0, 0], **cls("a"))}},
                            "not a GeoJSON FeatureCollection"),
    "document-a-list": ([point([0, 0], **cls("a"))], "not a GeoJSON FeatureCollection"),
    "feature-a-string": (fc("Feature"), "feature 0 is not a GeoJSON Feature object"),
    "feature-a-list": (fc([0.05, 50.85]), "feature 0 is not a GeoJSON Feature object"),
    "geometry-null": (fc({"type": "Feature", "geometry": None, "properties": cls("a")}), "feature 0 is not a Point"),
    "geometry-a-string": (fc({"type": "Feature", "geometry": "Point", "properties": cls("a")}),
                          "feature 0 is not a Point"),
    "coordinates-strings": (fc(point(["0.05", "50.85"], **cls("a"))), "feature 0: coordinates are not numbers"),
    "coordinates-nested": (fc(point([[0.05], [50.85]], **cls("a"))), "feature 0: coordinates are not numbers"),
    "coordinates-null": (fc(point([None, None], **cls("a"))), "feature 0: coordinates are not numbers"),
    "coordinates-booleans": (fc(point([True, False], **cls("a"))), "feature 0: coordinates are not numbers"),
    "coordinates-an-object": (fc(point({"lon": 0.05, "lat": 50.85}, **cls("a"))), "feature 0 is not a Point"),
    "coordinates-1e400": ('{"type": "FeatureCollection", "features": [{"type": "Feature", "geometry": {"type": "Point",'
                          ' "coordinates": [1e400, 50]}, "properties": {"class": "a"}}]}',
                          "feature 0 has coordinates outside lon/lat ranges"),
    "coordinates-an-integer-of-400-digits": (fc(point([10 ** 400, 50], **cls("a"))),
                                             "feature 0 has coordinates outside lon/lat ranges"),
    "coordinates-NaN": ('{"type": "FeatureCollection", "features": [{"type": "Feature", "geometry": {"type": "Point",'
                        ' "coordinates": [NaN, 50]}, "properties": {"class": "a"}}]}',
                        "feature 0 has coordinates outside lon/lat ranges"),
    "properties-a-list": (fc({"type": "Feature", "geometry": {"type": "Point", "coordinates": [0, 0]},
                              "properties": ["class", "a"]}), "feature 0: properties are not an object"),
    "properties-a-string": (fc({"type": "Feature", "geometry": {"type": "Point", "coordinates": [0, 0]},
                                "properties": "class"}), "feature 0: properties are not an object"),
    "properties-missing": (fc({"type": "Feature", "geometry": {"type": "Point", "coordinates": [0, 0]}}),
                           "feature 0 has no 'class' property"),
    "class-a-list": (fc(point([0, 0], **cls(["a"]))), "feature 0: class is not text"),
    "class-null": (fc(point([0, 0], **cls(None))), "feature 0: class is not text"),
    "class-too-long": (fc(point([0, 0], **cls("x" * 81))), "feature 0: a class name has at most 80 characters"),
    "year-1e400": ('{"type": "FeatureCollection", "features": [{"type": "Feature", "geometry": {"type": "Point",'
                   ' "coordinates": [0, 50]}, "properties": {"class": "a", "year": 1e400}}]}',
                   "feature 0: year is not a whole number"),
    "year-a-list": (fc(point([0, 0], **cls("a", year=[2024]))), "feature 0: year is not a whole number"),
    "year-a-word": (fc(point([0, 0], **cls("a", year="last"))), "feature 0: year is not a whole number"),
    "year-a-fraction": (fc(point([0, 0], **cls("a", year=2024.5))), "feature 0: year is not a whole number"),
    "year-out-of-range": (fc(point([0, 0], **cls("a", year=10 ** 30))), "feature 0: year is not a whole number"),
    "colour-not-css": (fc(point([0, 0], **cls("a", color="#zzzzzz"))), "feature 0: colour '#zzzzzz' is not a CSS"),
    "colour-a-number": (fc(point([0, 0], **cls("a", color=255))), "feature 0: colour 255 is not a CSS"),
    "nested-10000-deep": ("[" * 10_000 + "]" * 10_000, "nested"),
    "too-many-features": (fc(*[point([0, 0], **cls("a"))] * (lab.MAX_POINTS + 1)), "more than 100000 features"),
    "the-second-feature-bad": (fc(point([0, 0], **cls("a")), point([0, 0], **cls("b", year={}))),
                               "feature 1: year is not a whole number"),
}


@pytest.mark.parametrize("case", list(MALFORMED))
def test_a_malformed_label_file_is_refused_in_one_line_naming_what_and_where(case):
    doc, message = MALFORMED[case]
    with pytest.raises(ValueError) as e:
        lab.from_geojson(doc if isinstance(doc, str) else json.dumps(doc))
    assert message in str(e.value) and "\n" not in str(e.value), str(e.value)


def test_malformed_saved_labels_from_a_link_or_storage_are_one_status_line_and_change_nothing(store):
    """The compact form of the URL hash and of localStorage goes through the same checks: a bad value is one
    "Saved labels ignored" line, never an exception out of restore (a link's labels are restored at start-up)."""
    bad = {
        "nested-20000-deep": ("[" * 20_000 + "]" * 20_000, "nested"),
        "year-1e400": ('[["a", null, [[0.05, 50.85, 1e400]]]]', "year is not a whole number"),
        "not-a-list": ('{"a": 1}', "saved labels are not a list"),
        "entry-not-a-triple": ('[["a", "#ff0000"]]', "saved class 0 is not [name, colour, points]"),
        "point-not-a-triple": ('[["a", null, [[0.05, 50.85]]]]', "saved point 0 of class 'a' is not [lon, lat, year]"),
        "lon-a-string": ('[["a", null, [["0.05", 50.85, 2024]]]]', "coordinates are not numbers"),
        "colour-not-css": ('[["a", "#zz", [[0.05, 50.85, 2024]]]]', "colour '#zz' is not a CSS"),
    }

    async def run():
        state = await opened(store)
        L = state.tools.labels
        await L.add(*pixel_lonlat(store, "utm30", *valid_rc(store, "utm30", 5)), cls="kept")
        for name, (text, message) in bad.items():
            state.status = ""
            await L.restore(text)
            assert state.status.startswith("<b>Saved labels ignored:</b>") and html.escape(message) in state.status, \
                (name, state.status)
            assert "\n" not in state.status and [p.cls for p in L.points] == ["kept"], name
    run_async(run())


def test_label_colours_in_css_forms_are_normalised_and_classify_with_them(store):
    """A label file's "color" may be any CSS colour form; it is kept as #rrggbb (the class map draws every class at
    one opacity, so an alpha is dropped). "#fff" used to be kept as it was, and every classification then failed
    with "invalid literal for int() with base 16"."""
    given = {"#fff": "#ffffff", "#F0A": "#ff00aa", "#0f08": "#00ff00", "#12345678": "#123456", "#ABCDEF": "#abcdef",
             "rgb(255, 0, 0)": "#ff0000", "rgba(0, 128, 0, 0.5)": "#008000", "rgb(100% 50% 0% / 50%)": "#ff8000",
             "RebeccaPurple": "#663399", "teal": "#008080", None: None}

    async def run():
        state = await opened(store)
        state.fit_zones()
        feats = [point(list(pixel_lonlat(store, "utm30", *valid_rc(store, "utm30", 40 * i))),
                       **cls(f"c{i}", color=colour, year=2024)) for i, colour in enumerate(given)]
        await state.tools.labels.load(*lab.from_geojson(json.dumps(fc(*feats))))
        layer = await state.tools.classify.classify("k-NN", k=1)
        assert layer is not None, state.status
        colours = dict(state.tools.labels.classes)
        for i, want in enumerate(given.values()):
            assert colours[f"c{i}"] == want if want is not None else colours[f"c{i}"] in lab.PALETTE
        shown = {tuple(int(c[i:i + 2], 16) for i in (1, 3, 5)) for c in state.tools.classify.colours}
        drawn = {tuple(px[:3]) for part in layer.all for px in part.rgba.reshape(-1, 4) if px[3]}
        assert drawn and drawn <= shown
    run_async(run())
