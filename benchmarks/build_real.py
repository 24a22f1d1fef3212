"""`benchmarks/build.py --real`: the builder on real-size tiles beside tensorstore, in one run.

Tiles: 1113 x 685 px (0.1 degree at 52 N, Suffolk, UTM 31N) and 1113 x 1113 px (0.1 degree at the
equator, Gabon, UTM 32N); 1 tile and 4 (a 2x2 block) of each. Each variant runs in a child process
(wall time and peak RSS of that process and its children):
  full      `build` as a user runs it (zone arrays, rgb preview, overviews, global_rgb pyramid)
  no-global the same without the global_rgb pyramid (the pyramid's share is full - no-global)
  arrays    the zone's embeddings and scales only (--no-rgb --no-overviews)
  ts        tensorstore writing the same two sharded arrays, same codecs (tensorstore_baseline.py)
Two times of each: after its imports (the build's timer starts once the builder's modules are imported, as
the baseline's starts once tensorstore is: the first ratio), and the whole process, interpreter start and
imports included, for both (the second ratio; tensorstore's import alone takes about a second).
--rounds R runs the four in turn R times (so a drift of the machine's speed reaches them all) and prints
medians, each ratio and the pyramid's share taken round by round, with their ranges; --case keeps the cases
whose name contains it.
"""
from __future__ import annotations

import json
import shutil
import statistics
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from builder import demo  # noqa: E402
from builder.tiles import EMBEDDINGS_DIR, LANDMASKS_DIR  # noqa: E402

SHAPES = {"52N 1113x685": ((1113, 685), 0.55, 52.05), "equator 1113x1113": ((1113, 1113), 11.05, 0.05)}
VARIANTS = {"full": [], "no-global": ["--no-global"], "arrays": ["--no-rgb", "--no-overviews"]}


def write_tiles(root: Path, shape, lon0: float, lat0: float, n: int) -> list[tuple[Path, float, float]]:
    """n = 1 or 4 tiles at 0.1 degree spacing; (tile dir, west, north) of each."""
    world = demo.World()
    out = []
    for k in range(n):
        lon, lat = lon0 + 0.1 * (k % 2), lat0 - 0.1 * (k // 2)
        epsg = demo._utm_epsg(lon0, lat0)  # one zone for the block, as a real 2x2 block inside a zone
        west, north = demo.tile_origin(lon, lat, shape, epsg)
        d = demo.write_tile(root, 2024, lon, lat, shape, world=world, epsg=epsg, origin=(west, north))
        out.append((d, west, north))
    return out


def input_bytes(root: Path) -> int:
    return sum(p.stat().st_size for d in (EMBEDDINGS_DIR, LANDMASKS_DIR) for p in (root / d).rglob("*") if p.is_file())


def main(child, rounds: int = 1, only: str | None = None) -> None:
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        for label, (shape, lon0, lat0) in SHAPES.items():
            for n in (1, 4):
                if only and only not in f"{label} x{n}":
                    continue
                root = tmp / f"tiles-{shape[1]}-{n}"
                tiles = write_tiles(root, shape, lon0, lat0, n)
                res = {"case": f"{label} x{n}", "input_mb": input_bytes(root) / 1e6,
                       "runs": {k: [] for k in (*VARIANTS, "ts")}}
                for _ in range(rounds):
                    for name, extra in VARIANTS.items():
                        out = tmp / f"out-{name}-{shape[1]}-{n}"
                        shutil.rmtree(out, ignore_errors=True)  # each round builds from nothing
                        args = ["build", str(root), "--year", "2024", "--out", str(out), "-q", *extra]
                        code = ("import time, sys; from builder.cli import main; import builder.build, builder.commands; "
                                "t = time.time(); "
                                f"rc = main({args!r}); print('ELAPSED', time.time() - t); sys.exit(rc)")
                        v = child(code)
                        res["runs"][name].append({"s": float(v["ELAPSED"]), "process_s": v["PROCESS"],
                                                  "rss_mb": v["RSS"] / 1024})
                    zone = next(p for p in (tmp / f"out-arrays-{shape[1]}-{n}" / "2024.zarr").iterdir()
                                if p.name.startswith("utm"))
                    spec = [(str(d), w, nn) for d, w, nn in tiles]
                    ts_out = tmp / f"ts-{shape[1]}-{n}"
                    code = ("import sys, time; from pathlib import Path; sys.path.insert(0, 'benchmarks'); "
                            "from tensorstore_baseline import write_zone; t = time.time(); "
                            f"write_zone([(Path(d), w, n) for d, w, n in {spec!r}], Path({str(ts_out)!r}), "
                            f"Path({str(zone)!r})); print('ELAPSED', time.time() - t)")
                    v = child(code)
                    res["runs"]["ts"].append({"s": float(v["ELAPSED"]), "process_s": v["PROCESS"],
                                              "rss_mb": v["RSS"] / 1024})
                for k, runs in res["runs"].items():  # medians of the times; the highest peak RSS
                    res[k] = {"s": statistics.median(r["s"] for r in runs), "rss_mb": max(r["rss_mb"] for r in runs)}
                rows.append(res)
                print(report(res), flush=True)
    by = {r["case"]: r for r in rows}
    for label in SHAPES:
        if f"{label} x1" in by and f"{label} x4" in by:
            one, four = by[f"{label} x1"], by[f"{label} x4"]
            print(f"{label}: peak RSS 4 tiles / 1 tile: full build {four['full']['rss_mb'] / one['full']['rss_mb']:.2f}, "
                  f"tensorstore {four['ts']['rss_mb'] / one['ts']['rss_mb']:.2f}")
    print(json.dumps(rows))


def _rounds(r: dict, f, fmt: str = ".2f", key: str = "s") -> str:
    """f(a round's times by variant) over the rounds: the median, and the range when there are several.
    `key`: "s" the times after imports, "process_s" the whole processes'."""
    vals = sorted(f({k: runs[i][key] for k, runs in r["runs"].items()}) for i in range(len(r["runs"]["ts"])))
    med = statistics.median(vals)
    return f"{med:{fmt}}" if len(vals) == 1 else f"{med:{fmt}} ({vals[0]:{fmt}}-{vals[-1]:{fmt}})"


def report(r: dict) -> str:
    mbs = {k: r["input_mb"] / r[k]["s"] for k in ("full", "no-global", "arrays", "ts")}
    pyramid = _rounds(r, lambda t: 100 * (t["full"] - t["no-global"]) / t["full"], ".0f")
    return (f"{r['case']}: {r['input_mb']:.0f} MB of tiles, {len(r['runs']['ts'])} round(s); median MB/s full "
            f"{mbs['full']:.1f}, arrays only {mbs['arrays']:.1f}, tensorstore {mbs['ts']:.1f} (baseline) -> "
            f"full/ts {_rounds(r, lambda t: t['ts'] / t['full'])}x (whole processes "
            f"{_rounds(r, lambda t: t['ts'] / t['full'], key='process_s')}x), "
            f"arrays/ts {_rounds(r, lambda t: t['ts'] / t['arrays'])}x; "
            f"global_rgb pyramid {pyramid}% of the build; peak RSS full {r['full']['rss_mb']:.0f} MB, "
            f"arrays {r['arrays']['rss_mb']:.0f} MB, tensorstore {r['ts']['rss_mb']:.0f} MB")
