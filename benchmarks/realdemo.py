"""Every figure of the tools on the realistic demo, in one run: their accuracy (benchmarks/accuracy.py: the compact
code and the full vectors against the full-vector result and the ground truth) and then their bytes and time per
screen on a screen full of data over an emulated link (benchmarks/anyzoom.py, in headless Chromium).

    python benchmarks/realdemo.py [--work DIR] [--network 50,40]

The two scripts run one after the other, never at once (each would slow the other's timings); a failure of the
first stops the run with its exit code.
"""
from __future__ import annotations

import argparse
import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--work", help="accuracy.py's demo tiles and stores (reused when present)")
    ap.add_argument("--network", default="50,40", help="anyzoom.py's emulated link: Mbit/s,latency ms")
    a = ap.parse_args()
    runs = [[sys.executable, str(HERE / "accuracy.py")] + (["--work", a.work] if a.work else []),
            [sys.executable, str(HERE / "anyzoom.py"), "--network", a.network]]
    for cmd in runs:
        print(f"\n=== {Path(cmd[1]).name}", flush=True)
        rc = subprocess.run(cmd).returncode
        if rc:
            sys.exit(rc)


if __name__ == "__main__":
    main()
