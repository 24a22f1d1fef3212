"""The year stores a site offers: catalog.json, parsed by builder/core/catalog.py (its format and rules), the URLs
resolved against the catalog's own URL."""
from __future__ import annotations

from typing import TYPE_CHECKING

from app import page
from builder.core.source import SourceError
from app.reader import bridge
from builder.core.catalog import CatalogError, parse_catalog

if TYPE_CHECKING:
    from app.state import UrlState


async def load_catalog(state: UrlState) -> list[dict]:
    """Stores to offer: the one named in the URL, or the catalog (data/catalog.json next to the app, or ?catalog=URL).

    Store and index URLs in a catalog are relative to the catalog's own URL."""
    if state.store:
        return [{"year": state.year or 0, "url": absolute(state.store)}]
    try:
        text = str(await bridge("fetchJSON", state.catalog))  # size and depth checked in JS too (app/js/catalog.js)
    except SourceError as e:
        if e.kind == "notfound":
            raise SourceError("notfound", f"no store given (?store=URL) and no catalog at {state.catalog}") from None
        raise SourceError(e.kind, f"{state.catalog}: {e}") from None
    try:
        cat = parse_catalog(text.encode(), "catalog")
    except CatalogError as e:
        raise SourceError("invalid", str(e)) from None
    base = page.url(state.catalog)
    state.embed_origins = None if cat.embed_origins is None else list(cat.embed_origins)  # app/messages.py
    if cat.tiles_url is not None and state.basemap is None:  # a deployment's web tile template; ?basemap= wins
        state.basemap = cat.tiles_url
    if cat.multiyear and not state.multiyear:  # ?years=URL wins over the catalog's index
        state.multiyear = resolve(cat.multiyear, base)
    return [{"year": s.year, "url": resolve(s.url, base).rstrip("/"), "label": s.label,
             **({} if s.truth is None else {"truth": resolve(s.truth, base).rstrip("/")})} for s in cat.stores]


def resolve(url: str, base: str) -> str:
    import js
    return str(js.URL.new(url, base).href)


def absolute(url: str) -> str:
    """`url` resolved against the page's own URL."""
    from app import page
    return page.url(url).rstrip("/")
