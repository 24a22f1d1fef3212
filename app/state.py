"""Shareable state: what the URL holds, and how it is written and read back.

    index.html?store=URL&embed=1&tools=classify,clusters#year=2024&lon=0.05&lat=50.85&span=3000&sel=0.051,50.849&pins=lon,lat;lon,lat&sim=0.8
        &sim_from=pins&sim_mode=max (an overlay tool's own parts, `parts`: here pixel similarity's, app/tools/similarity.py)
        &labels=[["class",...]] (a small label set, JSON: see app/tools/labels.py `saved`; a large one is
        labels=stored:<id>, kept in the browser's storage: app/tools/stored.py)
        &tool=cluster,k:5,seed:0,win:... (the tool layer shown and its settings: app/tools/share.py)

`store` may sit in the query (what an embedding page sets) or in the hash
(what the app writes); the hash wins.  Pins are lon/lat (6 decimals, about
0.1 m), so a link still points at the same ground when the year changes.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field
from urllib.parse import parse_qsl, quote, urlencode


TOOL_TABS = ("labels", "classify", "regression", "clusters", "change", "similarity", "scatter")  # app/tools/ui.py's tabs, by name


@dataclass
class UrlState:
    store: str | None = None
    year: int | None = None
    lon: float | None = None
    lat: float | None = None
    span: float | None = None  # metres across the view
    sel: tuple[float, float] | None = None
    pins: list[tuple[float, float]] = field(default_factory=list)
    parts: dict = field(default_factory=dict)  # the overlay tools' hash parts, as text (tool.Overlay url_parts, restore)
    embed: bool = False
    multiyear: str | None = None  # URL of a multi-year index (from catalog.json or ?years=URL)
    catalog: str = "data/catalog.json"  # ?catalog=URL: the year stores to offer when no store is given
    labels: str | None = None  # a small label set (app/tools/labels.py compact JSON), or stored:<id>
    tool: str | None = None  # the tool layer shown, re-run on load (app/tools/share.py)
    basemap: str | None = None  # ?basemap=TEMPLATE: an XYZ tile URL template (app/tiles.py), off until turned on
    origins: str | None = None  # ?origins=A,B: host page origins whose postMessage commands are obeyed (app/messages.py)
    tools: list | None = None  # ?tools=a,b: the tool tabs shown (names in TOOL_TABS; "none": no tools); None: all
    embed_origins: list | None = None  # the catalog's "embed_origins" (same meaning), set by app/main.py
    problems: list = field(default_factory=list)  # hash fields left out as unreadable, one phrase each (shown once)

    def to_hash(self) -> str:
        q: list[tuple[str, str]] = []
        if self.store:
            q.append(("store", self.store))
        if self.year is not None:
            q.append(("year", str(self.year)))
        for k in ("lon", "lat"):  # 1 cm and 1 mm: a reload samples the same pixels (tools re-run on one window)
            v = getattr(self, k)
            if v is not None:
                q.append((k, f"{v:.7f}"))
        if self.span is not None:
            q.append(("span", f"{self.span:.3f}"))
        if self.sel:
            q.append(("sel", f"{self.sel[0]:.6f},{self.sel[1]:.6f}"))
        if self.pins:
            q.append(("pins", ";".join(f"{a:.6f},{b:.6f}" for a, b in self.pins)))
        q.extend(self.parts.items())
        if self.labels:
            q.append(("labels", self.labels))
        if self.tool:
            q.append(("tool", self.tool))
        return "#" + urlencode(q, safe="/:,;", quote_via=quote)

    @classmethod
    def from_url(cls, search: str = "", hash_: str = "") -> "UrlState":
        query = dict(parse_qsl(search.lstrip("?")))
        h = dict(parse_qsl(hash_.lstrip("#")))
        s = cls(embed=query.get("embed") == "1")
        s.store = h.get("store") or query.get("store")
        s.multiyear = query.get("years")
        s.catalog = query.get("catalog") or s.catalog
        s.basemap = query.get("basemap")
        s.origins = query.get("origins")
        s.labels = h.get("labels")
        s.tool = h.get("tool")
        # the fields it does not know are the overlay tools' (each reads its own), at most MAX_PARTS, each bounded
        for key, text in [(k, v) for k, v in h.items() if k not in OWN_KEYS][:MAX_PARTS]:
            if len(text) > MAX_PART:
                s.problems.append(f"{clip(key)} is longer than {MAX_PART} characters")
            else:
                s.parts[key] = text

        def read(key: str, raw: str | None, parse, why: str):  # one bad field is named; the others still apply
            if raw is None or raw == "":
                return None
            try:
                return parse(raw)
            except (ValueError, TypeError, OverflowError):
                s.problems.append(f"{key} {clip(raw)!r} {why}")
                return None

        s.year = read("year", h.get("year") or query.get("year"), int, "is not a whole number")
        if "lon" in h and "lat" in h:
            s.lon, s.lat = read("lon,lat", f"{h['lon']},{h['lat']}", _finite_pair, "are not finite numbers") \
                or (None, None)
        s.span = read("span", h.get("span"), _positive, "is not a positive number")
        s.sel = read("sel", h.get("sel"), _finite_pair, "is not lon,lat")
        s.pins = [p for p in (read("pins", raw, _finite_pair, "is not lon,lat")
                              for raw in (h.get("pins") or "").split(";")) if p is not None]
        s.tools = read("tools", query.get("tools"), tool_tabs, f"is not a list of tools ({', '.join(TOOL_TABS)}) or none")
        return s


SHOWN = 60  # characters of a refused link value quoted back (here, app/tools/share.py, app/tools/similarity.py)
OWN_KEYS = frozenset({"store", "year", "lon", "lat", "span", "sel", "pins", "labels", "tool"})
MAX_PARTS, MAX_PART = 16, 2000  # the overlay tools' parts a link may hold, and their longest text


def clip(text: str) -> str:
    return text if len(text) <= SHOWN else text[:SHOWN] + "..."


def tool_tabs(text: str) -> list[str]:
    """The tool tabs a `tools` parameter names (comma-separated names of TOOL_TABS, or "none": no tab)."""
    names = [t.strip().lower() for t in str(text).split(",") if t.strip()]
    if names == ["none"]:
        return []
    if not names or any(n not in TOOL_TABS for n in names):
        raise ValueError(text)
    return [n for n in TOOL_TABS if n in names]


def _finite_pair(text: str) -> tuple[float, float]:
    a, b = text.split(",")  # ValueError unless exactly two parts
    pair = (float(a), float(b))
    if not all(math.isfinite(v) for v in pair):
        raise ValueError(text)
    return pair


def _positive(text: str) -> float:
    v = float(text)
    if not (math.isfinite(v) and v > 0):
        raise ValueError(text)
    return v
