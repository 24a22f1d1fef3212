"""A class map scored against the ground truth: accuracy, per-class precision, recall and F1, and the confusion
matrix over every pixel of the map's windows where both the map and the truth have a class.

The truth is a ground-truth store (builder/truth.py: a `classes` uint8 array per zone on the year store's 10 m
grid, 255 where there is none, its class names in the root's "ground_truth" attribute) that a catalog entry names
("truth"); only the demo's stores have one.  It is read through the same Source as the stores (the zarrita bridge
in the browser), window by window of the map, whole shards at a time.  A map at an overview level (pixels of
10 x 2^k m) is scored against the most frequent truth class of each of its pixels' 2^k x 2^k truth pixels, for a
window of at most READ_MAX truth pixels; a larger window is one line ("zoom in").

The map's classes are matched to the truth's by name (trimmed, case-insensitive).  Map classes of one name are
scored as one class, under the first of them, and listed as merged; a truth store naming two classes alike is
refused.  A map class without a match, or a truth class without one, is listed as unmatched, and the pixels either
falls on are counted apart, never scored.
Anything wrong with the truth store (absent, refused, of another grid) is one line, in the block's "error".
"""
from __future__ import annotations

import numpy as np

from builder.core.source import REGION, SourceError
from builder.core.truthclasses import KEY, NO_DATA, TruthError, check_classes, key

# truth pixels (bytes) read for one zone window of the map: a larger window is refused ("zoom in"), as a map at level 3
# or coarser's is unless the view holds little of its zone (a 768 px window is 6144^2 truth pixels there).  A strided
# sample would fetch and decode no less: each truth shard is one chunk, and any stride under 256 px touches them all.
READ_MAX = 32 * 2**20


def truth_classes(meta: dict, where: str) -> dict[int, str]:
    """{class value: name} of a truth store's root metadata (its "ground_truth" attribute), checked
    (builder/core/truthclasses.py, the rule the builder writes by)."""
    gt = (meta.get("attributes") or {}).get(KEY) if isinstance(meta, dict) else None
    return check_classes(gt.get("classes") if isinstance(gt, dict) else None, where)


def mode_blocks(t: np.ndarray, f: int) -> np.ndarray:
    """The most frequent class (not NO_DATA; the lowest on a tie) of each f x f block of `t`; NO_DATA where none."""
    if f == 1:
        return t
    h, w = t.shape[0] // f, t.shape[1] // f
    blocks = t.reshape(h, f, w, f).transpose(0, 2, 1, 3).reshape(h, w, f * f)
    present = np.unique(t[t != NO_DATA])
    if not len(present):
        return np.full((h, w), NO_DATA, np.uint8)
    counts = np.stack([(blocks == c).sum(-1) for c in present])
    return np.where(counts.max(0) > 0, present[counts.argmax(0)], NO_DATA).astype(np.uint8)


async def node(source, meta: dict, path: str):
    """The metadata of the node at `path`: from the root's consolidated metadata, else read."""
    inline = (meta.get("consolidated_metadata") or {}).get("metadata") if isinstance(meta, dict) else None
    got = inline.get(path) if isinstance(inline, dict) else None
    return got if isinstance(got, dict) else await source.node(path)


async def read_window(source, meta: dict, part, where: str) -> np.ndarray:
    """The truth (uint8, NO_DATA where none) under one zone window of a map (a region.Layer part), on its grid;
    `meta`: the truth store's root metadata."""
    from builder.core.grid import ZoneGrid
    zone = await node(source, meta, part.zone.name)
    attrs = zone.get("attributes") if isinstance(zone, dict) else None
    if not isinstance(attrs, dict):
        raise TruthError(f"{where}: no zone {part.zone.name}")
    try:
        grid = ZoneGrid.from_attrs(attrs, 1)
    except (KeyError, TypeError, ValueError) as e:
        raise TruthError(f"{where}: zone {part.zone.name}: {str(e)[:200]}") from None
    if (grid.zone, grid.south, grid.pixel) != (part.zone.zone, part.zone.south, 10.0):
        raise TruthError(f"{where}: zone {part.zone.name} is not on the store's 10 m grid")
    arr = await node(source, meta, f"{part.zone.name}/classes")
    if not isinstance(arr, dict) or arr.get("data_type") != "uint8" or arr.get("shape") != [grid.height, grid.width]:
        raise TruthError(f"{where}: {part.zone.name}/classes is not a uint8 array of the zone's shape")
    r0, r1, c0, c1 = part.window
    f = int(round(part.zone.pixel / 10.0))
    e, n = part.zone.grid.corner(r0, c0)
    R, C = (grid.origin_n - n) / 10.0, (e - grid.origin_e) / 10.0
    if abs(R - round(R)) > 1e-6 or abs(C - round(C)) > 1e-6 or f < 1 or abs(f * 10.0 - part.zone.pixel) > 1e-6:
        raise TruthError(f"{where}: zone {part.zone.name} is not on the store's lattice")
    R, C = int(round(R)), int(round(C))
    h, w = (r1 - r0) * f, (c1 - c0) * f
    if h * w > READ_MAX:
        raise TruthError(f"the map's window ({h} x {w} truth pixels) is more than the {READ_MAX // 2**20} Mpx scored;"
                         " zoom in")
    out = np.full((h, w), NO_DATA, np.uint8)
    a0, a1, b0, b1 = max(R, 0), min(R + h, grid.height), max(C, 0), min(C + w, grid.width)
    if a1 > a0 and b1 > b0:
        got = await source.read(f"{part.zone.name}/classes", ((a0, a1), (b0, b1)), REGION)
        out[a0 - R:a1 - R, b0 - C:b1 - C] = got
    return mode_blocks(out, f)


def score(pred: np.ndarray, truth: np.ndarray, names: list[str], classes: dict[int, str]) -> dict:
    """The map's class indices `pred` (into `names`; NaN or negative: none) against `truth` (class values of
    `classes`, of distinct keys as truth_classes() gives them; NO_DATA: none), pixel by pixel (any shapes, the same
    size).  Map classes of one key are scored as the first of them."""
    from sklearn.metrics import confusion_matrix, precision_recall_fscore_support
    by_name = {key(n): v for v, n in classes.items()}
    first: dict[str, int] = {}
    same = np.array([first.setdefault(key(n), i) for i, n in enumerate(names)] + [-1], np.int64)  # [-1]: no class
    to_truth = np.array([by_name.get(key(n), -1) if same[i] == i else -1 for i, n in enumerate(names)] + [-1],
                        np.int64)
    matched = [i for i, v in enumerate(to_truth[:-1]) if v >= 0]
    p = np.asarray(pred, np.float64).ravel()
    p = same[np.where(np.isfinite(p) & (p >= 0) & (p < len(names)), np.nan_to_num(p, nan=-1), -1).astype(np.int64)]
    t = np.asarray(truth).ravel().astype(np.int64)
    both = (p >= 0) & (t != NO_DATA)
    truth_to_map = np.full(256, -1, np.int64)
    for i in matched:
        truth_to_map[to_truth[i]] = i
    yt, yp = truth_to_map[t[both]], p[both]
    scored = (yt >= 0) & (to_truth[yp] >= 0)
    yt, yp = yt[scored], yp[scored]
    unmatched = {"map": [n for i, n in enumerate(names) if same[i] == i and to_truth[i] < 0],
                 "truth": [n for v, n in sorted(classes.items()) if key(n) not in first],
                 "pixels": int(both.sum() - scored.sum())}
    merged = [[n for j, n in enumerate(names) if same[j] == i] for i in first.values() if (same == i).sum() > 1]
    out = {"unmatched": unmatched, **({"merged": merged} if merged else {})}
    if not len(yt):
        return {"pixels": 0, **out, "error": "no pixel where both the map and the ground truth have a matched class"}
    pr, rc, f1, sup = precision_recall_fscore_support(yt, yp, labels=matched, zero_division=0)
    return {"pixels": int(len(yt)), "accuracy": float((yt == yp).mean()),
            "classes": [{"name": names[i], "precision": float(a), "recall": float(b), "f1": float(c),
                         "support": int(d)} for i, a, b, c, d in zip(matched, pr, rc, f1, sup)],
            "confusion": confusion_matrix(yt, yp, labels=matched).tolist(), **out}


async def against(source, where: str, layer, names: list[str], year: int) -> dict:
    """The ground_truth block of a class map `layer` (a region.Layer of class indices) of `year`: score()'s
    document with the year and the truth's URL, or {"year", "store", "error": one line}."""
    base = {"year": int(year), "store": where}
    try:
        meta = await source.meta()
        classes = truth_classes(meta, where)
        truth = [await read_window(source, meta, p, where) for p in layer.all]
    except (SourceError, TruthError) as e:
        return dict(base, error=str(e).splitlines()[0][:300] if str(e) else "ground truth not read")
    pred = np.concatenate([p.values.ravel() for p in layer.all])
    return dict(base, **score(pred, np.concatenate([t.ravel() for t in truth]), names, classes))
