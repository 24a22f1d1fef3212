"""The embedding overviews of a zone group (tessera-ovr:): attributes, arrays, and with --deep a sample of
values against the 2x2 means of the level below and the code against the projection it stands for."""
from __future__ import annotations

import numpy as np
import zarr

from builder.core import codes
from builder.core import convention as conv
from builder.core import extensions as ext
from builder.core.grid import ZoneGrid
from builder.validate.documents import MISSING, Reader
from builder.validate.nodes import Array, open_array, registration_problems, schema_problems
from builder.validate.zone import _fill_ok

SAMPLE_SHARDS = 8   # shards per level whose pixels --deep checks
SAMPLE_PIXELS = 24  # pixels per sampled shard, within WINDOW pixels of a random valid one
WINDOW = 8


def declared(attrs: dict) -> bool:
    return any(isinstance(k, str) and k.startswith(ext.OVR["name"]) for k in attrs) or \
        not conv.registered(attrs, [ext.OVR])


def _levels(attrs: dict) -> list[dict]:
    levels = attrs.get("tessera-ovr:levels")
    return [x for x in levels if isinstance(x, dict)] if isinstance(levels, list) else []


def check_overviews(reader: Reader, name: str, attrs: dict, shard: int | None) -> list[str]:
    """Problems of the zone group `name`'s overview extension (its attributes already parsed)."""
    where = f"{name}: tessera-ovr"
    probs = schema_problems(attrs, ext.OVR_SCHEMA, name) + registration_problems(attrs, [ext.OVR], name)
    if probs:
        return probs
    try:
        grid = ZoneGrid.from_attrs(attrs, shard) if shard else None
    except (KeyError, ValueError, TypeError):
        grid = None
    nb = attrs.get("tessera:n_bands")
    code = attrs["tessera-ovr:code"]
    dims, method = code["dims"], code["method"]
    if isinstance(nb, int) and not codes.kind(method).fits(dims, nb):  # only the PQ code has a rule
        probs.append(f"{where}: the PQ code's {dims} sub-spaces do not divide the {nb} bands")
    levels = _levels(attrs)
    if [x["level"] for x in levels] != list(range(len(levels))):
        probs.append(f"{where}: levels must be 0, 1, ..., got {[x['level'] for x in levels]}")
        return probs
    for key, shape in codes.kind(method).model_shapes(dims, nb).items():
        path = code[key]
        a = open_array(reader, f"{name}/{path}", probs)
        if a is MISSING:
            probs.append(f"{name}/{path}: array is missing")
        elif isinstance(a, Array) and (str(a.dtype) != "float32" or a.shape != shape):
            probs.append(f"{name}/{path}: {a.dtype} {a.shape}, expected float32 {shape}")
    for item in levels:
        k = item["level"]
        lw = f"{name}/{item['path']}"
        if item["path"] != f"{ext.OVR_GROUP}/{k}":
            probs.append(f"{where}: level {k} path {item['path']!r}, expected '{ext.OVR_GROUP}/{k}'")
            continue
        want_arrays = ext.OVR_LEVEL0_ARRAYS if k == 0 else list(ext.OVR_ARRAYS)
        if item["arrays"] != want_arrays:
            probs.append(f"{where}: level {k} arrays {item['arrays']}, expected {want_arrays}")
        if grid is not None:
            want = grid.level(k).attrs()
            if item["spatial:shape"] != want["spatial:shape"] or not np.allclose(item["spatial:transform"],
                                                                                  want["spatial:transform"]):
                probs.append(f"{where}: level {k} grid {item['spatial:shape']} {item['spatial:transform']} is not "
                             f"the level-{k} lattice grid of the zone ({want['spatial:shape']}, "
                             f"{want['spatial:transform']})")
        h, w = item["spatial:shape"]
        for aname in want_arrays:
            spec = ext.ovr_array(aname, method)
            a = open_array(reader, f"{lw}/{aname}", probs)
            if a is MISSING:
                probs.append(f"{lw}/{aname}: array is missing")
                continue
            if a is None:
                continue
            last = {"B": (nb,), "D": (dims,)}.get(spec.get("last"), ())
            if str(a.dtype) != spec["dtype"]:
                probs.append(f"{a.path}: dtype {a.dtype}, expected {spec['dtype']}")
            if not _fill_ok(a.fill_value, spec["fill"]):
                probs.append(f"{a.path}: fill_value {a.fill_value!r}, expected {spec['fill']!r}")
            if a.dims != spec["dims"]:
                probs.append(f"{a.path}: dimension_names {a.dims}, expected {spec['dims']}")
            if a.shape != (h, w, *last):
                probs.append(f"{a.path}: shape {a.shape}, expected {(h, w, *last)}")
            if a.shards is None:
                probs.append(f"{a.path}: must be sharded")
            elif any(s % c for s, c in zip(a.shards, a.chunks)) or (shard and a.shards[:2] != (shard, shard)):
                probs.append(f"{a.path}: shards {a.shards} / inner chunks {a.chunks} do not match the zone's "
                             f"{shard}-pixel shards")
    return probs


def overview_paths(reader: Reader, zone: str) -> list[str]:
    """Every sharded overview array a zone declares (for --deep's checksum pass)."""
    doc = reader.node(zone)
    attrs = doc.get("attributes", {}) if isinstance(doc, dict) else {}
    if not isinstance(attrs, dict) or schema_problems(attrs, ext.OVR_SCHEMA, zone):
        return []
    return [f"{zone}/{x['path']}/{a}" for x in _levels(attrs) if x.get("path") == f"{ext.OVR_GROUP}/{x['level']}"
            for a in x["arrays"]]


def _points(arr, rows: np.ndarray, cols: np.ndarray) -> np.ndarray:
    """arr[rows[i], cols[i]] (whole trailing dimensions), through one read of their bounding window."""
    if not len(rows):
        return np.zeros((0, *arr.shape[2:]), dtype=arr.dtype)
    r0, c0 = int(rows.min()), int(cols.min())
    return arr[r0:int(rows.max()) + 1, c0:int(cols.max()) + 1][rows - r0, cols - c0]


def _values(group, k: int, rows, cols):
    """Float vectors (NaN: no data, also outside the level's grid) of level k at integer pixel arrays;
    the zone's own arrays for k = 0."""
    g = group if k == 0 else group[f"{ext.OVR_GROUP}/{k}"]
    h, w = g["scales"].shape
    inside = (rows >= 0) & (rows < h) & (cols >= 0) & (cols < w)
    s = np.full(rows.shape, np.nan, dtype=np.float32)
    e = np.zeros(rows.shape + g["embeddings"].shape[2:], dtype=np.int8)
    if inside.any():
        s[inside] = _points(g["scales"], rows[inside], cols[inside])
        e[inside] = _points(g["embeddings"], rows[inside], cols[inside])
    return conv.dequantise(e, s), s


def deep_sample(reader: Reader, zone: str, seed: int = 0) -> list[str]:
    """Sampled pixels of every level >= 1 against the 2x2 mean of the level below (within half a
    quantisation step), and codes against the projection of their level's vectors."""
    doc = reader.node(zone)
    attrs = doc.get("attributes", {}) if isinstance(doc, dict) else {}
    if not isinstance(attrs, dict) or schema_problems(attrs, ext.OVR_SCHEMA, zone):
        return []
    probs: list[str] = []
    rng = np.random.default_rng(seed)
    try:
        group = zarr.open_group(reader.store, path=zone, mode="r", zarr_format=3, use_consolidated=False)
        ovr = group[ext.OVR_GROUP]
        method = attrs["tessera-ovr:code"]["method"]
        model = {name: ovr[name][...] for name in codes.kind(method).arrays}
        levels = _levels(attrs)
        for item in levels:
            k = item["level"]
            lg = ovr[str(k)]
            scl = lg["code_scales"]
            shard = scl.shards[0]
            h, w = scl.shape
            # lattice offsets: level-k pixel (r, c) covers level-(k-1) pixels (2r + dr .., 2c + dc ..)
            t, tb = item["spatial:transform"], (levels[k - 1] if k else item)["spatial:transform"]
            dr, dc = round((tb[5] - t[5]) / tb[0]), round((t[2] - tb[2]) / tb[0])
            files = sorted({(int(x.split("/")[-2]), int(x.split("/")[-1])) for x in _shard_keys(reader, f"{zone}/{item['path']}/code_scales")})
            for sr, sc in [files[i] for i in rng.permutation(len(files))[:SAMPLE_SHARDS]]:
                block = scl[sr * shard:(sr + 1) * shard, sc * shard:(sc + 1) * shard]
                rr, cc = np.nonzero(~np.isnan(block))
                if len(rr):  # a small window around a random valid pixel: the reads below stay small
                    i = rng.integers(len(rr))
                    near = (np.abs(rr - rr[i]) < WINDOW) & (np.abs(cc - cc[i]) < WINDOW)
                    rr, cc = rr[near], cc[near]
                pick = rng.permutation(len(rr))[:SAMPLE_PIXELS]
                rows, cols = rr[pick] + sr * shard, cc[pick] + sc * shard
                nr, nc = np.nonzero(np.isnan(block))  # and a few no-data pixels: their children must be too
                if len(rr) and len(nr):
                    near = (np.abs(nr - rr[0]) < 4 * WINDOW) & (np.abs(nc - cc[0]) < 4 * WINDOW)
                    nr, nc = nr[near], nc[near]
                pick = rng.permutation(len(nr))[:SAMPLE_PIXELS // 4]
                gone_r, gone_c = nr[pick] + sr * shard, nc[pick] + sc * shard
                v, s = _values(group, k, rows, cols)
                ok = ~np.isnan(s)
                cs = _points(scl, rows, cols)
                if not ok.all() or not ENCODES[method](model, _points(lg["code"], rows, cols)[ok], cs[ok], v[ok]):
                    probs.append(f"{zone}/{item['path']}/code: sampled codes in shard ({sr}, {sc}) do not encode "
                                 "their level's vectors")
                if k == 0:
                    continue
                gone = [_values(group, k - 1, 2 * gone_r + dr + i, 2 * gone_c + dc + j)[1]
                        for i in (0, 1) for j in (0, 1)]
                if not np.isnan(np.stack(gone)).all() or not np.isnan(_values(group, k, gone_r, gone_c)[1]).all():
                    probs.append(f"{zone}/{item['path']}: sampled no-data pixels of shard ({sr}, {sc}) have data "
                                 f"at level {k - 1} or in their own scales")
                kids = [_values(group, k - 1, 2 * rows + dr + i, 2 * cols + dc + j)
                        for i in (0, 1) for j in (0, 1)]
                stack = np.stack([kv for kv, _ in kids])
                n = (~np.isnan(stack[..., 0])).sum(axis=0)
                want = np.nansum(stack, axis=0) / np.maximum(n, 1)[:, None]
                tol = 0.51 * np.nan_to_num(s)[:, None] + 1e-4 * (1 + np.abs(want))
                if np.any(n[ok] == 0) or np.any(np.abs(v[ok] - want[ok]) > tol[ok]):
                    probs.append(f"{zone}/{item['path']}: sampled pixels of shard ({sr}, {sc}) are not the "
                                 f"2x2 means of level {k - 1}")
    except (KeyError, ValueError, IndexError, TypeError) as e:
        probs.append(f"{zone}/{ext.OVR_GROUP}: cannot check sampled values ({type(e).__name__}: {e})")
    return probs


def _pca_encodes(model: dict, code: np.ndarray, cs: np.ndarray, v: np.ndarray) -> bool:
    """Do int8 codes and scales (N, D), (N,) hold the PCA coordinates of float vectors v (N, B), to half a step?"""
    z = conv.dequantise(code.astype(np.int8), cs)
    proj = (v - model[ext.OVR_MEAN]) @ model[ext.OVR_BASIS].T
    tol = 0.51 * np.nan_to_num(cs)[:, None] + 1e-4 * (1 + np.abs(proj))
    return not np.any(np.abs(z - proj) > tol)


def _pq_encodes(model: dict, code: np.ndarray, cs: np.ndarray, v: np.ndarray) -> bool:
    """Do uint8 codes (N, M) name, in each sub-space, a centroid nearest (to 1e-4) the unit vector's sub-vector,
    and scales (N,) hold the vectors' norms?"""
    book = model[ext.OVR_CODEBOOK].astype(np.float64)
    size = np.linalg.norm(v, axis=1)
    if np.any(np.abs(cs - size) > 1e-4 * (1 + size)):
        return False
    u = v / np.where(size > 0, size, 1)[:, None]
    sub = book.shape[2]
    for j in range(book.shape[0]):
        d = ((u[:, None, j * sub:(j + 1) * sub] - book[j][None]) ** 2).sum(-1)  # (N, 256) squared distances
        if np.any(d[np.arange(len(u)), code[:, j].astype(np.intp)] > d.min(axis=1) + 1e-4):
            return False
    return True


ENCODES = {ext.OVR_PCA: _pca_encodes, ext.OVR_PQ: _pq_encodes}  # does a code hold its vectors, by method


def _shard_keys(reader: Reader, path: str) -> list[str]:
    from zarr.core.sync import sync

    async def keys():
        return sorted([k async for k in reader.store.list_prefix(f"{path}/c/")])
    return sync(keys())
