"""The pure core of tessera-explorer: what a `tessera:` store is, and how its bytes are laid out.

Stdlib and numpy only, so that the builder on CPython, the explorer in Pyodide and the notebook share it
(tests/test_contract.py holds both sides to that).  The public API is the modules below and the names in
`__all__`, every public class of those modules among them (tests/test_contract.py); submodules are imported on
first use, so importing the package costs nothing in the browser.

- `convention`: the `tessera:` convention v1, its names and schemas (re-exports geometry and quant).
- `geometry`: UTM zones, central meridians, global levels.
- `grid`: zone grids, where tiles and shards sit inside a zone group (`ZoneGrid`).
- `layout`: the store layouts a reader meets (`Layout`, `V1`, `GEOEMB`) and their rules.
- `zone`: one zone of a store (`Zone`): its grid, lon/lat bounds and bands, points to pixels.
- `utm`: UTM <-> lon/lat on WGS84 (Krueger's series in numpy).
- `describe`: what a store's root metadata says (`StoreInfo`, `Level`, `StoreError`).
- `quant`: quantisation, dequantisation and cosine similarity.
- `codes`: the overviews' compact codes, a class per method (`Code`: `PCACode`, `PQCode`; `kind` of a method).
- `extensions`: this project's extensions (`tessera-ovr:`, `tessera-stack:`).
- `schemacheck`: the convention's schemas applied with a caller-given `jsonschema`.
- `bounds`: how far metadata from elsewhere is trusted (sizes, depth).
- `catalog`: catalog.json, the year stores a site offers (`Catalog`, `parse_catalog`).
- `source`: the `Source` protocol of every transport (async box and byte-range reads, `Hint`, `prefetches`), its
  typed failure `SourceError` (the kinds in errors.json, shared with the browser's JavaScript) and `as_slices`.
- `reader`: the explorer's async reader over a `Source` (`StoreModel`): open, locate, pixels, windows, regions.
- `kinds`: the store kinds that reader tells apart, one class each (`YearStore`, `YearsIndex`, `TimeAxisStore`).
- `geoemb`: opening a `geoemb:` store's zones and time axes in that reader.
- `pixel`: the pixel it gives (`Pixel`).
- `shardio`: the `sharding_indexed` codec's shard index (`ShardIndex`) and whole-shard decoding.
- `geotags`: the GeoTIFF tags of a north-up raster.
- `chunkruns`: which chunks of a sparse global_rgb level exist (`ChunkRuns`).
- `truthclasses`: the classes a ground-truth store names, checked (`check_classes`).
"""
from __future__ import annotations

import importlib

MODULES = ("convention", "geometry", "grid", "zone", "utm", "layout", "describe", "quant", "codes", "extensions",
           "schemacheck", "bounds", "catalog", "source", "reader", "kinds", "geoemb", "pixel", "shardio", "geotags",
           "chunkruns", "truthclasses")
# Public names and the module that defines each.
NAMES = {
    "ZoneGrid": "grid", "Zone": "zone",
    "Layout": "layout", "V1": "layout", "GEOEMB": "layout",
    "TimeAxis": "layout", "TesseraV1": "layout", "TesseraStack": "layout", "Geoemb": "layout",
    "StoreInfo": "describe", "Level": "describe", "StoreError": "describe", "ZoneInfo": "describe",
    "dequantise": "quant", "quantise": "quant", "valid_mask": "quant",
    "central_meridian": "geometry", "NearestZone": "geometry",
    "Registration": "extensions", "TruthError": "truthclasses",
    "ShardIndex": "shardio",
    "ChunkRuns": "chunkruns",
    "Code": "codes", "PCACode": "codes", "PQCode": "codes",
    "MetadataError": "bounds", "parse_json": "bounds",
    "Source": "source", "Hint": "source", "SourceError": "source", "as_slices": "source",
    "StoreModel": "reader", "Pixel": "pixel",
    "YearStore": "kinds", "ManyYears": "kinds", "YearsIndex": "kinds", "TimeAxisStore": "kinds",
    "Catalog": "catalog", "CatalogError": "catalog", "parse_catalog": "catalog", "Entry": "catalog",
}
__all__ = [*MODULES, *NAMES]


def __getattr__(name: str):
    """Submodules and public names, imported on first use (PEP 562)."""
    if name in MODULES:
        return importlib.import_module(f"{__name__}.{name}")
    if name in NAMES:
        return getattr(importlib.import_module(f"{__name__}.{NAMES[name]}"), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))
