"""Which compact representation keeps the similarity neighbours of data like real embeddings, at how many bytes.

    python benchmarks/codes.py [--px 512] [--queries 30] [--sample 20000]

On one window of the realistic demo (a px x px tile of the dense site, 10 m pixels, written by the demo's own
tile writer; its calibration: docs/demo.md), every representation below is fitted on a sample of the window's
pixels and scored the way benchmarks/accuracy.py scores the tools: for each query pixel (its full vector), the
recall of the 1 % of the window's pixels most similar to it by cosine on the full 128-d vectors, among the 1 % most
similar by the representation.  Bytes are per 10 m pixel of the screen, before compression (the realistic
vectors compress by about 1.3x, the codes less).

  * pca D: the overviews' PCA code (builder/core/codes.py PCACode: int8 code + float32 scale), D + 4 B;
  * pq M: the overviews' product-quantisation code (builder/core/codes.py PQCode, fitted by builder/codefit.py):
    the unit vector cut into M sub-vectors of 128/M bands, each replaced by the nearest of 256 centroids, M B
    (its stored norm, not needed for a cosine, left out); similarity by the query's full vector against the
    centroids (asymmetric), divided by the reconstruction's norm, as the explorer computes it;
  * level k: the full vectors of the overview level k (2^k x 2^k means, the builder's mean2x2), each 10 m pixel
    given its parent's vector: (128 + 4) / 4^k B.

The 1 % set is the same one the tools' figures use (benchmarks/accuracy.py); the goal the issue sets is 0.9.
"""
from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from builder import demo  # noqa: E402
from builder.core import convention as conv  # noqa: E402
from builder import codefit  # noqa: E402
from builder.core import codes  # noqa: E402
from builder.overviews import mean2x2  # noqa: E402
from builder.tiles import EMBEDDINGS_DIR, grid_name  # noqa: E402

YEAR = 2024


def window(px: int) -> tuple[np.ndarray, np.ndarray]:
    """(int8 (px, px, 128), float32 (px, px)) of a tile in the middle of the dense site, read back from its files."""
    lon, lat = demo.DENSE[1]
    with tempfile.TemporaryDirectory() as tmp:
        demo.write_tile(Path(tmp), YEAR, lon, lat, px, gap=False)
        name = grid_name(lon, lat)
        d = Path(tmp) / EMBEDDINGS_DIR / str(YEAR) / name
        return np.load(d / f"{name}.npy"), np.load(d / f"{name}_scales.npy")


def unit(v: np.ndarray) -> np.ndarray:
    return v / np.maximum(np.linalg.norm(v, axis=-1, keepdims=True), 1e-30)


def top(sims: np.ndarray, share: float = 0.01) -> np.ndarray:
    n = max(int(len(sims) * share), 1)
    return np.argpartition(-sims, n - 1)[:n]


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--px", type=int, default=512)
    ap.add_argument("--queries", type=int, default=30)
    ap.add_argument("--sample", type=int, default=20000)
    ap.add_argument("--pca", default="8,16,32")
    ap.add_argument("--pq", default="8,16,32")
    ap.add_argument("--levels", default="1,2")
    a = ap.parse_args()
    rng = np.random.default_rng(0)
    q, s = window(a.px)
    ok = s > 0
    full = conv.dequantise(q[ok], s[ok]).astype(np.float32)
    fu = unit(full)
    queries = rng.choice(len(full), a.queries, replace=False)
    truth = [set(top(fu @ fu[i])) for i in queries]
    sample = full[rng.choice(len(full), min(a.sample, len(full)), replace=False)]
    print(f"realistic demo, dense site tile {grid_name(*demo.DENSE[1])}, {a.px} x {a.px} at 10 m, {YEAR}: "
          f"{len(full):,} land pixels; top 1 % = {len(truth[0]):,} pixels; {a.queries} queries")
    print(f"{'representation':<16}{'B per 10 m px':>14}{'recall@1%':>11}")

    def report(name: str, nbytes: float, sims_of) -> None:
        rec = [len(t & set(top(sims_of(i)))) / len(t) for i, t in zip(queries, truth)]
        print(f"{name:<16}{nbytes:>14.2f}{np.mean(rec):>11.3f}")

    report("full vectors", 128 + 4, lambda i: fu @ fu[i])
    for d in (int(x) for x in a.pca.split(",") if x):
        m = codefit.fit(codes.PCACode.method, sample, d)
        code, cs = m.encode(q, s)
        rec = unit(m.vectors(m.coords(code[ok], cs[ok])))
        report(f"pca {d}", d + 4, lambda i, rec=rec: rec @ fu[i])
    for mm in (int(x) for x in a.pq.split(",") if x):
        m = codefit.fit(codes.PQCode.method, sample, mm)
        code, cs = m.encode(q, s)
        coords = m.coords(code[ok], cs[ok])
        report(f"pq {mm}", mm, lambda i, m=m, coords=coords: m.cosine(coords, full[i]))
    for k in (int(x) for x in a.levels.split(",") if x):
        e, sc = q, s
        for _ in range(k):
            e, sc = mean2x2(e, sc)
        parent = unit(np.nan_to_num(conv.dequantise(e, sc)))
        f = 2 ** k
        up = np.repeat(np.repeat(parent, f, axis=0), f, axis=1)[:a.px, :a.px][ok]
        report(f"level {k} vectors", (128 + 4) / 4 ** k, lambda i, up=up: up @ fu[i])


if __name__ == "__main__":
    main()
