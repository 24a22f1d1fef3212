"""The year stores a site offers: catalog.json, read as untrusted data.

    {"stores": [{"year": 2024, "url": "2024.zarr", "label": "2024 (v1)"}, ...], "multiyear": "years.json"}

URLs are relative to the catalog's own URL; `label` (optional) is what the year selector shows.
"""
from __future__ import annotations

import json

from typing import TYPE_CHECKING

from app import page
from app.reader import SourceError, bridge

if TYPE_CHECKING:
    from app.state import UrlState


def parse_catalog(doc) -> tuple[list[dict], str | None]:
    """catalog.json's stores ({year, url, label}) and multi-year index URL; anything else is one clear error."""
    def bad(what: str):
        return SourceError("invalid", f"catalog: {what}")
    if not isinstance(doc, dict) or not isinstance(doc.get("stores"), list) or not doc["stores"]:
        raise bad('expected an object with a non-empty "stores" list')
    stores = []
    for i, s in enumerate(doc["stores"]):
        if not isinstance(s, dict) or not isinstance(s.get("url"), str):
            raise bad(f"store {i} has no url")
        if not isinstance(s.get("year"), int) or isinstance(s.get("year"), bool):
            raise bad(f"store {i} has no integer year")
        label = s.get("label", str(s["year"]))
        stores.append({"year": s["year"], "url": s["url"], "label": label if isinstance(label, str) else str(label)})
    multiyear = doc.get("multiyear")
    if multiyear is not None and not isinstance(multiyear, str):
        raise bad("multiyear is not a URL")
    return stores, multiyear


async def load_catalog(state: UrlState) -> list[dict]:
    """Stores to offer: the one named in the URL, or the catalog (data/catalog.json next to the app, or ?catalog=URL).

    Store and index URLs in a catalog are relative to the catalog's own URL."""
    if state.store:
        return [{"year": state.year or 0, "url": absolute(state.store)}]
    try:
        doc = json.loads(str(await bridge("fetchJSON", state.catalog)))  # size and depth checked in JS
    except SourceError as e:
        if e.kind == "notfound":
            raise SourceError("notfound", f"no store given (?store=URL) and no catalog at {state.catalog}") from None
        raise SourceError(e.kind, f"{state.catalog}: {e}") from None
    base = page.url(state.catalog)
    stores, multiyear = parse_catalog(doc)
    state.embed_origins = doc.get("embed_origins")  # host pages allowed to send commands (app/messages.py)
    tiles_url = doc.get("tiles_url")  # a deployment's web tile template; ?basemap= wins
    if isinstance(tiles_url, str) and state.basemap is None:
        state.basemap = tiles_url
    if multiyear and not state.multiyear:  # ?years=URL wins over the catalog's index
        state.multiyear = resolve(multiyear, base)
    return [dict(s, url=resolve(s["url"], base).rstrip("/")) for s in stores]


def resolve(url: str, base: str) -> str:
    import js
    return str(js.URL.new(url, base).href)


def absolute(url: str) -> str:
    """`url` resolved against the page's own URL."""
    from app import page
    return page.url(url).rstrip("/")
