"""Views: pure functions from the explorer's state to what the panes and plots show.

Nothing here reads a store or touches the UI, so every view is tested on CPython. Text from a
store, a catalog or an index is data: `html` escapes every value it is given, and every pane's
HTML is made by it.
"""
from __future__ import annotations

import html as _html
import numbers
from urllib.parse import quote

import numpy as np
from bokeh.palettes import Category10

from app import geo, render
from builder.core.pixel import Pixel
from app.state import UrlState
from builder.core import convention as conv
from builder.core import layout as lay
from builder.core.quant import cosine_table

COLORS = list(Category10[10])  # selected pixel first, then one per pin
EMPTY_IMAGE = dict(image=[], x=[], y=[], dw=[], dh=[])


def html(template: str, *values) -> str:
    """`template` (trusted markup written here) filled with `values`, each escaped: the one way text reaches a pane."""
    return template.format(*(v if isinstance(v, numbers.Number) else _html.escape(str(v)) for v in values))


def in_view(px: Pixel, view: tuple[float, float, float, float]) -> bool:
    """Whether the pixel's centre lies in the Web Mercator box (x0, x1, y0, y1)."""
    x, y = geo.lonlat_to_merc(px.lon, px.lat)
    return view[0] <= float(x) <= view[1] and view[2] <= float(y) <= view[3]


def info_html(model, selected: Pixel | None, outside: tuple[float, float] | None,
              view: tuple[float, float, float, float] | None = None) -> str:
    """The selected pixel: where it is, in which zone and store, and its scale (or that it has no data); first, when
    it lies outside `view` (the map's box), that it does (the side bar's "Go to it" goes there)."""
    if selected is None:
        if outside is not None:
            return html("<b>{:.5f}, {:.5f}</b>: outside the zones of this store.", *outside)
        return "Click the map to read a pixel's embedding."
    if view is not None and not in_view(selected, view):
        return html("<b class='away'>The selected pixel is outside the view</b> ({:.5f}, {:.5f}): <i>Go to it</i>, "
                    "or click the map to select another.", selected.lon, selected.lat)
    px, z = selected, model.zones[selected.zone]
    where = html("<b>{:.6f}, {:.6f}</b> (lon, lat)<br>{} ({}) E {:.1f} N {:.1f}<br>row {}, col {}, year {}<br>"
                 "<span class='store'>model {}, build {}</span>", px.lon, px.lat, z.name,
                 conv.proj_code(z.zone, z.south), px.easting, px.northing, px.row, px.col, model.year,
                 z.model_version, z.build_version)
    if px.valid:
        return where + html("<br>scale {:.6g}, |v| = {:.3f}", px.scale, float(np.linalg.norm(px.vector)))
    if px.status == lay.WATER:  # geoemb: NaN scale (the land mask)
        return where + "<br><b>No data</b> at this pixel: water (its scale is NaN)."
    what = "no data yet (its scale is +inf)" if px.scale == np.inf else "water or no coverage (its scale is NaN)"
    return where + f"<br><b>No data</b> at this pixel: {what}."


def _lines(selected: Pixel | None, pins: list[Pixel]) -> list[tuple[Pixel, str, str]]:
    lines = [(p, COLORS[(i + 1) % len(COLORS)], f"pin {i + 1}: {p.label()}") for i, p in enumerate(pins)]
    if selected is not None and selected.valid:
        lines.insert(0, (selected, COLORS[0], f"selected: {selected.label()}"))
    return lines


def spectrum_data(selected: Pixel | None, pins: list[Pixel]) -> dict:
    """The dequantised vectors of the selection and the pins, one line each."""
    lines = _lines(selected, pins)
    return dict(xs=[list(range(len(p.vector))) for p, _, _ in lines], ys=[[float(v) for v in p.vector] for p, _, _ in lines],
                color=[c for _, c, _ in lines], label=[lab for _, _, lab in lines])


def pixel_quad(zone, row: int, col: int) -> list[float]:
    """The pixel's footprint on the map: its four corners in Web Mercator, x0, y0, ..., x3, y3, in turn round it
    (a tap inside it on the page shows the spectrum read ahead there: app/web/press.js)."""
    rows, cols = np.array([row, row, row + 1, row + 1]), np.array([col, col + 1, col + 1, col])
    x, y = geo.lonlat_to_merc(*geo.utm_to_lonlat(*zone.grid.corner(rows, cols), zone.zone, zone.south))
    return [float(v) for xy in zip(x, y) for v in xy]


def pins_data(pins: list[Pixel]) -> dict:
    xs, ys = geo.lonlat_to_merc([p.lon for p in pins], [p.lat for p in pins])
    return dict(x=list(np.atleast_1d(xs)), y=list(np.atleast_1d(ys)),
                color=[COLORS[(i + 1) % len(COLORS)] for i in range(len(pins))], label=[p.label() for p in pins])


def selected_data(selected: Pixel | None) -> dict:
    if selected is None:
        return dict(x=[], y=[])
    x, y = geo.lonlat_to_merc(selected.lon, selected.lat)
    return dict(x=[float(x)], y=[float(y)])


def table_html(selected: Pixel | None, pins: list[Pixel]) -> str:
    """Cosine similarity between the selection and every pin."""
    items = ([("selected", selected)] if selected is not None and selected.valid else [])
    items += [(f"pin {i + 1}", p) for i, p in enumerate(pins)]
    if len(items) < 2:
        return "<i>Pin pixels to compare them (cosine similarity).</i>"
    m = cosine_table([p.vector for _, p in items])
    head = "".join(html("<th>{}</th>", n) for n, _ in items)
    rows = "".join(html("<tr><th>{}</th>", n) + "".join(f"<td>{m[i, j]:.3f}</td>" for j in range(len(items)))
                   + "</tr>" for i, (n, _) in enumerate(items))
    return f"<table class='cosine' id='cosine-table'><tr><th>cosine</th>{head}</tr>{rows}</table>"


def years_data(years: list[int] | None, years_pixel) -> tuple[dict, dict]:
    """The selected pixel in every year of a multi-year index, and the cosine between consecutive years."""
    if not years or years_pixel is None:
        return dict(xs=[], ys=[], color=[], label=[]), dict(year=[], cosine=[], label=[])
    zone, row, col, vecs = years_pixel
    lines = [(y, v) for y, v in zip(years, vecs) if v is not None]
    spectra = dict(xs=[list(range(len(v))) for _, v in lines], ys=[[float(x) for x in v] for _, v in lines],
                   color=[COLORS[i % len(COLORS)] for i in range(len(lines))],
                   label=[f"{y} ({zone.name} r{row} c{col})" for y, _ in lines])
    pts = [(y1, float(cosine_table([v0, v1])[0, 1]), f"{y0}->{y1}") for (y0, v0), (y1, v1) in zip(lines, lines[1:])]
    return spectra, dict(year=[p[0] for p in pts], cosine=[p[1] for p in pts], label=[p[2] for p in pts])


def store_message(model) -> str:
    """The status line after opening a geoemb: store: its years, and what the map shows."""
    years = ", ".join(map(str, model.years))
    if model.levels:
        return html("geoemb: store, years {}; the map shows its global_rgb overview.", years)
    return html("geoemb: store, years {}; it has no global_rgb overview: the map tints the zones' grids grey "
                "and, zoomed in below {:g} m per screen pixel, shows the first three embedding dimensions "
                "({}) in false colour.", years, render.ZONE_ZOOM_M, model.preview_array)


def image_data(rgba: np.ndarray | None, v: render.View) -> dict:
    """An image_rgba source's data for an RGBA image covering the view."""
    if rgba is None:
        return dict(EMPTY_IMAGE)
    return dict(image=[render.to_bokeh_image(rgba)], x=[v.x0], y=[v.y0], dw=[v.x1 - v.x0], dh=[v.y1 - v.y0])


def overlay_image(overlays, v: render.View) -> np.ndarray | None:
    """The layers of the overlay tools on the map (tool.Overlay: app/tools/region.py Layers, every zone, in their
    colours) sampled into the view, the later over the earlier (None when none is drawn)."""
    drawn = [t.layer.image(v) for t in overlays if t.drawn()]
    if not drawn:
        return None
    out = drawn[0]
    for img in drawn[1:]:
        out = np.where(img[..., 3:] > 0, img, out)
    return out


def scale_bar_data(view: tuple[float, float, float, float], fraction: float = 0.2) -> dict:
    """A scale bar for a Web Mercator view: a round ground length (1, 2 or 5 x 10^k m) at most
    `fraction` of the view's width, measured at the view's centre latitude (Mercator stretches
    ground distances by 1/cos(lat)), drawn near the bottom-left corner."""
    x0, x1, y0, y1 = view
    if not (x1 > x0 and y1 > y0):
        return dict(x0=[], x1=[], y=[], label=[], lx=[], ly=[])
    _, lat = geo.merc_to_lonlat((x0 + x1) / 2, (y0 + y1) / 2)
    k = float(np.cos(np.radians(float(lat))))  # ground metres per Mercator metre
    target = (x1 - x0) * fraction * k
    p = 10 ** np.floor(np.log10(target))  # may round up to the next power of ten when target is just below it
    ground = max(m * q for q in (p / 10, p) for m in (1, 2, 5) if m * q <= target)
    length = ground / k
    bx, by = x0 + (x1 - x0) * 0.04, y0 + (y1 - y0) * 0.05
    label = f"{ground / 1000:g} km" if ground >= 1000 else f"{ground:g} m"
    return dict(x0=[float(bx)], x1=[float(bx + length)], y=[float(by)], label=[label],
                lx=[float(bx + length / 2)], ly=[float(by + (y1 - y0) * 0.015)])


def goto_message(result) -> str:
    """The status line for a go-to: where the map went, or why not (the user's text escaped)."""
    kind = result[0]
    if kind == "point":
        return html("Went to <b>{:.5f}, {:.5f}</b> (lon, lat).", result[1], result[2])
    if kind == "box":
        return html("Went to <b>{}</b>.", result[1])
    return html("<span class='goto-error'>{}</span>", result[1])


LAB_PAGE = "lab/lab/index.html"  # the site's JupyterLab page (builder/lab.py), beside the explorer's index.html


def notebook_link(store: str, url: UrlState) -> str:
    """The link that opens the view of `url` on `store` as a new notebook in the site's lab (app/web/lab-view.js
    reads it; app/notebook.py `view` parses it with UrlState). Only the view travels: store, year, centre, width,
    selection and pins."""
    view = UrlState(store=store, year=url.year, lon=url.lon, lat=url.lat, span=url.span, sel=url.sel, pins=url.pins)
    return LAB_PAGE + "#view=" + quote(view.to_hash()[1:], safe="")


def notebook_html(store: str | None, url: UrlState) -> str:
    if not store or url.lon is None:
        return ""
    return html('<a class="tessera-notebook" href="{}" target="_blank" rel="noopener">Open this view in a notebook</a>',
                notebook_link(store, url))

