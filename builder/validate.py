"""Check a year store against the `tessera:` convention v1.

Every rule comes from builder.convention; this module only walks the store
(local path or any fsspec URL, through zarr-python) and reports each
violation as one line "where: what".
"""
from __future__ import annotations

import math
from typing import Any

import jsonschema
import numpy as np
import zarr

from builder import convention as conv


def _schema_problems(attrs: dict, schema: dict, where: str) -> list[str]:
    v = jsonschema.Draft202012Validator(schema)
    out = []
    for err in sorted(v.iter_errors(attrs), key=lambda e: list(e.path)):
        key = "/".join(str(p) for p in err.path) or "attributes"
        out.append(f"{where}: {key}: {err.message}")
    return out


def _registration_problems(attrs: dict, required, where: str) -> list[str]:
    return [f"{where}: convention {name!r} is not registered in zarr_conventions (uuid, schema_url, spec_url)"
            for name in conv.registered(attrs, required)]


def _fill_ok(actual: Any, expected: Any) -> bool:
    if expected is None:
        return True
    if isinstance(expected, float) and math.isnan(expected):
        return actual is not None and isinstance(actual, (float, np.floating)) and math.isnan(actual)
    return actual == expected


def _codec_names(arr: zarr.Array) -> list[str]:
    return [type(c).__name__ for c in (arr.metadata.codecs or [])]


def _values(arr: zarr.Array, where: str, probs: list[str]):
    try:
        return arr[:]
    except Exception as e:  # a corrupt chunk or a codec that does not match the bytes
        probs.append(f"{where}: cannot read values ({type(e).__name__}: {e})")
        return None


def _check_zone(zone: zarr.Group, name: str, root_attrs: dict) -> list[str]:
    where = name
    attrs = dict(zone.attrs)
    probs = _schema_problems(attrs, conv.ZONE_SCHEMA, where) + _registration_problems(attrs, conv.ZONE_CONVENTIONS, where)
    zone_num = conv.parse_zone_group_name(name)
    if attrs.get("tessera:utm_zone") != zone_num:
        probs.append(f"{where}: tessera:utm_zone={attrs.get('tessera:utm_zone')!r} does not match the group name")
    if attrs.get("tessera:year") != root_attrs.get("tessera:year"):
        probs.append(f"{where}: tessera:year={attrs.get('tessera:year')!r} differs from the root's "
                     f"{root_attrs.get('tessera:year')!r}")
    south = None
    try:
        pz, south = conv.parse_proj_code(attrs.get("proj:code", ""))
        if pz != zone_num:
            probs.append(f"{where}: proj:code {attrs['proj:code']} is for zone {pz}, not {zone_num}")
    except ValueError as e:
        probs.append(f"{where}: {e}")
    shape = attrs.get("spatial:shape")
    transform = attrs.get("spatial:transform")
    h = w = None
    if isinstance(shape, list) and len(shape) == 2 and isinstance(transform, list) and len(transform) == 6:
        h, w = shape
        p = conv.PIXEL_SIZE
        if transform[0] != p or transform[4] != -p or transform[1] != 0 or transform[3] != 0:
            probs.append(f"{where}: spatial:transform {transform} is not a north-up {p} m grid")
        e0, n0 = transform[2], transform[5]
        bbox = [e0, n0 - h * p, e0 + w * p, n0]
        if attrs.get("spatial:bbox") is not None and not np.allclose(attrs["spatial:bbox"], bbox):
            probs.append(f"{where}: spatial:bbox {attrs['spatial:bbox']} disagrees with transform and shape ({bbox})")
        if south is not None:
            lo, hi = (0.0, conv.SOUTH_FALSE_NORTHING) if south else (-conv.SOUTH_FALSE_NORTHING, 9_400_000.0)
            if bbox[1] < lo - 1e-6 or bbox[3] > hi + 1e-6:
                probs.append(f"{where}: northings {bbox[1]}..{bbox[3]} are impossible for "
                             f"{'southern' if south else 'northern'} {attrs['proj:code']}")
    nb = attrs.get("tessera:n_bands")
    arrays = dict(zone.arrays())
    for aname in conv.REQUIRED_ZONE_ARRAYS:
        if aname not in arrays:
            probs.append(f"{where}/{aname}: required array is missing")
    has_rgb = attrs.get("tessera:has_rgb_preview", False)
    if has_rgb and "rgb" not in arrays:
        probs.append(f"{where}: tessera:has_rgb_preview is true but there is no rgb array")
    if "rgb" in arrays and not has_rgb:
        probs.append(f"{where}: rgb array present but tessera:has_rgb_preview is not true")
    expected_shapes = {"embeddings": (h, w, nb), "scales": (h, w), "rgb": (h, w, 4),
                       "easting": (w,), "northing": (h,), "band": (nb,)}
    for aname, spec in conv.ZONE_ARRAYS.items():
        if aname not in arrays:
            continue
        a = arrays[aname]
        aw = f"{where}/{aname}"
        if str(a.dtype) != spec["dtype"]:
            probs.append(f"{aw}: dtype {a.dtype}, expected {spec['dtype']}")
        if not _fill_ok(a.fill_value if spec["fill"] is not None else None, spec["fill"]):
            fv = a.fill_value.item() if hasattr(a.fill_value, "item") else a.fill_value
            probs.append(f"{aw}: fill_value {fv!r}, expected {spec['fill']!r}")
        dims = list(a.metadata.dimension_names or [])
        if dims != spec["dims"]:
            probs.append(f"{aw}: dimension_names {dims}, expected {spec['dims']}")
        exp = expected_shapes[aname]
        if None not in exp and tuple(a.shape) != exp:
            probs.append(f"{aw}: shape {tuple(a.shape)}, expected {exp}")
        sharded = a.shards is not None
        if spec["sharded"]:
            if not sharded:
                probs.append(f"{aw}: must be sharded")
            else:
                sh, ch = a.shards, a.chunks
                if h is not None and (h % sh[0] or w % sh[1]):
                    probs.append(f"{aw}: grid {h}x{w} is not snapped to the {sh[0]}x{sh[1]} shard size")
                if len(sh) == 3 and sh[2] != a.shape[2]:
                    probs.append(f"{aw}: shards must hold the whole last dimension ({a.shape[2]}), got {sh[2]}")
                if any(s % c for s, c in zip(sh, ch)):
                    probs.append(f"{aw}: inner chunks {ch} do not divide shards {sh}")
        else:
            if sharded:
                probs.append(f"{aw}: coordinate arrays must not be sharded")
            if any(n in ("BloscCodec", "ZstdCodec", "GzipCodec") for n in _codec_names(a)) or a.compressors:
                probs.append(f"{aw}: coordinate arrays must be uncompressed")
    if nb is not None and "embeddings" in arrays and arrays["embeddings"].shape[-1] != nb:
        probs.append(f"{where}: tessera:n_bands={nb} but embeddings has {arrays['embeddings'].shape[-1]} bands")
    if "band" in arrays and nb is not None:
        band = _values(arrays["band"], f"{where}/band", probs)
        if band is not None and (len(band) != nb or not np.array_equal(band, np.arange(len(band)))):
            probs.append(f"{where}/band: must be [0, 1, ..., {nb - 1}]")
    if h is not None:
        if "easting" in arrays and arrays["easting"].shape == (w,):
            v = _values(arrays["easting"], f"{where}/easting", probs)
            if v is not None and not np.allclose(v, conv.easting_coords(transform[2], w), rtol=0, atol=1e-6):
                probs.append(f"{where}/easting: values are not origin + (i + 0.5) * 10 for spatial:transform")
        if "northing" in arrays and arrays["northing"].shape == (h,):
            v = _values(arrays["northing"], f"{where}/northing", probs)
            if v is not None and not np.allclose(v, conv.northing_coords(transform[5], h), rtol=0, atol=1e-6):
                probs.append(f"{where}/northing: values are not origin - (j + 0.5) * 10 (descending)")
    return probs


def _check_global(g: zarr.Group) -> list[str]:
    where = conv.GLOBAL_GROUP
    attrs = dict(g.attrs)
    probs = _schema_problems(attrs, conv.GLOBAL_SCHEMA, where) + _registration_problems(attrs, conv.GLOBAL_CONVENTIONS, where)
    layout = attrs.get("multiscales", {}).get("layout", [])
    prev = None
    for k, item in enumerate(layout if isinstance(layout, list) else []):
        asset = item.get("asset")
        aw = f"{where}/{asset}"
        if k and item.get("derived_from") != layout[k - 1].get("asset"):
            probs.append(f"{aw}: derived_from {item.get('derived_from')!r}, expected {layout[k - 1].get('asset')!r}")
        try:
            arr = g[f"{asset}/rgb"]
        except KeyError:
            probs.append(f"{aw}/rgb: level array is missing")
            continue
        if str(arr.dtype) != "uint8" or arr.ndim != 3 or arr.shape[2] != 4:
            probs.append(f"{aw}/rgb: must be uint8 (H, W, 4), got {arr.dtype} {arr.shape}")
        if list(arr.shape[:2]) != item.get("spatial:shape"):
            probs.append(f"{aw}/rgb: shape {arr.shape[:2]} differs from spatial:shape {item.get('spatial:shape')}")
        t = item.get("spatial:transform") or [0] * 6
        if prev is not None and not math.isclose(t[0], 2 * prev[0]):
            probs.append(f"{aw}: resolution {t[0]} is not twice level {k - 1}'s {prev[0]}")
        if prev is not None and item.get("transform", {}).get("scale") != [2.0, 2.0]:
            probs.append(f"{aw}: transform.scale must be [2.0, 2.0]")
        if t[2] != -180.0 or t[5] != 90.0:
            probs.append(f"{aw}: spatial:transform must start at (-180, 90)")
        shape = item.get("spatial:shape") or [0, 0]
        if not math.isclose(shape[1] * t[0], 360.0, rel_tol=0, abs_tol=t[0] + 1e-9):
            probs.append(f"{aw}: spatial:shape {shape} x resolution {t[0]} does not span 360 degrees")
        prev = t
    return probs


def _check_consolidated(root: zarr.Group) -> list[str]:
    """Consolidated metadata, when present, must equal what every node's own zarr.json says."""
    import json
    store = root.store
    try:
        raw = zarr.core.sync.sync(store.get("zarr.json", zarr.core.buffer.default_buffer_prototype()))
        doc = json.loads(raw.to_bytes())
    except Exception:
        return []
    cons = (doc.get("consolidated_metadata") or {}).get("metadata")
    if not cons:
        return []
    probs = []
    for key, meta in sorted(cons.items()):
        raw = zarr.core.sync.sync(store.get(f"{key}/zarr.json", zarr.core.buffer.default_buffer_prototype()))
        if raw is None:
            probs.append(f"root: consolidated metadata lists {key}, which does not exist")
            continue
        own = json.loads(raw.to_bytes())
        own.pop("consolidated_metadata", None)
        meta = dict(meta)
        meta.pop("consolidated_metadata", None)
        if own != meta:
            probs.append(f"root: consolidated metadata for {key} is stale (differs from {key}/zarr.json)")
    return probs


def validate(url: str, storage_options: dict | None = None) -> list[str]:
    """Every violation of the convention found in the store at `url` (empty list: valid)."""
    try:
        root = zarr.open_group(url, mode="r", storage_options=storage_options, use_consolidated=False)
    except Exception as e:  # zarr raises several types for a missing or foreign store
        return [f"{url}: cannot open as a Zarr group ({type(e).__name__}: {e})"]
    if root.metadata.zarr_format != 3:
        return [f"{url}: Zarr format {root.metadata.zarr_format}, the convention requires 3"]
    attrs = dict(root.attrs)
    probs = _schema_problems(attrs, conv.ROOT_SCHEMA, "root") + _registration_problems(attrs, conv.ROOT_CONVENTIONS, "root")
    probs += _check_consolidated(root)
    zones = 0
    for name, child in sorted(root.groups()):
        if conv.parse_zone_group_name(name) is not None:
            zones += 1
            probs += _check_zone(child, name, attrs)
        elif name == conv.GLOBAL_GROUP:
            probs += _check_global(child)
        elif name.startswith("utm"):
            probs.append(f"{name}: zone groups must be named utm01..utm60")
    if zones == 0:
        probs.append("root: no zone group (utmNN)")
    return probs
