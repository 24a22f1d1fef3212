"""Every file the builder writes is whole: a writer interrupted finds the old file or the new one, never a mix.

Two ways to interrupt, both real: a full disk, as a child process whose file size limit (RLIMIT_FSIZE, with
SIGXFSZ ignored) makes a write fail part-way with EFBIG, the issue's `ulimit -f`; and a SIGKILL at every
step that renames or removes a Parquet index directory (an audit hook in the child kills it at the k-th
such step, for k = 1, 2, ... until a run finishes).  After each, the target holds exactly the old bytes or
the whole new ones, and no temporary file is left beside it.
"""
from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from builder.record import Journal
from builder.sink import LocalSink
from conftest import REPO, run_cli, tree_digest

LIMITED = """
import os, resource, signal, sys
signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
n = int(sys.argv[1])
resource.setrlimit(resource.RLIMIT_FSIZE, (n, n))
os.execv(sys.executable, [sys.executable, *sys.argv[2:]])
"""

# SIGKILL at the k-th rename or removal whose path is the index itself or a sibling named after it (a
# temporary directory, the old one set aside): every moment a reader or a kill can meet between two steps.
KILLER = """
import os, signal, sys
target, k = os.path.abspath(sys.argv[1]), int(sys.argv[2])
parent, name = os.path.split(target)
seen = [0]
def touches(a):
    if isinstance(a, (tuple, list)):
        return any(touches(x) for x in a)
    if isinstance(a, bytes):
        a = os.fsdecode(a)
    if isinstance(a, os.PathLike):
        a = os.fspath(a)
    return isinstance(a, str) and os.path.dirname(os.path.abspath(a)) == parent and name in os.path.basename(a)
def hook(event, args):
    if event in ("os.rename", "os.remove", "os.rmdir", "shutil.rmtree", "ctypes.call_function") and touches(args):
        seen[0] += 1
        if seen[0] == k:
            os.kill(os.getpid(), signal.SIGKILL)
sys.addaudithook(hook)
from builder.cli import main
sys.exit(main(sys.argv[3:]))
"""


def run_limited(limit: int, *argv: str) -> subprocess.CompletedProcess:
    """`python ARGV` with files limited to `limit` bytes: a longer write fails with EFBIG, as on a full disk."""
    return subprocess.run([sys.executable, "-c", LIMITED, str(limit), *argv], capture_output=True, text=True, cwd=REPO)


def beside(path: Path) -> set[str]:
    return {p.name for p in path.parent.iterdir()}


def cut_short(target: Path, limit: int, *argv: str) -> subprocess.CompletedProcess:
    """Run `python ARGV` limited to `limit` bytes per file while `target` holds an old version: it must hold exactly
    the old bytes afterwards, with nothing new beside it."""
    old, names = target.read_bytes(), beside(target)
    p = run_limited(limit, *argv)
    assert p.returncode != 0, f"the write was not cut short: {p.stdout} {p.stderr}"
    assert target.read_bytes() == old, f"{target.name}: {len(target.read_bytes())} bytes, neither old nor new"
    assert beside(target) == names, beside(target) - names
    return p


def one_line_naming(p: subprocess.CompletedProcess, target: Path) -> None:
    lines = p.stderr.strip().splitlines()
    assert p.returncode == 2 and len(lines) == 1, (p.returncode, p.stderr)
    assert lines[0] == f"error: {target}: cannot write (File too large); left as it was", lines[0]


@pytest.fixture()
def data(store, tmp_path) -> Path:
    """A copy of a build's --out directory: 2024.zarr, its build record and catalog.json."""
    d = tmp_path / "data"
    shutil.copytree(store.parent, d)
    return d


# ---------------------------------------------------------------- JSON files --
def test_catalog_json_cut_by_a_full_disk_keeps_the_old_file(data):
    """The issue: an interrupted re-index cut catalog.json to 60 bytes."""
    catalog = data / "catalog.json"
    (data / "years.json").write_text("{}")  # the new catalog lists it: other bytes than the old one
    one_line_naming(cut_short(catalog, 10, "-m", "builder", "catalog", str(data)), catalog)
    run_cli("catalog", str(data))
    assert json.loads(catalog.read_text())["multiyear"] == "years.json"


def test_years_json_cut_by_a_full_disk_keeps_the_old_index(store, tmp_path):
    """The issue: a good 125 KB years.json replaced by a truncated 41 KB one."""
    index = tmp_path / "years.json"
    run_cli("index", "years", str(store), "-o", str(index))
    old = index.read_bytes()
    argv = ("-m", "builder", "index", "years", str(store), "-o", str(index), "--template-base", "{{base}}")
    one_line_naming(cut_short(index, len(old) // 3, *argv), index)
    run_cli(*argv[2:])
    assert index.read_bytes() != old and json.loads(index.read_text())["templates"] == {"base": ""}


def test_sample_output_cut_by_a_full_disk_keeps_the_old_table(store, tmp_path):
    out = tmp_path / "out.csv"
    out.write_text("lon,lat\n0,0\n")  # last run's table
    (tmp_path / "p.csv").write_text("lon,lat\n-0.05,50.85\n0.05,50.85\n")
    argv = ("-m", "builder", "sample", str(store), str(tmp_path / "p.csv"), "-o", str(out))
    one_line_naming(cut_short(out, 100, *argv), out)
    run_cli(*argv[2:])
    assert out.read_text().startswith("lon,lat,zone,row,col,status,scale,b0,")


# ------------------------------------------------------------ Parquet indexes --
def test_a_parquet_index_is_swapped_in_whole_at_every_kill(store, tmp_path):
    """The issue: the old Parquet index was deleted before its replacement was renamed in.  Killed at each rename
    or removal of the index or a directory beside it, the path holds the whole old or the whole new index."""
    ref_old, ref_new, target = (tmp_path / d / "years.parquet" for d in ("old", "new", "site"))
    run_cli("index", "years", str(store), "-o", str(ref_old))
    new_args = ["index", "years", str(store), "-o", str(target), "--template-base", "{{base}}"]
    run_cli(*new_args[:4], str(ref_new), *new_args[5:])
    old, new = tree_digest(ref_old), tree_digest(ref_new)
    assert old != new and ".zmetadata" in old and len(old) > 2
    for k in range(1, 30):
        shutil.rmtree(target.parent, ignore_errors=True)
        shutil.copytree(ref_old, target)
        p = subprocess.run([sys.executable, "-c", KILLER, str(target), str(k), *new_args], capture_output=True,
                           text=True, cwd=REPO)
        now = tree_digest(target) if target.is_dir() else {}
        if p.returncode == -9:
            assert now in (old, new), f"killed at step {k}: {sorted(now)[:5]} is neither the old nor the new index"
            continue
        assert p.returncode == 0, p.stderr
        assert now == new and beside(target) == {"years.parquet"}, (k, beside(target))
        break
    else:
        pytest.fail("the index writer was still being killed after 29 steps")
    assert k > 1, "no step of the swap was interrupted"


def test_a_parquet_index_cut_by_a_full_disk_keeps_the_old_index(store, tmp_path):
    index = tmp_path / "years.parquet"
    run_cli("index", "years", str(store), "-o", str(index))
    old, names = tree_digest(index), beside(index)
    p = run_limited(200, "-m", "builder", "index", "years", str(store), "-o", str(index), "--template-base", "{{base}}")
    one_line_naming(p, index)
    assert tree_digest(index) == old and beside(index) == names


# -------------------------------------------------------------- record files --
def test_the_build_record_cut_by_a_full_disk_keeps_the_old_record(data):
    record = data / "2024.zarr.build" / "record.json"
    code = ("import sys; from pathlib import Path; from builder.record import load_record, save_record\n"
            "from builder.sink import LocalSink\n"
            "sink = LocalSink(Path(sys.argv[1])); rec = load_record(sink)\n"
            "rec.zones['utm30'].tiles['x' * 100_000] = 'y'; save_record(sink, rec)")
    cut_short(record, record.stat().st_size + 10, "-c", code, str(record.parent))


def test_a_done_journal_entry_cut_short_is_not_read_as_another_shard(tmp_path):
    """A shard task journals its shard as one entry `<zone>.done/<plan>/<row>_<col>` (an object store has no
    append), written whole: what a write cut short leaves is its temporary file, `12_34.<pid>.partial`, which
    names no shard.  (The journal was one file of appended lines: "12,3" of "12,34", cut by a full disk, named
    another shard, which a resumed build then skipped as done.)  Entries of another plan do not count either."""
    sink = LocalSink(tmp_path)
    Journal(sink, "utm30", "plan-0").add((5, 5))
    journal = Journal(sink, "utm30", "plan-1")
    journal.add((0, 7))
    code = ("import sys; from pathlib import Path; from builder.record import Journal; from builder.sink import LocalSink\n"
            "Journal(LocalSink(Path(sys.argv[1])), 'utm30', 'plan-1').add((12, 34))")
    assert run_limited(0, "-c", code, str(tmp_path)).returncode == 0  # an entry is written under any file size limit
    assert journal.done() == {(0, 7), (12, 34)}
    left = tmp_path / "utm30.done" / "plan-1" / f"12_3.{99999}.partial"  # as a killed write leaves it
    left.write_bytes(b"")
    (tmp_path / "utm30.done" / "plan-1" / "12_34").unlink()
    assert journal.done() == {(0, 7)}
    # another plan's entries: removed when this plan's journal is read
    assert not [p for p in (tmp_path / "utm30.done" / "plan-0").rglob("*") if p.is_file()]


# ------------------------------------------------------------ other writers --
def test_a_demo_tile_cut_by_a_full_disk_keeps_the_old_tile(tmp_path):
    code = ("import sys; from pathlib import Path; from builder import demo\n"
            "demo.write_tile(Path(sys.argv[1]), 2024, -0.05, 50.85, 96, gap=sys.argv[2] == 'gap')")
    subprocess.run([sys.executable, "-c", code, str(tmp_path), "old"], check=True, cwd=REPO)
    scales = next(tmp_path.rglob("*_scales.npy"))
    embeddings, old_scales = scales.with_name(scales.name.replace("_scales", "")), scales.read_bytes()
    cut_short(embeddings, 1000, "-c", code, str(tmp_path), "gap")  # the tile's first file
    subprocess.run([sys.executable, "-c", code, str(tmp_path), "gap"], check=True, cwd=REPO)
    assert scales.read_bytes() != old_scales and not list(tmp_path.rglob("*.partial"))


def test_the_site_manifest_cut_by_a_full_disk_keeps_the_old_one(tmp_path):
    site = tmp_path / "site"
    (site / "wheels").mkdir(parents=True)
    (site / "site-manifest.json").write_text('{"files": {}}')
    for i in range(50):
        (site / "wheels" / f"w{i}.whl").write_bytes(b"wheel %d" % i)
    code = "import sys; from pathlib import Path; from builder.site import _manifest; _manifest(Path(sys.argv[1]))"
    cut_short(site / "site-manifest.json", 200, "-c", code, str(site))
