"""A zone group (utmNN) of a year store or of a multi-year index: attributes, arrays, coordinates."""
from __future__ import annotations

import math
from typing import Any

import numpy as np

from builder.core import convention as conv
from builder.core import extensions as ext
from builder.core.grid import finite_number
from builder.validate.documents import MISSING, Reader
from builder.validate.nodes import Array, coord_values, node_attrs, open_array, registration_problems, schema_problems
from builder.validate.records import chunk_record
from builder.validate.stack import stack_problems

SHAPE_MAX = 2**53  # pixels per side of a zone grid whose bounds are computed (exact as floats)


def _fill_ok(actual: Any, expected: Any) -> bool:
    if expected is None:
        return True
    if isinstance(expected, float) and math.isnan(expected):
        return actual is not None and isinstance(actual, (float, np.floating)) and math.isnan(actual)
    return actual == expected


def _close(values: np.ndarray, expected_fn) -> bool:
    """np.allclose(values, expected) in blocks, so that memory stays at the two arrays themselves."""
    expected = expected_fn()
    step = 2**20
    return all(np.allclose(values[i:i + step], expected[i:i + step], rtol=0, atol=1e-6)
               for i in range(0, len(values), step))


def check_zone(reader: Reader, doc: dict, name: str, root_attrs: dict, stack: bool = False) -> list[str]:
    """A zone group of a year store, or (stack=True) of a multi-year index: there the sharded arrays have a
    leading year dimension (ext.STACK_ARRAYS) and tessera-stack:years stands for tessera:year."""
    where = name
    probs: list[str] = []
    attrs = node_attrs(doc, where, probs)
    schema, convs, specs = ((ext.STACK_ZONE_SCHEMA, ext.STACK_ZONE_CONVENTIONS, ext.STACK_ARRAYS) if stack
                            else (conv.ZONE_SCHEMA, conv.ZONE_CONVENTIONS, conv.ZONE_ARRAYS))
    probs += schema_problems(attrs, schema, where) + registration_problems(attrs, convs, where)
    if stack:
        probs += stack_problems(attrs, where)
    zone_num = conv.parse_zone_group_name(name)
    if attrs.get("tessera:utm_zone") != zone_num:
        probs.append(f"{where}: tessera:utm_zone={attrs.get('tessera:utm_zone')!r} does not match the group name")
    year_key = ext.STACK_YEARS if stack else "tessera:year"
    if attrs.get(year_key) != root_attrs.get(year_key):
        probs.append(f"{where}: {year_key}={attrs.get(year_key)!r} differs from the root's "
                     f"{root_attrs.get(year_key)!r}")
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
    if isinstance(transform, list) and not all(finite_number(x) for x in transform) \
            and all(isinstance(x, (int, float)) and not isinstance(x, bool) for x in transform):  # others: the schema's
        probs.append(f"{where}: spatial:transform {str(transform)[:200]} holds a number that is not finite "
                     "(NaN, Infinity or beyond a float)")
    if isinstance(shape, list) and any(type(x) is int and x > SHAPE_MAX for x in shape):
        probs.append(f"{where}: spatial:shape {str(shape)[:200]} is beyond {SHAPE_MAX} pixels (not checked)")
    if (isinstance(shape, list) and len(shape) == 2 and all(type(x) is int and 0 <= x <= SHAPE_MAX for x in shape)
            and isinstance(transform, list) and len(transform) == 6 and all(finite_number(x) for x in transform)):
        h, w = shape
        p = conv.PIXEL_SIZE
        if transform[0] != p or transform[4] != -p or transform[1] != 0 or transform[3] != 0:
            probs.append(f"{where}: spatial:transform {transform} is not a north-up {p} m grid")
        e0, n0 = transform[2], transform[5]
        bbox = [e0, n0 - h * p, e0 + w * p, n0]
        have = attrs.get("spatial:bbox")
        if have is not None and not (isinstance(have, list) and len(have) == 4
                                     and all(isinstance(x, (int, float)) for x in have) and np.allclose(have, bbox)):
            probs.append(f"{where}: spatial:bbox {have} disagrees with transform and shape ({bbox})")
        if south is not None:
            lo, hi = (0.0, conv.SOUTH_FALSE_NORTHING) if south else (-conv.SOUTH_FALSE_NORTHING, 9_400_000.0)
            if bbox[1] < lo - 1e-6 or bbox[3] > hi + 1e-6:
                probs.append(f"{where}: northings {bbox[1]}..{bbox[3]} are impossible for "
                             f"{'southern' if south else 'northern'} {attrs['proj:code']}")
    nb = attrs.get("tessera:n_bands")
    if type(nb) is not int:
        nb = None
    arrays: dict[str, Array] = {}
    unreadable = set()
    for aname in specs:
        a = open_array(reader, f"{where}/{aname}", probs)
        if a is None:
            unreadable.add(aname)
        elif a is not MISSING:
            arrays[aname] = a
    for aname in [k for k, v in specs.items() if not v.get("optional")]:
        if aname not in arrays and aname not in unreadable:
            probs.append(f"{where}/{aname}: required array is missing")
    has_rgb = attrs.get("tessera:has_rgb_preview", False)
    if has_rgb and "rgb" not in arrays and "rgb" not in unreadable:
        probs.append(f"{where}: tessera:has_rgb_preview is true but there is no rgb array")
    if "rgb" in arrays and not has_rgb:
        probs.append(f"{where}: rgb array present but tessera:has_rgb_preview is not true")
    years = root_attrs.get(ext.STACK_YEARS) if stack else None
    lead = (len(years),) if isinstance(years, list) else (None,) if stack else ()
    expected_shapes = {"embeddings": (*lead, h, w, nb), "scales": (*lead, h, w), "rgb": (h, w, 4),
                       "easting": (w,), "northing": (h,), "band": (nb,), ext.STACK_DIM: lead}
    for aname, spec in specs.items():
        if aname not in arrays:
            continue
        a = arrays[aname]
        aw = a.path
        if str(a.dtype) != spec["dtype"]:
            probs.append(f"{aw}: dtype {a.dtype}, expected {spec['dtype']}")
        if not _fill_ok(a.fill_value if spec["fill"] is not None else None, spec["fill"]):
            fv = a.fill_value.item() if hasattr(a.fill_value, "item") else a.fill_value
            probs.append(f"{aw}: fill_value {fv!r}, expected {spec['fill']!r}")
        if a.dims != spec["dims"]:
            probs.append(f"{aw}: dimension_names {a.dims}, expected {spec['dims']}")
        exp = expected_shapes[aname]
        if None not in exp and a.shape != exp:
            probs.append(f"{aw}: shape {a.shape}, expected {exp}")
        if spec["sharded"]:
            if a.shards is None:
                probs.append(f"{aw}: must be sharded")
            else:
                sh, ch = a.shards[len(lead):], a.chunks[len(lead):]
                if stack and (a.shards[0], a.chunks[0]) != (1, 1):
                    probs.append(f"{aw}: shards and inner chunks must hold one year, got {a.shards} / {a.chunks}")
                if h is not None and (h % sh[0] or w % sh[1]):
                    probs.append(f"{aw}: grid {h}x{w} is not snapped to the {sh[0]}x{sh[1]} shard size")
                if len(sh) == 3 and len(a.shape) == 3 + len(lead) and sh[2] != a.shape[-1]:
                    probs.append(f"{aw}: shards must hold the whole last dimension ({a.shape[-1]}), got {sh[2]}")
                if any(s % c for s, c in zip(sh, ch)):
                    probs.append(f"{aw}: inner chunks {ch} do not divide shards {sh}")
                if not stack:
                    chunk_record(a, probs)  # the shards that exist, when recorded (builder/core/chunkruns.py)
        else:
            if a.shards is not None:
                probs.append(f"{aw}: coordinate arrays must not be sharded")
            if any(n not in ("bytes",) for n in a.codec_names):
                probs.append(f"{aw}: coordinate arrays must be uncompressed")
    if stack and ext.STACK_DIM in arrays and isinstance(years, list):
        v = coord_values(reader, arrays[ext.STACK_DIM], probs)
        if v is not None and list(v) != years:
            probs.append(f"{where}/{ext.STACK_DIM}: values {list(map(int, v))} are not the root's "
                         f"{ext.STACK_YEARS} {years}")
    if nb is not None and "embeddings" in arrays and arrays["embeddings"].shape[-1] != nb:
        probs.append(f"{where}: tessera:n_bands={nb} but embeddings has {arrays['embeddings'].shape[-1]} bands")
    if "band" in arrays and nb is not None:
        band = coord_values(reader, arrays["band"], probs)
        if band is not None and (len(band) != nb or not np.array_equal(band, np.arange(len(band)))):
            probs.append(f"{where}/band: must be [0, 1, ..., {nb - 1}]")
    if h is not None:
        if "easting" in arrays and arrays["easting"].shape == (w,):
            v = coord_values(reader, arrays["easting"], probs)
            if v is not None and not _close(v, lambda: conv.easting_coords(transform[2], w)):
                probs.append(f"{where}/easting: values are not origin + (i + 0.5) * 10 for spatial:transform")
        if "northing" in arrays and arrays["northing"].shape == (h,):
            v = coord_values(reader, arrays["northing"], probs)
            if v is not None and not _close(v, lambda: conv.northing_coords(transform[5], h)):
                probs.append(f"{where}/northing: values are not origin - (j + 0.5) * 10 (descending)")
    if not stack:
        from builder.validate.overviews import check_overviews, declared
        if declared(attrs):
            emb = arrays.get("embeddings")
            probs += check_overviews(reader, name, attrs, emb.shards[0] if emb is not None and emb.shards else None)
    return probs
