"""Bytes and time per tool result on a geoemb: v2 store: depth 16 (the tools' first read) beside the full vectors
(the exact result) in the same run, over HTTP with Range (python -m builder serve behind a logging proxy).

    python benchmarks/depth.py [--spans 2000,5000]

Writes the test writer's v2 store (tests/distributions.py: one 512 x 512 zone, random incompressible int8, depth
arrays with 64-px inner chunks, the full vectors' 32), opens it in the explorer's logic on CPython (zarr-python
Source), selects a pixel and runs similarity over views `--spans` metres wide, at depth 16 and exact; prints the
bytes of chunk reads (vectors and scales, from the wire) and the wall time of each.
"""
from __future__ import annotations

import argparse
import asyncio
import sys
import tempfile
import time
import warnings
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "tests"))
sys.path.insert(0, str(REPO))
warnings.filterwarnings("ignore", message="Consolidated metadata")


async def run(url: str, log, spans: list[float]) -> None:
    from builder.reader.source import ZarrSource
    from app.session import Explorer
    from app.state import UrlState
    from browser_util import chunk_bytes
    state = Explorer([{"year": 0, "url": url}], UrlState(store=url), source_factory=ZarrSource)
    await state.open_year(0)
    state.year = 2024
    await state.settle()
    lonlat = state.model.zones["utm30"].centre_lonlat(256, 200)
    await state.select(*lonlat)
    for span in spans:
        for exact in (False, True):
            state.centre_view(*lonlat, span)
            state.exact = exact
            await state.settle()
            start, t0 = len(log), time.perf_counter()
            layer = await state.tools.similarity.compute()
            ms = (time.perf_counter() - t0) * 1000
            got = chunk_bytes(log, start)
            r0, r1, c0, c1 = layer.window
            vec = sum(n for k, n in got.items() if k != "scales")
            print(f"span {span:>6.0f} m, {r1 - r0} x {c1 - c0} px, {layer.read:<20}: vectors {vec / 1e6:6.2f} MB, "
                  f"scales {got.get('scales', 0) / 1e6:5.2f} MB, {ms:7.0f} ms")


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--spans", default="2000,5000")
    args = ap.parse_args()
    from browser_util import counting_proxy, static_server
    from distributions import write_geoemb_v2
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        write_geoemb_v2(root / "v2.zarr")
        (root / "index.html").write_text("benchmarks/depth.py")
        with static_server(root) as base, counting_proxy(base) as (url, log):
            asyncio.run(run(url + "v2.zarr", log, [float(s) for s in args.spans.split(",")]))


if __name__ == "__main__":
    main()
