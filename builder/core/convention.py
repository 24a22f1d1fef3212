"""The `tessera:` Zarr convention v1: the single source of truth for its names.

Every name, registration, required property, array specification and attribute writer of the
convention lives here; its geometry (zone names, EPSG, the pixel formula, global levels) in
builder/core/geometry.py, its (de)quantisation in builder/core/quant.py, how its schemas are applied (with
jsonschema, on both sides) in builder/core/schemacheck.py, this project's extensions (tessera-stack:,
tessera-ovr:) in builder/core/extensions.py.  This module re-exports the first three, so `conv.dequantise`,
`conv.proj_code`, `conv.schema_problems` are the convention's.  The builder writes stores from these
definitions, the validator (`builder.validate`) checks stores against them, and the browser app
(`app/`) imports them inside Pyodide: stdlib + numpy only.

The convention's own text is at its registration's `spec_url` (`TESSERA` below).
"""
from __future__ import annotations

import math
from typing import Any

from builder.core.geometry import (GLOBAL_BBOX, PIXEL_SIZE, SOUTH_FALSE_NORTHING, central_meridian,  # noqa: F401
                              easting_coords, epsg_for_zone, global_centres, global_chunks,
                              global_level_transform, global_rowcol, northing_coords, parse_proj_code,
                              parse_zone_group_name, pixel_corner, proj_code, zone_from_epsg, zone_group_name)
from builder.core.quant import dequantise, quantise, valid_mask  # noqa: F401
from builder.core.schemacheck import registered, schema_problems  # noqa: F401

DATASET_VERSION = "v1"
SHARD = 256  # recommended shard edge (pixels)
CHUNK = 4  # recommended inner chunk edge (pixels)
N_BANDS = 128  # TESSERA v1 model output; stores may declare another n_bands

# --------------------------------------------------------------------------
# Convention registrations (zarr_conventions entries)
# --------------------------------------------------------------------------
TESSERA = {
    "schema_url": "https://raw.githubusercontent.com/ucam-eo/zarr-convention-tessera/refs/tags/v1/schema.json",
    "spec_url": "https://github.com/ucam-eo/zarr-convention-tessera/blob/v1/README.md",
    "uuid": "e7f90d5f-019e-4a38-802f-9fa695e26c71",
    "name": "tessera:",
    "description": "Quantised geospatial embedding vectors with per-pixel dequantisation scales",
}
PROJ = {
    "schema_url": "https://raw.githubusercontent.com/zarr-experimental/geo-proj/refs/tags/v1/schema.json",
    "spec_url": "https://github.com/zarr-experimental/geo-proj/blob/v1/README.md",
    "uuid": "f17cb550-5864-4468-aeb7-f3180cfb622f",
    "name": "proj:",
    "description": "Coordinate reference system information for geospatial data",
}
SPATIAL = {
    "schema_url": "https://raw.githubusercontent.com/zarr-conventions/spatial/refs/tags/v1/schema.json",
    "spec_url": "https://github.com/zarr-conventions/spatial/blob/v1/README.md",
    "uuid": "689b58e2-cf7b-45e0-9fff-9cfc0883d6b4",
    "name": "spatial:",
    "description": "Spatial coordinate information",
}
MULTISCALES = {
    "schema_url": "https://raw.githubusercontent.com/zarr-conventions/multiscales/refs/tags/v1/schema.json",
    "spec_url": "https://github.com/zarr-conventions/multiscales/blob/v1/README.md",
    "uuid": "d35379db-88df-4056-af3a-620245f8e347",
    "name": "multiscales",
    "description": "Multiscale layout of zarr datasets",
}
ROOT_CONVENTIONS = [TESSERA]
ZONE_CONVENTIONS = [TESSERA, PROJ, SPATIAL]
GLOBAL_CONVENTIONS = [MULTISCALES, PROJ, SPATIAL]

GLOBAL_GROUP = "global_rgb"
GLOBAL_RES0 = 0.0001  # degrees, the convention's level-0 resolution

# --------------------------------------------------------------------------
# Group attribute schemas (JSON Schema draft 2020-12).  The validator and the
# explorer both run them through `jsonschema` (builder/core/schemacheck.py).
# --------------------------------------------------------------------------
_CONVENTIONS_LIST = {
    "type": "array",
    "items": {
        "type": "object",
        "required": ["uuid", "name", "schema_url", "spec_url"],
        "properties": {k: {"type": "string"} for k in ("uuid", "name", "schema_url", "spec_url", "description")},
    },
}
ROOT_SCHEMA: dict[str, Any] = {
    "type": "object",
    "required": ["zarr_conventions", "tessera:dataset_version", "tessera:year"],
    "properties": {
        "zarr_conventions": _CONVENTIONS_LIST,
        "tessera:dataset_version": {"const": DATASET_VERSION},
        "tessera:year": {"type": "integer", "minimum": 1900, "maximum": 2200},
    },
}
ZONE_SCHEMA: dict[str, Any] = {
    "type": "object",
    "required": [
        "zarr_conventions", "tessera:dataset_version", "tessera:year", "tessera:utm_zone",
        "tessera:n_bands", "tessera:n_tiles", "tessera:model_version", "proj:code",
        "spatial:dimensions", "spatial:transform", "spatial:shape", "spatial:bbox",
        "spatial:registration",
    ],
    "properties": {
        "zarr_conventions": _CONVENTIONS_LIST,
        "tessera:dataset_version": {"const": DATASET_VERSION},
        "tessera:year": {"type": "integer", "minimum": 1900, "maximum": 2200},
        "tessera:utm_zone": {"type": "integer", "minimum": 1, "maximum": 60},
        "tessera:n_bands": {"type": "integer", "minimum": 1},
        "tessera:n_tiles": {"type": "integer", "minimum": 0},
        "tessera:model_version": {"type": "string", "minLength": 1},
        "tessera:build_version": {"type": "string"},
        "tessera:has_rgb_preview": {"type": "boolean"},
        "proj:code": {"type": "string", "pattern": r"^EPSG:32[67]\d{2}$"},
        "spatial:dimensions": {"const": ["northing", "easting"]},
        "spatial:transform": {"type": "array", "items": {"type": "number"}, "minItems": 6, "maxItems": 6},
        "spatial:shape": {"type": "array", "items": {"type": "integer", "minimum": 0}, "minItems": 2, "maxItems": 2},
        "spatial:bbox": {"type": "array", "items": {"type": "number"}, "minItems": 4, "maxItems": 4},
        "spatial:registration": {"const": "pixel"},
    },
}
_LAYOUT_ITEM = {
    "type": "object",
    "required": ["asset", "transform", "spatial:shape", "spatial:transform"],
    "properties": {
        "asset": {"type": "string"},
        "derived_from": {"type": "string"},
        "resampling_method": {"type": "string"},
        "transform": {
            "type": "object",
            "required": ["scale", "translation"],
            "properties": {
                "scale": {"type": "array", "items": {"type": "number"}, "minItems": 2, "maxItems": 2},
                "translation": {"type": "array", "items": {"type": "number"}, "minItems": 2, "maxItems": 2},
            },
        },
        "spatial:shape": {"type": "array", "items": {"type": "integer"}, "minItems": 2, "maxItems": 2},
        "spatial:transform": {"type": "array", "items": {"type": "number"}, "minItems": 6, "maxItems": 6},
    },
}
GLOBAL_SCHEMA: dict[str, Any] = {
    "type": "object",
    "required": ["zarr_conventions", "multiscales", "proj:code", "spatial:dimensions", "spatial:bbox"],
    "properties": {
        "zarr_conventions": _CONVENTIONS_LIST,
        "multiscales": {
            "type": "object",
            "required": ["layout"],
            "properties": {"layout": {"type": "array", "minItems": 1, "items": _LAYOUT_ITEM},
                           "resampling_method": {"type": "string"}},
        },
        "proj:code": {"const": "EPSG:4326"},
        "spatial:dimensions": {"const": ["lat", "lon"]},
        "spatial:bbox": {"const": GLOBAL_BBOX},
    },
}

# --------------------------------------------------------------------------
# Arrays of a zone group
# --------------------------------------------------------------------------
# name -> (dtype, fill value, dimension names, sharded?)  "B" is n_bands.
ZONE_ARRAYS: dict[str, dict[str, Any]] = {
    "embeddings": {"dtype": "int8", "fill": 0, "dims": ["northing", "easting", "band"], "sharded": True},
    "scales": {"dtype": "float32", "fill": math.nan, "dims": ["northing", "easting"], "sharded": True},
    "rgb": {"dtype": "uint8", "fill": 0, "dims": ["northing", "easting", "band"], "sharded": True, "optional": True},
    "easting": {"dtype": "float64", "fill": None, "dims": ["easting"], "sharded": False},
    "northing": {"dtype": "float64", "fill": None, "dims": ["northing"], "sharded": False},
    "band": {"dtype": "int32", "fill": None, "dims": ["band"], "sharded": False},
}
REQUIRED_ZONE_ARRAYS = [k for k, v in ZONE_ARRAYS.items() if not v.get("optional")]

# --------------------------------------------------------------------------
# Grid geometry of a zone group
# --------------------------------------------------------------------------
def spatial_attrs(origin_e: float, origin_n: float, height: int, width: int,
                  p: float = PIXEL_SIZE) -> dict[str, Any]:
    """`spatial:` properties for a zone grid whose top-left corner is (origin_e, origin_n), pixels of `p` m."""
    return {
        "spatial:dimensions": ["northing", "easting"],
        "spatial:transform": [p, 0.0, float(origin_e), 0.0, -p, float(origin_n)],
        "spatial:shape": [int(height), int(width)],
        "spatial:bbox": [float(origin_e), float(origin_n - height * p), float(origin_e + width * p), float(origin_n)],
        "spatial:registration": "pixel",
    }


def zone_attrs(*, year: int, zone: int, south: bool, n_bands: int, n_tiles: int, model_version: str,
               build_version: str, has_rgb: bool, origin_e: float, origin_n: float,
               height: int, width: int) -> dict[str, Any]:
    attrs: dict[str, Any] = {
        "zarr_conventions": [dict(c) for c in ZONE_CONVENTIONS],
        "tessera:dataset_version": DATASET_VERSION,
        "tessera:year": int(year),
        "tessera:utm_zone": int(zone),
        "tessera:n_bands": int(n_bands),
        "tessera:n_tiles": int(n_tiles),
        "tessera:model_version": str(model_version),
        "tessera:build_version": str(build_version),
        "tessera:has_rgb_preview": bool(has_rgb),
        "proj:code": proj_code(zone, south),
    }
    attrs.update(spatial_attrs(origin_e, origin_n, height, width))
    return attrs


def root_attrs(year: int) -> dict[str, Any]:
    return {
        "zarr_conventions": [dict(c) for c in ROOT_CONVENTIONS],
        "tessera:dataset_version": DATASET_VERSION,
        "tessera:year": int(year),
    }


def global_attrs(res0: float, shapes: list[tuple[int, int]]) -> dict[str, Any]:
    """Root attributes of the `global_rgb` pyramid: level k has resolution res0 * 2**k."""
    layout = []
    for k, shape in enumerate(shapes):
        item: dict[str, Any] = {"asset": str(k)}
        if k:
            item["derived_from"] = str(k - 1)
        item["transform"] = {"scale": [1.0, 1.0] if k == 0 else [2.0, 2.0], "translation": [0.0, 0.0]}
        if k:
            item["resampling_method"] = "mean"
        item["spatial:shape"] = [int(shape[0]), int(shape[1])]
        item["spatial:transform"] = global_level_transform(res0 * 2**k)
        layout.append(item)
    return {
        "zarr_conventions": [dict(c) for c in GLOBAL_CONVENTIONS],
        "multiscales": {"layout": layout, "resampling_method": "mean"},
        "proj:code": "EPSG:4326",
        "spatial:dimensions": ["lat", "lon"],
        "spatial:bbox": list(GLOBAL_BBOX),
    }
