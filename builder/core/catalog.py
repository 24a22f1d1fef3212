"""catalog.json, the year stores a site offers, read as untrusted data (pure core: stdlib + numpy).

    {"stores": [{"year": 2024, "url": "2024.zarr", "label": "2024 (v1)", "truth": "truth/2024.zarr"}, ...],
     "multiyear": "years.json",
     "embed_origins": ["https://host.example"], "tiles_url": "https://tiles.example/{z}/{x}/{y}.png"}

The one parser of a catalog, for the explorer (app/catalog.py) and the Python reader (builder/reader/store.py).
URLs are relative to the catalog's own URL (each caller resolves them); `label` (a string or a number, optional)
is what the year selector shows; `truth` (a string, optional) is the URL of the year's ground-truth store
(builder/truth.py: the demo's), which the explorer scores classifications against.  The document is read within builder/core/bounds.py's rule with a catalog's
own limits, and every field is checked: anything else is a `CatalogError`, one line naming the catalog.

The map's preview runs before Python and checks catalogs in JavaScript (app/js/catalog.js) by these same rules
and limits; tests/test_catalog.py feeds both the same catalogs, hostile ones included.
"""
from __future__ import annotations

from dataclasses import dataclass

from builder.core.bounds import MetadataError, parse_json
from builder.core.grid import finite_number

CATALOG_JSON_MAX = 512 * 2**10  # bytes of a catalog: fewer than JSON_VALUES_MAX, so that limit never binds (as in JS)
STORES_MAX = 1000  # stores one catalog lists
TEXT_MAX = 2048  # characters of a URL, a label or an origin
ORIGINS_MAX = 100  # entries of embed_origins
YEAR_MIN, YEAR_MAX = 1, 9999
SHOWN = 80  # characters of a refused value named in an error (escaped: repr)


class CatalogError(MetadataError):
    """A catalog that is not read: one line naming it."""


@dataclass(frozen=True)
class Entry:
    year: int
    url: str
    label: str
    truth: str | None = None  # the year's ground-truth store (builder/truth.py)


@dataclass(frozen=True)
class Catalog:
    stores: tuple[Entry, ...]
    multiyear: str | None = None  # the multi-year index's URL
    embed_origins: tuple[str, ...] | None = None  # host pages allowed to send commands (app/messages.py)
    tiles_url: str | None = None  # a deployment's web tile template

    def pick(self, year: int | None) -> Entry:
        """The store of `year`, else the last listed: what the explorer opens first."""
        return next((s for s in self.stores if s.year == year), self.stores[-1])

    def urls(self) -> dict[int, str]:
        return {s.year: s.url for s in self.stores}


def _text(v, what: str, bad) -> str:
    if not isinstance(v, str):
        raise bad(f"{what} is not a string")
    if len(v) > TEXT_MAX:
        raise bad(f"{what} {v!r:.{SHOWN}} is longer than {TEXT_MAX} characters")
    return v


def _year(v) -> int | None:
    """A JSON number of integral value in YEAR_MIN..YEAR_MAX (2024 and 2024.0 alike: JavaScript cannot tell them
    apart), else None."""
    if isinstance(v, bool) or not isinstance(v, (int, float)):
        return None
    if isinstance(v, float) and not v.is_integer():
        return None
    return int(v) if YEAR_MIN <= v <= YEAR_MAX else None


def _all_finite(doc) -> bool:
    """Every number finite as a double (JSON's NaN, 1e400 or a 400-digit integer are not: JavaScript reads them
    as NaN or Infinity, or refuses them)."""
    stack = [doc]
    while stack:
        v = stack.pop()
        if isinstance(v, (int, float)) and not isinstance(v, bool) and not finite_number(v):
            return False
        if isinstance(v, dict):
            stack.extend(v.values())
        elif isinstance(v, list):
            stack.extend(v)
    return True


def catalog_of(doc, where: str = "catalog") -> Catalog:
    """The Catalog a parsed document states; CatalogError (one line, naming `where`) for anything else."""
    def bad(what: str) -> CatalogError:
        return CatalogError(f"{where}: {what}")
    if not isinstance(doc, dict) or not isinstance(doc.get("stores"), list) or not doc["stores"]:
        raise bad('expected an object with a non-empty "stores" list')
    if not _all_finite(doc):
        raise bad("a number beyond a double's range")
    if len(doc["stores"]) > STORES_MAX:
        raise bad(f"{len(doc['stores'])} stores, more than the {STORES_MAX} read")
    stores, seen = [], set()
    for i, s in enumerate(doc["stores"]):
        if not isinstance(s, dict) or "url" not in s:
            raise bad(f"store {i} has no url")
        url = _text(s["url"], f"store {i}: url", bad)
        year = _year(s.get("year"))
        if year is None:
            raise bad(f"store {i} has no integer year in {YEAR_MIN}..{YEAR_MAX}")
        if year in seen:
            raise bad(f"store {i}: year {year} is listed twice")
        seen.add(year)
        label = s.get("label", year)
        if isinstance(label, (int, float)) and not isinstance(label, bool):
            label = str(label)
        truth = None if s.get("truth") is None else _text(s["truth"], f"store {i}: truth", bad)
        stores.append(Entry(year, url, _text(label, f"store {i}: label", bad), truth))
    optional = {k: None if doc.get(k) is None else _text(doc[k], k, bad) for k in ("multiyear", "tiles_url")}
    origins = doc.get("embed_origins")
    if origins is not None:
        if not isinstance(origins, list) or len(origins) > ORIGINS_MAX:
            raise bad(f"embed_origins is not a list of at most {ORIGINS_MAX} origins")
        origins = tuple(_text(o, f"embed_origins {k}", bad) for k, o in enumerate(origins))
    return Catalog(tuple(stores), optional["multiyear"], origins, optional["tiles_url"])


def parse_catalog(raw: bytes, where: str = "catalog") -> Catalog:
    """The Catalog in a document's bytes (read as at most CATALOG_JSON_MAX + 1 of them); CatalogError otherwise."""
    try:
        doc = parse_json(raw, where, CATALOG_JSON_MAX)
    except MetadataError as e:
        raise CatalogError(str(e)) from None
    return catalog_of(doc, where)
