"""Accuracy of the explorer's tools on the realistic demo: each tool's quick answer (an overview level's compact
code) and its exact answer (the same level's full vectors), against the same computation on the full vectors and
against the ground truth.

    flock /tmp/heavy.lock python benchmarks/accuracy.py [--work DIR] [--labels 10,30,100] [--queries 10]

Data: the demo's dense site (three whole 0.1 degree tiles inland in Sussex, either side of the meridian), 2023 and
2024, written by builder.demo and built by the real CLI (`--work DIR` keeps and reuses them).  The tools run as the
explorer runs them (app/session.py Explorer on CPython, reading the stores' files), on views that a screen of data
fills:
    10 m          800 x 500 screen pixels at 10 m per pixel, in utm30 (level 0)
    two zones     1600 x 1000 at 10 m, centred on the Greenwich meridian (utm30 and utm31, level 0)
    40 m          400 x 250 at 40 m (level 2)
    160 m         100 x 62 at 160 m (level 4)
For each view, the quick (the level's compact code, whatever the read budget) and the exact representation (the
level's full vectors):
    similarity   recall of the 1 % most similar pixels (numpy cosine on the full vectors of the view's level) among
                 the tool's 1 %, for --queries pixels of the view
    classify     k-NN (5), logistic regression, random forest (100 trees, seed 0), trained on N labels of each class
                 drawn with a fixed seed from the ground truth in the view (10 m pixels): class-map agreement with the
                 same classifier's map from the full vectors, and (10 m views) accuracy against the ground truth
    k-means      k = 8, seed 0: the inertia of the tool's clusters on the full vectors, over scikit-learn's KMeans on
                 the full vectors (1.000 = as good)
    change       2023 -> 2024 at the tool's default threshold and others (10 m views): share of the parcels that
                 truly changed class found (half their pixels or more above the threshold), and of the unchanged ones
                 flagged
Each view's regions are read once per representation and reused by every tool run on it (the tools would read the
same bytes again; zarr-python's per-chunk decoding of a 1600 x 1000 view takes tens of seconds).
"""
from __future__ import annotations

import argparse
import asyncio
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "tests"))
sys.path.insert(0, str(REPO))

from app import geo  # noqa: E402
from app import budgets  # noqa: E402
from app import session  # noqa: E402
from builder import demo  # noqa: E402
from builder.synth.landscape import CLASSES  # noqa: E402

VIEWS = [("10 m", 800, 500, 10, (-0.10, 50.95)), ("two zones", 1600, 1000, 10, (0.0, 50.95)),
         ("40 m", 400, 250, 40, (-0.05, 50.95)), ("160 m", 100, 62, 160, (-0.05, 50.95))]
METHODS = ["k-NN", "logistic regression", "random forest"]


def build(work: Path) -> Path:
    out = work / "stores"
    if (out / "catalog.json").exists():
        return out
    t0 = time.perf_counter()
    demo.write_demo_tiles(work / "tiles", years=(2023, 2024), places=[], dense=True)
    subprocess.run([sys.executable, "-m", "builder", "build", str(work / "tiles"), "--year", "2023", "--year", "2024",
                    "--out", str(out), "--model-version", demo.MODEL_VERSION, "-q"], cwd=REPO, check=True)
    print(f"dense site written and built in {time.perf_counter() - t0:.0f} s")
    return out


def pixels_lonlat(part) -> tuple[np.ndarray, np.ndarray]:
    """lon/lat of the centres of a region part's valid pixels (its level's grid), row-major."""
    r0, r1, c0, c1 = part.window
    rows, cols = np.nonzero(part.valid)
    e, n = part.zone.grid.centre(rows + r0, cols + c0)
    lon, lat = geo.utm_to_lonlat(np.asarray(e), np.asarray(n), part.zone.zone, part.zone.south)
    return np.asarray(lon), np.asarray(lat)


def top(values: np.ndarray, share: float = 0.01) -> set:
    k = max(1, int(len(values) * share))
    return set(np.argpartition(-values, k)[:k])


async def view(state, w, h, metres, lonlat):
    session.MAP_W, session.MAP_H = w, h
    state.centre_view(*lonlat, w * metres)
    await state.settle()


async def regions(state):
    """The view's compact-code and full-vector regions, each read once (later tool runs on this view get them from
    memory), and what the explorer reads there by default (the code, or the full vectors when they fit its read
    budget)."""
    from app.tools import region as reg
    state.exact = False  # as a user finds the view (the last view's exact read left it on)
    default = "full vectors" if all(p[3] == "vectors" for p in reg.tool_plans(state)) else "the compact code"
    budget, budgets.REGION_BYTES = budgets.REGION_BYTES, 0  # the code, whatever the budget says
    try:
        state.exact = False
        out = {False: await _read_tool(state)}
    finally:
        budgets.REGION_BYTES = budget
    state.exact = True
    out[True] = await _read_tool(state)
    reg.read_tool = lambda app: _remembered(out[bool(app.exact)])
    return out, default


async def _remembered(region):
    return region


def agreement(a, b) -> float:
    va, vb = a.values_all(), b.values_all()
    ok = np.isfinite(va) & np.isfinite(vb)
    return float((va[ok] == vb[ok]).mean())


async def measure(state, world, name, w, h, metres, lonlat, n_labels, queries):
    from sklearn.cluster import KMeans
    await view(state, w, h, metres, lonlat)
    reg, default = await regions(state)
    quick, exact = reg[False], reg[True]
    level = exact.primary.zone.level
    full = exact.pixels().astype(np.float64)
    print(f"\n{name}: {w} x {h} at {metres} m, level {level}, {len(exact.parts)} zone(s), {len(full):,} valid pixels; "
          f"quick: the {quick.primary.coords.shape[-1]}-d code; the explorer reads {default} here by default")
    rng = np.random.default_rng(0)
    # similarity: the tool's own cosines (Region.cosines), quick against exact, to full 10 m targets
    recalls = []
    lon0, lat0 = zip(*[pixels_lonlat(p) for p in exact.parts])
    lons, lats = np.concatenate(lon0), np.concatenate(lat0)
    for i in rng.choice(len(full), queries, replace=False):
        px = await state.model.pixel_at(float(lons[i]), float(lats[i]))
        if px is None or not px.valid:
            continue
        want = np.concatenate([p.cosines(px.vector)[p.valid] for p in exact.parts])
        got = np.concatenate([p.cosines(px.vector)[p.valid] for p in quick.parts])
        recalls.append(len(top(want) & top(got)) / len(top(want)))
    print(f"  similarity  recall of the top 1 %: quick {np.mean(recalls):.3f}, exact 1.000 (by definition)")
    # classification from labels drawn from the ground truth at 10 m pixels of the view
    truth = world.classes(lons, lats, 2024) if level == 0 else None
    cls10 = world.classes(lons, lats, 2024)
    for n in n_labels:
        pts = []
        for c in range(len(CLASSES)):
            idx = np.flatnonzero(cls10 == c)
            for i in rng.choice(idx, min(n, len(idx)), replace=False) if len(idx) >= 3 else []:
                pts.append((CLASSES[c], 2024, float(lons[i]), float(lats[i])))
        await state.tools.labels.load([(c, None) for c in CLASSES], pts)
        line = []
        for method in METHODS:
            maps = {}
            for ex in (False, True):
                state.exact = ex
                maps[ex] = await state.tools.classify.classify(method, seed=0)
            names = state.tools.classify.names
            text = f"{method}: agree {agreement(maps[False], maps[True]):.3f}"
            if truth is not None:
                acc = {}
                for ex, layer in maps.items():
                    pred = np.concatenate([p.values[np.isfinite(p.values)] for p in layer.all]).astype(int)
                    acc[ex] = float((np.asarray(names)[pred] == np.asarray(CLASSES)[truth]).mean())
                text += f", accuracy vs truth quick {acc[False]:.3f} exact {acc[True]:.3f}"
            line.append(text)
        print(f"  classify {n:3d} labels/class ({len(pts)}): " + "; ".join(line))
    # k-means: each result's clusters scored on the full vectors
    km_ref = KMeans(8, n_init=3, random_state=0).fit(full[rng.choice(len(full), min(len(full), 65_536), replace=False)])
    ref_inertia = float(((full - km_ref.cluster_centers_[km_ref.predict(full)]) ** 2).sum())
    ratios = {}
    for ex in (False, True):
        state.exact = ex
        layer = await state.tools.cluster.cluster(k=8, seed=0)
        lab = np.concatenate([p.values[np.isfinite(p.values)] for p in layer.all]).astype(int)
        centres = np.stack([full[lab == j].mean(0) for j in range(8)])
        ratios[ex] = float(((full - centres[lab]) ** 2).sum()) / ref_inertia
    print(f"  k-means (k=8) inertia on the full vectors over scikit-learn's: quick {ratios[False]:.3f}, "
          f"exact {ratios[True]:.3f}")
    if level == 0:
        ch = state.tools.change
        c23, c24 = world.classes(lons, lats, 2023), cls10
        parcels = world.ground(lons, lats, 2024).parcel
        changed = c23 != c24
        values = {}
        for ex in (False, True):
            state.exact = ex
            layer = await ch.compute(2023, 2024)
            values[ex] = np.concatenate([p.values[np.isfinite(p.values)] for p in layer.all])
            assert len(values[ex]) == len(parcels), "the change layer's pixels are not the view's"
        truly = np.unique(parcels[changed])
        steady = np.setdiff1d(np.unique(parcels), truly)
        order = np.argsort(parcels, kind="stable")
        starts = np.searchsorted(parcels[order], np.unique(parcels))

        def share(v, ids, t):
            """Share of parcels `ids` with half their pixels or more at or above t."""
            hits = np.add.reduceat((v[order] >= t).astype(np.int64), starts)
            sizes = np.diff(np.append(starts, len(order)))
            frac = dict(zip(np.unique(parcels).tolist(), (hits / sizes).tolist()))
            return float(np.mean([frac[p] >= 0.5 for p in ids.tolist()])) if len(ids) else float("nan")
        for t in sorted({ch.threshold, 0.05, 0.075, 0.1, 0.15}):
            print(f"  change at threshold {t:g}{' (the default)' if t == ch.threshold else ''}: of {len(truly)} "
                  f"parcels that changed class, found quick {share(values[False], truly, t):.3f} exact "
                  f"{share(values[True], truly, t):.3f}; of {len(steady)} unchanged, flagged quick "
                  f"{share(values[False], steady, t):.3f} exact {share(values[True], steady, t):.3f}")


async def main_async(a) -> None:
    global _read_tool
    from app.tools import region as reg
    from tools_util import opened
    _read_tool = reg.read_tool
    work = Path(a.work) if a.work else Path(tempfile.mkdtemp(prefix="accuracy-"))
    out = build(work)
    catalog = [{"year": y, "url": str(out / f"{y}.zarr"), "label": str(y)} for y in (2023, 2024)]
    budgets.EXACT_PIXELS = 4_000_000  # CPython holds a whole 1600 x 1000 screen's full vectors; a browser does not
    state = await opened(out / "2024.zarr", 2024, catalog=catalog)
    world = demo.World()
    for v in VIEWS:
        if a.views and v[0] not in a.views.split(","):
            continue
        await measure(state, world, *v, [int(n) for n in a.labels.split(",")], a.queries)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--work", help="keep the demo tiles and stores here (reused when present)")
    ap.add_argument("--labels", default="10,30,100", help="labels per class")
    ap.add_argument("--queries", type=int, default=10, help="similarity query pixels per view")
    ap.add_argument("--views", default="", help="only these views (comma-separated names)")
    asyncio.run(main_async(ap.parse_args()))


if __name__ == "__main__":
    main()
