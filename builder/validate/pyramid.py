"""The global_rgb group: its multiscales levels, their geometry and their records of the chunks that exist."""
from __future__ import annotations

import math

from builder.core import convention as conv
from builder.validate.documents import LEVELS_MAX, MISSING, Reader, plain_key
from builder.validate.nodes import node_attrs, open_array, registration_problems, schema_problems
from builder.validate.records import chunk_record


def _num(x) -> bool:
    return isinstance(x, (int, float)) and not isinstance(x, bool)


def check_global(reader: Reader, doc: dict) -> list[str]:
    where = conv.GLOBAL_GROUP
    probs: list[str] = []
    attrs = node_attrs(doc, where, probs)
    probs += schema_problems(attrs, conv.GLOBAL_SCHEMA, where) + registration_problems(attrs, conv.GLOBAL_CONVENTIONS, where)
    ms = attrs.get("multiscales")
    layout = ms.get("layout", []) if isinstance(ms, dict) else []
    layout = layout if isinstance(layout, list) else []
    if len(layout) > LEVELS_MAX:
        probs.append(f"{where}: multiscales lists {len(layout)} levels; the validator checks the first {LEVELS_MAX}")
    prev = None
    for k, item in enumerate(layout[:LEVELS_MAX]):
        if not isinstance(item, dict):
            continue  # reported by the schema
        asset = item.get("asset")
        aw = f"{where}/{asset}"
        if not plain_key(asset):
            probs.append(f"{where}: multiscales asset {asset!r} is not a relative path inside the group (not followed)")
            continue
        if k and isinstance(layout[k - 1], dict) and item.get("derived_from") != layout[k - 1].get("asset"):
            probs.append(f"{aw}: derived_from {item.get('derived_from')!r}, expected {layout[k - 1].get('asset')!r}")
        arr = open_array(reader, f"{aw}/rgb", probs)
        if arr is MISSING:
            probs.append(f"{aw}/rgb: level array is missing")
            continue
        if arr is not None:
            if str(arr.dtype) != "uint8" or len(arr.shape) != 3 or arr.shape[2] != 4:
                probs.append(f"{aw}/rgb: must be uint8 (H, W, 4), got {arr.dtype} {arr.shape}")
            if list(arr.shape[:2]) != item.get("spatial:shape"):
                probs.append(f"{aw}/rgb: shape {arr.shape[:2]} differs from spatial:shape {item.get('spatial:shape')}")
            chunk_record(arr, probs)
        t = item.get("spatial:transform")
        if not (isinstance(t, list) and len(t) == 6 and all(_num(x) for x in t)):
            prev = None
            continue  # reported by the schema
        if prev is not None and not math.isclose(t[0], 2 * prev[0]):
            probs.append(f"{aw}: resolution {t[0]} is not twice level {k - 1}'s {prev[0]}")
        tr = item.get("transform")
        if prev is not None and (tr.get("scale") if isinstance(tr, dict) else None) != [2.0, 2.0]:
            probs.append(f"{aw}: transform.scale must be [2.0, 2.0]")
        if t[2] != -180.0 or t[5] != 90.0:
            probs.append(f"{aw}: spatial:transform must start at (-180, 90)")
        shape = item.get("spatial:shape")
        if isinstance(shape, list) and len(shape) == 2 and all(_num(x) for x in shape):
            if not math.isclose(shape[1] * t[0], 360.0, rel_tol=0, abs_tol=abs(t[0]) + 1e-9):
                probs.append(f"{aw}: spatial:shape {shape} x resolution {t[0]} does not span 360 degrees")
        prev = t
    return probs
