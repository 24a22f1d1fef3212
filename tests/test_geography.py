"""Geography's pure parts on CPython: the go-to box, the tile URL setting, the scale bar, and
the state's go-to against a real store (no browser, no Panel)."""
from __future__ import annotations

import math

import pytest

from conftest import run_async
from app import geo, places, tiles, views
from app.session import GOTO_SPAN_M, Explorer
from builder.reader.source import ZarrSource
from app.state import UrlState

PLACES = {"United Kingdom": (-8.2, 49.9, 1.8, 58.7), "Niger": (0.2, 11.7, 16.0, 23.5),
          "Nigeria": (2.7, 4.3, 14.7, 13.9), "Côte d'Ivoire": (-8.6, 4.4, -2.5, 10.7),
          "United States of America": (-124.7, 24.5, -66.9, 49.4)}
HOSTILE = "<img src=x onerror=\"window.__pwned=1\">"


@pytest.mark.parametrize("text,want", [
    ("-1.5,52.25", ("point", -1.5, 52.25)), (" -1.5 ; 52.25 ", ("point", -1.5, 52.25)),
    ("-1.5 52.25", ("point", -1.5, 52.25)), ("52.25,-170", ("point", -170.0, 52.25)),  # lat,lon when only that fits
    ("+.5,-0.", ("point", 0.5, -0.0))])
def test_resolve_lonlat_pairs(text, want):
    assert places.resolve(text, PLACES) == want


@pytest.mark.parametrize("text,name", [("United Kingdom", "United Kingdom"), ("  united KINGDOM ", "United Kingdom"),
                                       ("cote d'ivoire", "Côte d'Ivoire"), ("Cote dIvoire", "Côte d'Ivoire"),
                                       ("niger", "Niger"), ("nigeri", "Nigeria"), ("kingdom", "United Kingdom")])
def test_resolve_country_names(text, name):
    kind, got, box = places.resolve(text, PLACES)
    assert (kind, got, box) == ("box", name, PLACES[name])


@pytest.mark.parametrize("text,part", [("", "Type lon,lat"), ("200,200", "not a lon,lat pair"),
                                       ("united", "several places"), ("Atlantis", "No place named Atlantis"),
                                       ("x" * 1000, "No place named")])
def test_resolve_errors(text, part):
    kind, message = places.resolve(text, PLACES)
    assert kind == "error" and part in message and len(message) < 400


def test_unknown_hostile_name_is_shown_escaped():
    result = places.resolve(HOSTILE, PLACES)
    assert result[0] == "error"
    msg = views.goto_message(result)
    assert "<img" not in msg and "&lt;img src=x onerror=&quot;window.__pwned=1&quot;&gt;" in msg
    assert views.goto_message(("box", "<b>", (0, 0, 1, 1))) == "Went to <b>&lt;b&gt;</b>."


def test_names_still_loading_is_said():
    assert "still loading" in places.resolve("France", {})[1]


def test_parse_places_keeps_only_wellformed_entries():
    doc = '[["A", [0, 1, 2, 3]], ["B", [0, 1]], [3, [0, 1, 2, 3]], ["C", [0, "NaN", 2, 3]], "junk", ["D", [-1, -2, 1, 2]]]'
    assert places.parse_places(doc) == {"A": (0.0, 1.0, 2.0, 3.0), "D": (-1.0, -2.0, 1.0, 2.0)}
    assert places.parse_places("not json") == {} and places.parse_places('{"a": 1}') == {}


def test_tile_template():
    assert tiles.check_template(None) is None and tiles.check_template("  ") is None
    assert tiles.check_template("http://127.0.0.1:8/{z}/{x}/{y}.png") == "http://127.0.0.1:8/{Z}/{X}/{Y}.png"
    assert tiles.check_template("tiles/{Z}/{X}/{Y}.png") == "tiles/{Z}/{X}/{Y}.png"
    for bad in ("http://h/{z}/{x}.png", "javascript:alert(1)//{x}{y}{z}", "http://h/{z}/{x}/{y}\"><script>"):
        with pytest.raises(ValueError):
            tiles.check_template(bad)


def test_url_state_reads_basemap_from_the_query():
    s = UrlState.from_url("?basemap=http%3A%2F%2F127.0.0.1%3A9%2F%7Bz%7D%2F%7Bx%7D%2F%7By%7D.png", "")
    assert s.basemap == "http://127.0.0.1:9/{z}/{x}/{y}.png"
    assert UrlState.from_url("", "").basemap is None


@pytest.mark.parametrize("lat,span", [(0.0, 5e6), (52.0, 40_000), (60.0, 3_000), (-33.0, 700),
                                      # a fifth of the span is a power of ten: rounding once left no length to pick
                                      (-68.6, 50_000), (-67.9, 500_000), (-55.3, 50_000), (50.85345776, 5_000)])
def test_scale_bar_is_a_round_ground_length_at_the_view_centre(lat, span):
    from app.session import centred_box
    view = centred_box(10.0, lat, span)
    d = views.scale_bar_data(view)
    ground = (d["x1"][0] - d["x0"][0]) * math.cos(math.radians(lat))  # Mercator metres -> ground metres
    mantissa = ground / 10 ** math.floor(math.log10(ground) + 1e-9)
    assert min(abs(mantissa - m) for m in (1, 2, 5)) < 1e-6
    assert 0.08 * span <= ground <= 0.2 * span + 1e-6  # at most a fifth of the view, never tiny
    ground = float(f"{ground:.9g}")  # the length measured back carries float noise (999.9999999 for 1000)
    km = ground >= 1000
    assert d["label"] == [f"{ground / 1000:g} km" if km else f"{ground:g} m"]
    assert view[0] < d["x0"][0] < d["x1"][0] < view[1] and view[2] < d["y"][0] < view[3]


def test_goto_moves_the_view_and_bad_text_only_reports(store):
    catalog = [{"year": 2024, "url": str(store), "label": "2024"}]

    async def run():
        state = Explorer(catalog, UrlState(), source_factory=ZarrSource)
        await state.open_year(2024)
        state.year = 2024
        state.places = dict(PLACES)
        state.goto_text = "-1.5, 52.25"  # what the box does: the widget sets goto_text
        x, y = geo.lonlat_to_merc(-1.5, 52.25)
        x0, x1, y0, y1 = state.view
        assert x0 < x < x1 and y0 < y < y1
        assert abs((x1 - x0) * math.cos(math.radians(52.25)) - GOTO_SPAN_M) < 1
        state.goto("united kingdom")
        w, s, e, n = PLACES["United Kingdom"]
        (bx0, by0), (bx1, by1) = [geo.lonlat_to_merc(*p) for p in ((w, s), (e, n))]
        x0, x1, y0, y1 = state.view
        assert x0 < bx0 and bx1 < x1 and y0 < by0 and by1 < y1 and "United Kingdom" in state.status
        before = state.view
        state.goto(HOSTILE)
        assert state.view == before and "&lt;img" in state.status and "<img" not in state.status
        await state.settle()
    run_async(run())


def test_a_bad_tile_template_leaves_the_layer_off(store):
    state = Explorer([{"year": 2024, "url": str(store)}], UrlState(basemap="ftp://h/{z}/{x}/{y}"),
                     source_factory=ZarrSource)
    assert state.tiles_url is None and "Web tiles off" in state.status and state.show_tiles is False
    ok = Explorer([{"year": 2024, "url": str(store)}], UrlState(basemap="t/{z}/{x}/{y}.png"), source_factory=ZarrSource)
    assert ok.tiles_url == "t/{Z}/{X}/{Y}.png" and ok.show_tiles is False  # set, but off until turned on
