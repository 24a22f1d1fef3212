"""Build throughput, size on disk and peak memory.

    python benchmarks/build.py [--px 384] [--scheduler threads]
    python benchmarks/build.py --real [--rounds 3] [--case 52N]

Default: builds 1x and 4x the demo tile count (in child processes, so each peak RSS
is that build's own) and prints tiles/s, MB/s written, bytes on disk against
float32 and against the raw int8+float32 payload (the Blosc ratio), and the
peak RSS of each run: a zone is streamed shard by shard, so RSS must not
grow with the number of tiles.

--real: real-size tiles, 1113 x 685 (a 0.1 degree tile at 52 N) and 1113 x 1113
(the equator), 1 and 4 (2x2) of each. For each, in the same run: the full build,
the build without the global_rgb pyramid, the build of the zone arrays alone
(no rgb, pyramid, overviews), and the baseline, tensorstore writing the same
sharded arrays with the same codecs (benchmarks/tensorstore_baseline.py).
Throughput is MB/s of tile input (embeddings + scales + landmask files).
"""
from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from builder import demo  # noqa: E402


def du(path: Path, pattern: str = "*") -> int:
    return sum(p.stat().st_size for p in path.rglob(pattern) if p.is_file())


def child(code: str) -> dict:
    """Run `code` in a child Python; its printed `ELAPSED s`, its peak RSS in kB (with children) and
    `PROCESS`, the child's whole wall time (interpreter start and imports included)."""
    # Peak RSS is sampled with psutil (the child's own ru_maxrss would inherit the
    # parent's high-water mark across fork+exec), including any Dask worker processes.
    import psutil
    t0 = time.time()
    proc = subprocess.Popen([sys.executable, "-c", code], cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    ps = psutil.Process(proc.pid)
    peak = 0
    while proc.poll() is None:
        try:
            rss = ps.memory_info().rss + sum(c.memory_info().rss for c in ps.children(recursive=True))
            peak = max(peak, rss)
        except psutil.Error:
            pass
        time.sleep(0.02)
    wall = time.time() - t0
    stdout, stderr = proc.communicate()
    if proc.returncode:
        raise SystemExit(stderr)
    vals = dict(line.split() for line in stdout.splitlines() if line.startswith("ELAPSED"))
    vals["RSS"] = peak / 1024
    vals["PROCESS"] = wall
    return vals


def run(n_places: int, px: int, scheduler: str, tmp: Path) -> dict:
    tiles = tmp / f"tiles{n_places}"
    places = [(lon + 0.1 * k, lat) for k in range(n_places // len(demo.PLACES)) for lon, lat in demo.PLACES]
    world = demo.World()
    for lon, lat in places:
        demo.write_tile(tiles, 2024, lon, lat, px, world=world)
    out = tmp / f"out{n_places}"
    code = ("import resource, sys, time; from builder.cli import main; t=time.time(); "
            f"rc=main(['build', {str(tiles)!r}, '--year', '2024', '--out', {str(out)!r}, '--scheduler', {scheduler!r}, '-q']); "
            "print('ELAPSED', time.time()-t); sys.exit(rc)")
    vals = child(code)
    store = out / "2024.zarr"
    n_valid = 0
    import zarr
    import numpy as np
    root = zarr.open_group(store, mode="r")
    for name in root.group_keys():
        if name.startswith("utm"):
            n_valid += int((~np.isnan(root[name]["scales"][:])).sum())
    emb_bytes = du(store, "*") - du(store / "global_rgb")
    emb_only = sum(du(store / z / "embeddings") + du(store / z / "scales") for z in root.group_keys() if z.startswith("utm"))
    return {"tiles": len(places), "seconds": float(vals["ELAPSED"]), "rss_mb": int(vals["RSS"]) / 1024,
            "valid_px": n_valid, "store_bytes": du(store), "zone_bytes": emb_bytes, "emb_scales_bytes": emb_only}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--px", type=int, default=384)
    ap.add_argument("--scheduler", default="threads")
    ap.add_argument("--real", action="store_true", help="real-size tiles against the tensorstore baseline")
    ap.add_argument("--rounds", type=int, default=1, help="--real: run the builds and the baseline in turn this often")
    ap.add_argument("--case", help="--real: only the cases whose name contains this (e.g. '52N', 'x1')")
    a = ap.parse_args()
    if a.real:
        from build_real import main as real
        return real(child, a.rounds, a.case)
    with tempfile.TemporaryDirectory() as d:
        rows = [run(n, a.px, a.scheduler, Path(d)) for n in (len(demo.PLACES), 4 * len(demo.PLACES))]
    for r in rows:
        f32 = r["valid_px"] * 128 * 4
        raw = r["valid_px"] * (128 + 4)
        print(f"{r['tiles']:3d} tiles of {a.px}x{a.px}: {r['tiles'] / r['seconds']:.2f} tiles/s, "
              f"{r['store_bytes'] / r['seconds'] / 1e6:.1f} MB/s written, peak RSS {r['rss_mb']:.0f} MB")
        print(f"    embeddings+scales on disk {r['emb_scales_bytes'] / 1e6:.1f} MB for {r['valid_px']:,} valid px: "
              f"{f32 / r['emb_scales_bytes']:.2f}x smaller than float32 ({f32 / 1e6:.1f} MB), "
              f"Blosc ratio {raw / r['emb_scales_bytes']:.2f}x over raw int8+float32")
    print(f"RSS ratio 4x tiles / 1x tiles: {rows[1]['rss_mb'] / rows[0]['rss_mb']:.2f}")
    print(json.dumps(rows))


if __name__ == "__main__":
    main()
