"""The year stores a site offers: catalog.json, read as untrusted data.

    {"stores": [{"year": 2024, "url": "2024.zarr", "label": "2024 (v1)"}, ...], "multiyear": "years.json"}

URLs are relative to the catalog's own URL; `label` (optional) is what the year selector shows.
"""
from __future__ import annotations

from app.reader import SourceError


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
