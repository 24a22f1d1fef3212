"""The `tessera-explorer` Sphinx directive: the live explorer in a documentation page.

    # conf.py
    extensions = ["builder.sphinx_ext"]
    tessera_explorer_url = "https://your.site/index.html"   # the explorer (default "index.html")

    .. tessera-explorer::
       :store: data/2024.zarr        a store, relative to the explorer or absolute (or :catalog: URL)
       :year: 2024
       :lon: 0.05
       :lat: 50.85
       :span: 3000                   metres across the view
       :selection: 0.051,50.849      lon,lat of the selected pixel
       :pins: 0.05,50.85;0.06,50.86  lon,lat;lon,lat
       :height: 640                  pixels, before the frame sizes itself to the explorer (and at least)
       :tools: classify,clusters     the tool tabs shown (labels, classify, regression, clusters, change, similarity,
                                     scatter), or none
       :name: viewer                 the iframe's id, for the page's scripts
       :origins: https://docs.example.org  this page's origin, when the explorer is served from another one

It expands to an iframe of the explorer (`index.html?embed=1&...#year=...`, written by app/state.py's UrlState) that
sizes itself to its content with iframe-resizer, loaded from the explorer's own site
(`vendor/iframe-resizer/`, which `python -m builder site` vendors from npm), and to the page script
`tessera-explorer.js` (beside this module), which speaks the explorer's message contract (app/messages.py,
docs/embedding.md): `tesseraExplorer.send(frame, cmd, ...args)`.  A relative explorer URL is taken from the
docs' root, so the directive works on pages at any depth.  Option values are checked here (a bad one is a
Sphinx error naming it) and escaped in the HTML.
"""
from __future__ import annotations

import html
import math
import posixpath
from pathlib import Path
from urllib.parse import quote, urlencode, urlsplit

from docutils import nodes
from docutils.parsers.rst import Directive, directives

from app.state import TOOL_TABS, UrlState, tool_tabs  # the explorer's own URL rules (pure: stdlib only)

STATIC = Path(__file__).resolve().parent / "sphinx_static"
SCRIPT = "tessera-explorer.js"
RESIZER = "vendor/iframe-resizer/iframeResizer.min.js"  # in the explorer's site (builder/site.py _js)
FRAME_CLASS = "tessera-explorer-frame"
MAX_TEXT = 2000  # characters of one option's value


def _number(low: float, high: float):
    def check(text: str) -> float:
        try:
            v = float(text)
        except (TypeError, ValueError):
            raise ValueError(f"{str(text)[:40]!r} is not a number") from None
        if not math.isfinite(v) or not low <= v <= high:
            raise ValueError(f"{v} is outside {low}..{high}")
        return v
    return check


def _lonlat(text: str) -> tuple[float, float]:
    parts = str(text).split(",")
    if len(parts) != 2:
        raise ValueError(f"{str(text)[:40]!r} is not lon,lat")
    return _number(-180, 180)(parts[0]), _number(-90, 90)(parts[1])


def _pins(text: str) -> list[tuple[float, float]]:
    return [_lonlat(p) for p in str(text).split(";") if p.strip()]


def _tools(text: str) -> list[str]:
    try:
        return tool_tabs(text)
    except ValueError:
        raise ValueError(f"{str(text)[:60]!r} is not a list of tools ({', '.join(TOOL_TABS)}) or none") from None


def _url(text: str) -> str:
    text = str(text).strip()
    if not text or len(text) > MAX_TEXT or any(ord(c) < 32 for c in text):
        raise ValueError("not a URL")
    if urlsplit(text).scheme not in ("", "http", "https"):
        raise ValueError(f"{text[:40]!r}: only http(s) or relative URLs")
    return text


def _height(text: str) -> int:
    return int(_number(100, 10000)(text))


def explorer_src(explorer: str, depth: int, o: dict) -> tuple[str, str]:
    """(the iframe's src, the iframe-resizer script's URL) for the directive's options `o` on a page `depth`
    directories below the docs' root."""
    query = [("embed", "1")]
    for key in ("store", "catalog"):
        if key in o:
            query.append((key, o[key]))
    if "tools" in o:
        query.append(("tools", ",".join(o["tools"]) or "none"))
    if "origins" in o:
        query.append(("origins", o["origins"]))
    view = UrlState(year=o.get("year"), lon=o.get("lon"), lat=o.get("lat"), span=o.get("span"),
                    sel=o.get("selection"), pins=o.get("pins") or [])
    frag = view.to_hash()  # the hash, exactly as the explorer writes it
    src = explorer + ("&" if "?" in explorer else "?") + urlencode(query, quote_via=quote, safe=",;:/") + \
        (frag if frag != "#" else "")
    base = explorer.split("?", 1)[0].split("#", 1)[0]
    resizer = (base.rsplit("/", 1)[0] + "/" if "/" in base else "") + RESIZER
    u = urlsplit(explorer)
    if not (u.scheme or u.netloc or explorer.startswith("/")):  # relative to the docs' root: to this page
        up = "../" * depth
        src, resizer = posixpath.normpath(up + src.split("?", 1)[0]) + "?" + src.split("?", 1)[1], \
            posixpath.normpath(up + resizer)
    return src, resizer


class TesseraExplorer(Directive):
    has_content = False
    option_spec = {
        "store": _url, "catalog": _url, "year": lambda t: int(_number(1900, 2200)(t)),
        "lon": _number(-180, 180), "lat": _number(-90, 90), "span": _number(1, 4.1e7),
        "selection": _lonlat, "pins": _pins, "height": _height, "tools": _tools,
        "name": directives.unchanged_required, "origins": _url, "title": directives.unchanged_required,
    }

    def run(self):
        env = self.state.document.settings.env
        o = dict(self.options)
        if "store" in o and "catalog" in o:
            raise self.error("tessera-explorer: give :store: or :catalog:, not both")
        explorer = _url(env.config.tessera_explorer_url)
        src, resizer = explorer_src(explorer, env.docname.count("/"), o)
        height = o.get("height", 640)
        attrs = {"class": FRAME_CLASS, "src": src, "title": o.get("title", "TESSERA explorer"),
                 "style": f"width: 100%; height: {height}px; border: 0",
                 "data-tessera-min-height": str(height), "data-tessera-resizer": resizer,
                 "data-tessera-state": "starting"}
        if "name" in o:
            attrs = {"id": o["name"], **attrs}
        tag = "<iframe " + " ".join(f'{k}="{html.escape(str(v)[:MAX_TEXT * 2], quote=True)}"'
                                    for k, v in attrs.items()) + "></iframe>"
        # the frame takes the explorer's width (tessera-explorer.js): wider than the text column, its wrapper scrolls
        return [nodes.raw("", f'<div class="tessera-explorer" style="overflow-x: auto">{tag}</div>', format="html")]


def _page_script(app, pagename, templatename, context, doctree):
    """The contract's page script on the pages that hold an explorer."""
    if FRAME_CLASS in (context.get("body") or ""):
        app.add_js_file(SCRIPT)


def _static(app):
    app.config.html_static_path.append(str(STATIC))


def setup(app):
    app.add_config_value("tessera_explorer_url", "index.html", "html", types=[str])
    app.add_directive("tessera-explorer", TesseraExplorer)
    app.connect("builder-inited", _static)
    app.connect("html-page-context", _page_script)
    return {"version": "1", "parallel_read_safe": True, "parallel_write_safe": True}
