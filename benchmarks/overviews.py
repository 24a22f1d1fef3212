"""Embedding overviews (tessera-ovr:): accuracy and bytes per pixel per level, and what they cost a build.

    python benchmarks/overviews.py [--px 384] [--scheduler threads] [--dims 4,8,16] [--code pca|pq]

Same run, same demo tiles:
  * build time of the demo store with overviews (the default) and with --no-overviews (the baseline),
    each in its own child process, --no-global in both so that only the overviews differ;
  * per level: bytes per valid pixel on disk of the code + its scale (what a browser analysing a view
    fetches), of the level's full vectors + scales, and of the zone's own 10 m arrays for comparison;
  * per level, against the full vectors at the same resolution: recall of the 1% most similar pixels
    (cosine, mean over 20 query pixels), and k-means (6 classes, fitted on the full vectors) and k-NN
    (5 neighbours, trained on 500 labelled pixels) class maps' agreement;
  * with --dims: the same accuracy and code bytes for other code sizes, fitted and encoded here on the
    store's level-0 vectors (the builder's own fit, builder/codefit.py, so the figures show what --code-dims
    would give);
  * --code: the compact code the store with overviews is built with (--code of the build; default pca).
The demo is the realistic one by default (docs/demo.md: calibrated to real vectors' spectrum, neighbour
overlap and compressibility), so these figures are what the code gives on data as hard as real embeddings.
"""
from __future__ import annotations

import argparse
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from builder import demo  # noqa: E402


def build(tiles: Path, out: Path, scheduler: str, *flags: str) -> float:
    t0 = time.perf_counter()
    p = subprocess.run([sys.executable, "-m", "builder", "build", str(tiles), "--year", "2024", "--out", str(out),
                        "--scheduler", scheduler, "-q", "--no-global", *flags], cwd=REPO, capture_output=True, text=True)
    if p.returncode:
        raise SystemExit(p.stderr[-2000:])
    return time.perf_counter() - t0


def on_disk(path: Path) -> int:
    return sum(p.stat().st_size for p in path.rglob("*") if p.is_file()) if path.exists() else 0


def agreement(full: np.ndarray, approx: np.ndarray, rng) -> tuple[float, float, float]:
    from sklearn.cluster import KMeans
    from sklearn.neighbors import KNeighborsClassifier

    def cos(m, q):
        return m @ q / (np.linalg.norm(m, axis=1) * np.linalg.norm(q) + 1e-30)
    top = max(len(full) // 100, 5)
    rec = []
    for q in rng.choice(len(full), 20, replace=False):
        a = set(np.argsort(-cos(full, full[q]))[:top])
        rec.append(len(a & set(np.argsort(-cos(approx, approx[q]))[:top])) / top)
    fit = full[rng.choice(len(full), min(len(full), 20000), replace=False)]
    km = KMeans(6, n_init=3, random_state=0).fit(fit)
    labels = km.predict(full)
    train = rng.choice(len(full), min(500, len(full) // 2), replace=False)
    knn = KNeighborsClassifier(5).fit(full[train], labels[train])
    return float(np.mean(rec)), float((km.predict(approx) == labels).mean()), float((knn.predict(approx) == knn.predict(full)).mean())


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--px", type=int, default=384)
    ap.add_argument("--scheduler", default="threads")
    ap.add_argument("--dims", default="4,8,16", help="other code sizes to measure at level 0")
    ap.add_argument("--levels", type=int, default=4, help="levels whose accuracy is measured (0..N-1)")
    ap.add_argument("--code", default="pca", help="the build's --code (pca or pq)")
    a = ap.parse_args()
    import zarr

    from builder.core import convention as conv
    from builder.core import extensions as ext
    from builder import codefit
    from builder.core import codes
    from builder.arrayfiles import ShardedArrayFiles
    from builder.store import Layout, _sharded
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        demo.write_demo_tiles(tmp / "tiles", years=(2024,), px=a.px)
        t_off = build(tmp / "tiles", tmp / "off", a.scheduler, "--no-overviews")
        t_on = build(tmp / "tiles", tmp / "on", a.scheduler, "--code", a.code)
        t_off2 = build(tmp / "tiles", tmp / "off2", a.scheduler, "--no-overviews")
        base = (t_off + t_off2) / 2
        print(f"demo {len(demo.PLACES)} tiles of {a.px}x{a.px}x128, --no-global, scheduler {a.scheduler}, "
              f"--code {a.code}")
        print(f"build time: without overviews {t_off:.2f} s and {t_off2:.2f} s (before and after), with {t_on:.2f} s "
              f"-> {t_on / base:.2f}x (+{t_on - base:.2f} s)")
        store = tmp / "on" / "2024.zarr"
        zones = [z for z in sorted(p.name for p in store.iterdir()) if conv.parse_zone_group_name(z)]
        print(f"root zarr.json (consolidated metadata): {(store / 'zarr.json').stat().st_size} B with overviews, "
              f"{(tmp / 'off' / '2024.zarr' / 'zarr.json').stat().st_size} B without")
        root = zarr.open_group(store, mode="r")
        rng = np.random.default_rng(0)
        n_levels = len(root[zones[0]].attrs["tessera-ovr:levels"])
        print("\nlevel  pixel   valid px   code+scale B/px   full vectors B/px   recall@1%   k-means   k-NN")
        for k in range(n_levels):
            nvalid, code_b, full_b, fulls, approx = 0, 0, 0, [], []
            for z in zones:
                g = root[z]
                lg = g[f"overviews/{k}"]
                scl = (g if k == 0 else lg)["scales"][...]
                ok = ~np.isnan(scl)
                nvalid += int(ok.sum())
                zd = store / z / "overviews" / str(k)
                code_b += on_disk(zd / "code") + on_disk(zd / "code_scales")
                vec_dir = store / z if k == 0 else zd  # level 0: the zone's own arrays
                full_b += on_disk(vec_dir / "embeddings") + on_disk(vec_dir / "scales")
                if k < a.levels:
                    emb = (g if k == 0 else lg)["embeddings"][...]
                    kind = codes.kind(g.attrs["tessera-ovr:code"]["method"])
                    m = kind.from_arrays({name: g[f"overviews/{name}"][...] for name in kind.arrays})
                    fulls.append(conv.dequantise(emb[ok], scl[ok]))
                    approx.append(m.vectors(m.coords(lg["code"][...][ok], lg["code_scales"][...][ok])))
            acc = "" if not fulls else "   {:.3f}       {:.3f}     {:.3f}".format(
                *agreement(np.concatenate(fulls), np.concatenate(approx), rng))
            print(f"{k:5d}  {10 * 2**k:5d} m  {nvalid:9d}   {code_b / max(nvalid, 1):15.2f}   "
                  f"{full_b / max(nvalid, 1):17.2f}{acc}")
        # other code sizes at level 0: fit on a sample, encode every valid pixel, measure encoded shard bytes
        dims = [int(d) for d in a.dims.split(",") if d]
        print("\nlevel 0, other code sizes (fitted here on 20000 pixels; bytes of the encoded shards):")
        print(" dims   code+scale B/px   recall@1%   k-means   k-NN")
        data = []
        for z in zones:
            e, s = root[z]["embeddings"][...], root[z]["scales"][...]
            data.append((z, e, s))
        full = np.concatenate([conv.dequantise(e[~np.isnan(s)], s[~np.isnan(s)]) for _, e, s in data])
        sample = full[rng.choice(len(full), min(20000, len(full)), replace=False)]
        for d in dims:
            m = codefit.fit(codes.BY_NAME[a.code].method, sample, d)
            nbytes, approx = 0, []
            for z, e, s in data:
                q, cs = m.encode(e, s)
                work = tmp / f"dims{d}" / z
                g = zarr.open_group(zarr.storage.LocalStore(work), mode="w")
                lay = Layout(chunk=32)
                for name, arr in (("code", q), ("code_scales", cs)):
                    spec = ext.ovr_array(name, m.method)
                    _sharded(g, name, arr.shape, spec["dtype"], spec["fill"], lay, spec["dims"])
                    files = ShardedArrayFiles(work / name)
                    for sr in range(arr.shape[0] // 256):
                        for sc in range(arr.shape[1] // 256):
                            files.write(sr, sc, arr[sr * 256:(sr + 1) * 256, sc * 256:(sc + 1) * 256])
                    nbytes += on_disk(work / name / "c")
                ok = ~np.isnan(s)
                approx.append(m.vectors(m.coords(q[ok], cs[ok])))
            r, km, kn = agreement(full, np.concatenate(approx), rng)
            print(f"{d:5d}   {nbytes / len(full):15.2f}   {r:9.3f}   {km:7.3f}   {kn:.3f}")


if __name__ == "__main__":
    main()
