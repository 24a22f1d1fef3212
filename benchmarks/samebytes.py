"""Does this tree's builder write the same bytes as another revision's?  The check behind every speed-up that must
not change a stored byte.

    python benchmarks/samebytes.py [--baseline main] [--case 52N] [--tiles 1]

Writes the realistic tiles of `build.py --real` (`build_real.py`: --case picks the shape, --tiles 1 or 4), builds
them with the baseline revision's builder (its `git archive`, in a temporary directory) and with this tree's, each
in its own process with the same arguments, then compares the two stores file by file: the same file names, and
every file's bytes.  Prints one line per store and exits 1 on any difference (naming the first files that differ).
"""
from __future__ import annotations

import argparse
import io
import subprocess
import sys
import tarfile
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "benchmarks"))

from build_real import SHAPES, write_tiles  # noqa: E402


def checkout(ref: str, dest: Path) -> Path:
    """The tree of git revision `ref`, unpacked into `dest`."""
    archive = subprocess.run(["git", "archive", ref], cwd=REPO, check=True, capture_output=True).stdout
    with tarfile.open(fileobj=io.BytesIO(archive)) as tar:
        tar.extractall(dest, filter="data")
    return dest


def build(tree: Path, tiles: Path, out: Path) -> None:
    subprocess.run([sys.executable, "-m", "builder", "build", str(tiles), "--year", "2024", "--out", str(out), "-q"],
                   cwd=tree, check=True)


def differences(a: Path, b: Path) -> tuple[int, list[str]]:
    """(files in `a`, the relative paths present in only one store or whose bytes differ)."""
    fa = {p.relative_to(a).as_posix(): p for p in a.rglob("*") if p.is_file()}
    fb = {p.relative_to(b).as_posix(): p for p in b.rglob("*") if p.is_file()}
    odd = sorted(set(fa) ^ set(fb))
    odd += [k for k in sorted(set(fa) & set(fb)) if fa[k].read_bytes() != fb[k].read_bytes()]
    return len(fa), odd


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--baseline", default="main", help="the git revision whose stores must be matched")
    ap.add_argument("--case", default="52N", help="a name in build_real.SHAPES, or a part of it")
    ap.add_argument("--tiles", type=int, choices=(1, 4), default=1)
    a = ap.parse_args()
    label = next(k for k in SHAPES if a.case in k)
    shape, lon0, lat0 = SHAPES[label]
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        write_tiles(tmp / "tiles", shape, lon0, lat0, a.tiles)
        build(checkout(a.baseline, tmp / "base"), tmp / "tiles", tmp / "out-base")
        build(REPO, tmp / "tiles", tmp / "out-this")
        n, odd = differences(tmp / "out-base" / "2024.zarr", tmp / "out-this" / "2024.zarr")
    print(f"{label} x{a.tiles}: {n} files of the store built by {a.baseline}, "
          + ("every one the same bytes in this tree's store" if not odd
             else f"{len(odd)} differ or are missing: {', '.join(odd[:10])}"))
    return 1 if odd else 0


if __name__ == "__main__":
    sys.exit(main())
