"""Building a bbox from a TESSERA HTTP mirror on 127.0.0.1 against a local build of the same tiles.

    python benchmarks/mirror.py [--px 384] [--runs 5] [--jobs 8]

Writes demo tiles in geotessera's mirror layout (manifest.parquet, landmasks.parquet: tests/test_mirror.py's
writer) and serves them with the tests' threaded mirror server (no faults).  Each run, in the same process
and order, times (wall clock of the real CLI in a subprocess):

* local: `build TILES` of exactly the bbox's tiles copied to a local directory (the baseline);
* mirror cold: `build --from URL --bbox ...` with an empty cache (every tile downloaded);
* mirror warm: the same into a new store with the cache of the cold run (no tile request).

Prints each run and min / median of each, and the cold and warm overhead against the local build.
Run it with nothing else heavy on the machine (its figures are wall times).
"""
from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "tests"))
sys.path.insert(0, str(REPO))

BBOX = "-0.1,50.7,0.1,50.9"
YEAR = 2024


def cli(*args: str) -> float:
    env = dict(os.environ, OPENBLAS_NUM_THREADS="1", OMP_NUM_THREADS="1")
    t = time.perf_counter()
    p = subprocess.run([sys.executable, "-m", "builder", *args], cwd=REPO, env=env, capture_output=True, text=True)
    dt = time.perf_counter() - t
    if p.returncode:
        raise SystemExit(f"builder {' '.join(args)} failed: {p.stderr.strip()}")
    return dt


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--px", type=int, default=384)
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--jobs", type=int, default=8)
    a = ap.parse_args()
    from builder import demo
    from builder.tiles import EMBEDDINGS_DIR, LANDMASKS_DIR
    from test_mirror import IN_BBOX, MIRROR_PLACES, serve, write_manifest

    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        v1 = tmp / "mirror" / "v1"
        world = demo.World()
        for lon, lat in MIRROR_PLACES:
            demo.write_tile(v1, YEAR, lon, lat, a.px, world=world)
        write_manifest(v1)
        local = tmp / "local-tiles"
        for n in IN_BBOX:
            shutil.copytree(v1 / EMBEDDINGS_DIR / str(YEAR) / n, local / EMBEDDINGS_DIR / str(YEAR) / n)
            (local / LANDMASKS_DIR).mkdir(exist_ok=True)
            shutil.copy(v1 / LANDMASKS_DIR / f"{n}.tiff", local / LANDMASKS_DIR)
        size = sum(p.stat().st_size for p in local.rglob("*") if p.is_file())
        print(f"{len(IN_BBOX)} tiles of {a.px} px in the bbox ({size / 1e6:.1f} MB), {a.runs} runs, "
              f"--jobs {a.jobs}, scheduler threads")
        times: dict[str, list[float]] = {"local": [], "mirror cold": [], "mirror warm": []}
        with serve(tmp / "mirror") as m:
            url = m.base  # .../v1
            common = ["--year", str(YEAR), "--scheduler", "threads", "-q"]
            for k in range(a.runs):
                times["local"].append(cli("build", str(local), "--out", str(tmp / f"local{k}"), *common))
                cache = tmp / f"cache{k}"
                mirror = ["--from", url, f"--bbox={BBOX}", "--cache", str(cache), "--jobs", str(a.jobs)]
                times["mirror cold"].append(cli("build", *mirror, "--out", str(tmp / f"cold{k}"), *common))
                times["mirror warm"].append(cli("build", *mirror, "--out", str(tmp / f"warm{k}"), *common))
                print(f"run {k + 1}: " + ", ".join(f"{n} {v[-1]:.2f} s" for n, v in times.items()))
                for d in (f"local{k}", f"cold{k}", f"warm{k}"):
                    shutil.rmtree(tmp / d, ignore_errors=True)
        base = statistics.median(times["local"])
        for name, v in times.items():
            print(f"{name:12s} min {min(v):.2f} s  median {statistics.median(v):.2f} s  "
                  f"({statistics.median(v) / base:.2f}x the local build's median)")


if __name__ == "__main__":
    main()
