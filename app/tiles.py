"""The optional XYZ web-tile layer under the map (off by default).

A deployment names a tile server by a URL template with {x}, {y} and {z} (or {X}/{Y}/{Z}),
e.g. https://tiles.example.org/{z}/{x}/{y}.png, given as `tiles_url` in data/catalog.json or as
the page parameter ?basemap=TEMPLATE.  Nothing is fetched from it until the user turns the
layer on.  Not to be confused with app/basemap.py, the embedding preview layer.
"""
from __future__ import annotations

from urllib.parse import urlsplit

ATTRIBUTION_MAX = 200


def check_template(url: str | None) -> str | None:
    """The template normalised to {X}/{Y}/{Z} (Bokeh's WMTSTileSource), None when none is set.

    Raises ValueError for a template that could not be a tile URL."""
    if url is None or not str(url).strip():
        return None
    url = str(url).strip()
    for k in "xyz":
        url = url.replace("{" + k + "}", "{" + k.upper() + "}")
    missing = [k for k in "XYZ" if "{" + k + "}" not in url]
    if missing:
        raise ValueError(f"tile URL template lacks {', '.join('{' + k.lower() + '}' for k in missing)}")
    scheme = urlsplit(url.replace("{", "").replace("}", "")).scheme
    if scheme not in ("", "http", "https"):
        raise ValueError(f"tile URL template must be http(s) or relative, not {scheme}:")
    if any(c in url for c in "\"'<>\\ \n\r\t"):
        raise ValueError("tile URL template has characters a URL cannot have")
    return url
