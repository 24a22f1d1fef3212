"""The extensions this project adds to the `tessera:` convention (pure core: stdlib only).

* tessera-stack: a multi-year virtual index (builder.virtual);
* tessera-ovr: embedding overviews in a zone group's `overviews/` subgroup (builder/overviews.py).
Specs: docs/extensions.md, where the registrations' spec_url and schema_url point.
"""
from __future__ import annotations

import math
from typing import Any

from builder.core.convention import PROJ, ROOT_SCHEMA, SPATIAL, ZONE_ARRAYS, ZONE_SCHEMA

# The page that specifies both extensions (docs/extensions.md); the registrations' URLs point at its sections.
SPEC = "https://github.com/ucam-eo/tessera-explorer/blob/main/docs/extensions.md"
_FORMER_SPEC = "https://github.com/ucam-eo/tessera-explorer/blob/main/README.md"  # where the specs were before


class Registration(dict):
    """A convention's registration (the dict a group's zarr_conventions holds) and the (schema_url, spec_url)
    pairs it was written with before (`former`): a group registering one of those still registers it
    (builder/core/schemacheck.py registered).  `dict(reg)` is what a store gets: the current URLs alone."""

    def __init__(self, fields: dict[str, str], former: tuple[tuple[str, str], ...] = ()):
        super().__init__(fields)
        self.former = former


# ---- multi-year index (tessera-stack:) -------------------------------------
# A multi-year virtual index (builder.virtual) stacks tessera: v1 year stores along a leading `year`
# dimension.  It is not a v1 year store (no tessera:year), so it does not register tessera:; it registers
# this extension instead (spec: docs/extensions.md, "Multi-year index extension").  Its groups carry
# tessera-stack:years and, unchanged in meaning, the tessera: v1 properties that hold for every stacked
# year (composition by reference, as the Zarr conventions spec allows); zone groups keep proj:/spatial:.
STACK = Registration({
    "schema_url": f"{SPEC}#tessera-stack-schema",
    "spec_url": f"{SPEC}#multi-year-index-extension-tessera-stack",
    "uuid": "7789f970-f176-4ae4-9cec-d7244be8f2b4",
    "name": "tessera-stack:",
    "description": "tessera: v1 year stores stacked along a year dimension (multi-year virtual index)",
}, former=((f"{_FORMER_SPEC}#tessera-stack-schema", f"{_FORMER_SPEC}#multi-year-index-extension-tessera-stack"),))
STACK_YEARS = "tessera-stack:years"
STACK_DIM = "year"
STACK_ROOT_CONVENTIONS = [STACK]
STACK_ZONE_CONVENTIONS = [STACK, PROJ, SPATIAL]
_YEARS = {"type": "array", "minItems": 1, "items": ROOT_SCHEMA["properties"]["tessera:year"]}


def _stacked(schema: dict[str, Any], drop: tuple[str, ...]) -> dict[str, Any]:
    """A v1 group schema for a stack group: tessera:year replaced by tessera-stack:years, `drop` removed."""
    props = {k: v for k, v in schema["properties"].items() if k != "tessera:year" and k not in drop}
    return {"type": "object", "properties": {**props, STACK_YEARS: _YEARS},
            "required": [STACK_YEARS if k == "tessera:year" else k for k in schema["required"]],
            "not": {"anyOf": [{"required": ["tessera:year"]}, *({"required": [k]} for k in drop)]}}


STACK_ROOT_SCHEMA = _stacked(ROOT_SCHEMA, ())
STACK_ZONE_SCHEMA = _stacked(ZONE_SCHEMA, ("tessera:has_rgb_preview",))

# A stack zone group: the sharded arrays gain the leading year dimension (one year per shard), no rgb
# preview; the coordinate arrays gain `year` (the stacked years, int32).
STACK_ARRAYS: dict[str, dict[str, Any]] = {
    **{k: {**v, "dims": [STACK_DIM, *v["dims"]]} if v["sharded"] else dict(v)
       for k, v in ZONE_ARRAYS.items() if not v.get("optional")},
    STACK_DIM: {"dtype": "int32", "fill": None, "dims": [STACK_DIM], "sharded": False},
}

# ---- embedding overviews (tessera-ovr:) ------------------------------------
# Additional content of a v1 zone group (the convention allows it): coarser levels of 2x2 means and a
# compact code at every level, in the subgroup `overviews/`.  Declared on the zone group by the
# registration below and the tessera-ovr:* properties (spec: docs/extensions.md, "Embedding overviews").
OVR = Registration({
    "schema_url": f"{SPEC}#tessera-ovr-schema",
    "spec_url": f"{SPEC}#embedding-overviews-tessera-ovr",
    "uuid": "2aa942d3-6f5d-4e07-9d51-0605d06e1902",
    "name": "tessera-ovr:",
    "description": "Embedding overviews: 2x2-mean levels and a compact PCA code per level",
}, former=((f"{_FORMER_SPEC}#tessera-ovr-schema", f"{_FORMER_SPEC}#embedding-overviews-tessera-ovr"),))
OVR_VERSION = 1
OVR_GROUP = "overviews"
# The compact code's methods (builder/core/codes.py: one class each) and the dtype of their `code` arrays.
OVR_PCA = "pca-int8"  # D int8 PCA coordinates + a scale per pixel (the default)
OVR_PQ = "pq-uint8"   # product quantisation: M uint8 centroid indices + the vector's norm per pixel
OVR_CODE_DTYPES = {OVR_PCA: "int8", OVR_PQ: "uint8"}
# Arrays of a level group overviews/{k}; level 0 has only the code (its vectors are the zone's own).
# "B" is n_bands, "D" the code's dimensions.
OVR_ARRAYS: dict[str, dict[str, Any]] = {
    "embeddings": {**ZONE_ARRAYS["embeddings"], "last": "B"},
    "scales": dict(ZONE_ARRAYS["scales"]),
    "code": {"dtype": "int8", "fill": 0, "dims": ["northing", "easting", "code"], "sharded": True, "last": "D"},
    "code_scales": {"dtype": "float32", "fill": math.nan, "dims": ["northing", "easting"], "sharded": True},
}
OVR_LEVEL0_ARRAYS = ["code", "code_scales"]
OVR_BASIS = "code_basis"  # float32 (D, B): orthonormal rows (principal axes)
OVR_MEAN = "code_mean"    # float32 (B,)
OVR_CODEBOOK = "code_codebook"  # pq-uint8: float32 (M, 256, B/M), the centroids of the unit vectors' sub-vectors
_NUMS = {"type": "array", "items": {"type": "number"}}
OVR_SCHEMA: dict[str, Any] = {
    "type": "object",
    "required": ["tessera-ovr:version", "tessera-ovr:levels", "tessera-ovr:code"],
    "properties": {
        "tessera-ovr:version": {"const": OVR_VERSION},
        "tessera-ovr:levels": {"type": "array", "minItems": 1, "items": {
            "type": "object",
            "required": ["level", "path", "arrays", "spatial:shape", "spatial:transform"],
            "properties": {
                "level": {"type": "integer", "minimum": 0},
                "path": {"type": "string"},
                "arrays": {"type": "array", "items": {"enum": list(OVR_ARRAYS)}},
                "resampling_method": {"const": "mean"},
                "spatial:shape": {"type": "array", "items": {"type": "integer", "minimum": 0}, "minItems": 2, "maxItems": 2},
                "spatial:transform": {**_NUMS, "minItems": 6, "maxItems": 6},
            }}},
        "tessera-ovr:code": {"type": "object", "required": ["method", "dims"], "oneOf": [
            {"required": ["basis", "mean"], "properties": {
                "method": {"const": OVR_PCA}, "dims": {"type": "integer", "minimum": 1},
                "basis": {"const": f"{OVR_GROUP}/{OVR_BASIS}"}, "mean": {"const": f"{OVR_GROUP}/{OVR_MEAN}"}}},
            {"required": ["codebook"], "properties": {
                "method": {"const": OVR_PQ}, "dims": {"type": "integer", "minimum": 1},
                "codebook": {"const": f"{OVR_GROUP}/{OVR_CODEBOOK}"}}}]},
    },
}


def ovr_array(name: str, method: str) -> dict[str, Any]:
    """The spec of an overview level's array `name` (OVR_ARRAYS) in a store whose code is of `method`."""
    spec = OVR_ARRAYS[name]
    return {**spec, "dtype": OVR_CODE_DTYPES[method]} if name == "code" else spec


def ovr_attrs(levels: list, code: dict) -> dict[str, Any]:
    """tessera-ovr:* properties of a zone group; `levels` = [(k, the level's grid: builder.core.grid.ZoneGrid.level(k))],
    `code` the tessera-ovr:code record (builder/core/codes.py: the code's `attrs()`)."""
    items = []
    for k, g in levels:
        item: dict[str, Any] = {"level": int(k), "path": f"{OVR_GROUP}/{k}",
                                "arrays": list(OVR_LEVEL0_ARRAYS) if k == 0 else list(OVR_ARRAYS)}
        if k:
            item["resampling_method"] = "mean"
        spatial = g.attrs()
        item["spatial:shape"] = spatial["spatial:shape"]
        item["spatial:transform"] = spatial["spatial:transform"]
        items.append(item)
    return {"tessera-ovr:version": OVR_VERSION, "tessera-ovr:levels": items, "tessera-ovr:code": dict(code)}
