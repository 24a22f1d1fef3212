"""The explorer's page, composed from Panel's layouts: the map fills the window; the controls sit beside it in a side
bar of cards (view, layers, pixel, its plots, tools, export) that the "Controls" toggle folds away.

The map keeps its view grid (app/session.py MAP_W x MAP_H, the size its images and tools are computed at) and is
shown scaled to the space it has, at that aspect (MAP_CSS). The side bar scrolls on its own, so the page
itself does not. On a narrow screen (a phone) the side bar goes below the map and the page scrolls: the rules are the
stylesheets below (media queries; Panel's layouts have no breakpoints of their own).

The plots that answer a click (the spectrum, the pixel across years and its change) are a card of the side bar, folded
until a pixel is selected and opened by each new selection (`open_plots`).
"""
from __future__ import annotations

import panel as pn

from app import views
from app.session import MAP_H, MAP_W

PANE_W = 340  # the width of what the side bar's cards hold (panes, plots, tool tabs), px
HALF_W = PANE_W // 2 - 10  # a control of two side by side (each with its margins)
SIDE_W = PANE_W + 24  # a card, with its padding
NARROW = "(max-width: 760px)"  # a phone: the side bar below the map

# Each layout's own stylesheet (Panel renders each in a shadow root: the page's app.css does not reach inside).
_PAGE_CSS = f"@media {NARROW} {{ :host {{ flex-direction: column !important; height: auto !important; }} }}"
# The map's area is a size container: the map takes the largest box of its aspect that fits it ("contain"), which
# Bokeh's scale_both does not do for a plot (it fills the box, its ranges' aspect lost).
_MAIN_CSS = (":host { min-width: 0; container-type: size; }"
             f" @media {NARROW} {{ :host {{ width: 100% !important; height: auto !important;"
             f" aspect-ratio: {MAP_W} / {MAP_H}; flex: 0 0 auto !important; }} }}")
MAP_CSS = (f":host {{ flex: 0 0 auto !important; align-self: flex-start !important;"
           f" width: min(100cqw, 100cqh * {MAP_W} / {MAP_H}) !important;"
           f" height: min(100cqh, 100cqw * {MAP_H} / {MAP_W}) !important; }}")
# A tool's tabs wrap onto a second line rather than run out of their card.
TABS_CSS = ".bk-header { flex-wrap: wrap; }"
_SIDE_CSS = (f"@media {NARROW} {{ :host {{ height: auto !important; width: 100% !important;"
             " overflow: visible !important; flex: 0 0 auto !important; }} }}")
# A card is as tall as what it holds (Panel's cards flex, and shrank to the side bar's height, their plots spilling out).
_CARD_CSS = (":host { flex: none !important; height: auto !important; max-height: none !important; }"
             f" @media {NARROW} {{ :host {{ width: calc(100% - 10px) !important; overflow-x: auto; }} }}")


# A card's title, smaller than Panel's own (an <h3> at 1.4 em, 5 px above and below: a header 38 px high): a header of
# 24 px, which with the similarity's two selects side by side (HALF_W) keeps 17 controls in view at 1366x768, as many
# as the long column had (benchmarks/layout.py).
_TITLE_CSS = "h3 { margin: 0; font-size: 14px; line-height: 18px; }"


def card(title: str, *objects, name: str, collapsed: bool = False) -> pn.Card:
    """A card of the side bar: a title the user can click to fold it, and `objects` below."""
    header = pn.pane.HTML(views.html("<h3>{}</h3>", title), margin=(2, 0), stylesheets=[_TITLE_CSS])
    return pn.Card(*objects, header=header, name=name, collapsed=collapsed, width=SIDE_W, margin=(2, 5),
                   stylesheets=[_CARD_CSS])


def page(map_pane, cards: list[pn.Card], status) -> pn.Row:
    """The map (at its aspect, as large as its space allows) and the side bar: the status line and `cards`, which the
    Controls toggle hides (in the page: no round trip to Python)."""
    toggle = pn.widgets.Toggle(name="Controls", value=True, button_type="light", width=110, margin=(6, 5))
    body = pn.Column(status, *cards, margin=0)
    toggle.jslink(body, value="visible")
    side = pn.Column(toggle, body, name="side-bar", margin=0, scroll="y-auto",
                     sizing_mode="stretch_height", stylesheets=[_SIDE_CSS])
    main = pn.Column(map_pane, name="map-area", margin=0, sizing_mode="stretch_both", stylesheets=[_MAIN_CSS])
    return pn.Row(main, side, name="explorer", margin=0, sizing_mode="stretch_both", stylesheets=[_PAGE_CSS])


def open_plots(plots: pn.Card) -> None:
    """Open the plots' card (a new selection: the plots that answer it)."""
    plots.collapsed = False
