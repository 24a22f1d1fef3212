"""The "go to" box: a lon,lat pair or a country name from the bundled world-atlas names.

Pure functions (tested on CPython); the names and boxes come from the browser's decoding of
world-atlas (app/js/tessera.js `loadGeography`).  Whatever the user typed is data: a message
about it is made by views.html, which escapes it.
"""
from __future__ import annotations

import json
import math
import re
import unicodedata

_NUM = r"[-+]?(?:\d+(?:\.\d*)?|\.\d+)"
_PAIR = re.compile(rf"^\s*({_NUM})\s*[,;\s]\s*({_NUM})\s*$")
MAX_TEXT = 200  # longer input is not a place name


def fold(name: str) -> str:
    """A name compared without case, accents or punctuation ("Côte d'Ivoire" == "cote divoire")."""
    s = unicodedata.normalize("NFKD", name)
    s = "".join(c for c in s if not unicodedata.combining(c)).casefold()
    return " ".join(re.sub(r"[^\w\s]", "", s).split())


def parse_places(doc: str) -> dict[str, tuple[float, float, float, float]]:
    """[[name, [w, s, e, n]], ...] (JSON from the browser) as {name: box}; malformed entries are skipped."""
    out: dict[str, tuple[float, float, float, float]] = {}
    try:
        items = json.loads(doc)
    except (TypeError, ValueError):
        return out
    for item in items if isinstance(items, list) else []:
        try:
            name, box = item
            box = tuple(float(v) for v in box)
        except (TypeError, ValueError):
            continue
        if isinstance(name, str) and len(box) == 4 and all(math.isfinite(v) for v in box):
            out[name] = box
    return out


def resolve(text: str, places: dict[str, tuple[float, float, float, float]]):
    """What the go-to box means: ("point", lon, lat), ("box", name, (w, s, e, n)) or ("error", message text).

    A pair of numbers is lon,lat (lat,lon is accepted when only that order is in range);
    a name matches exactly (folded), else as the unique name that starts with it, else as
    the unique name that contains it."""
    text = (text or "").strip()
    if not text:
        return ("error", "Type lon,lat or a country name.")
    if len(text) > MAX_TEXT:
        return ("error", f"No place named {text[:MAX_TEXT]}…")
    m = _PAIR.match(text)
    if m:
        a, b = float(m.group(1)), float(m.group(2))
        if -180 <= a <= 180 and -90 <= b <= 90:
            return ("point", a, b)
        if -90 <= a <= 90 and -180 <= b <= 180:
            return ("point", b, a)
        return ("error", f"{text} is not a lon,lat pair (lon -180..180, lat -90..90).")
    want = fold(text)
    folded = {fold(n): n for n in places}
    if want in folded:
        return ("box", folded[want], places[folded[want]])
    for test in (str.startswith, lambda k, w: w in k):
        hits = sorted(n for k, n in folded.items() if want and test(k, want))
        if len(hits) == 1:
            return ("box", hits[0], places[hits[0]])
        if len(hits) > 1:
            return ("error", f"{text} matches several places: {', '.join(hits[:6])}{'…' if len(hits) > 6 else ''}.")
    if not places:
        return ("error", f"No place named {text} (place names are still loading).")
    return ("error", f"No place named {text}. Type lon,lat or a country name.")
