"""Scaling and object-store figures: build throughput with 1 and 2 workers, on a Dask cluster against the local
worker pool, and into an object store against the local disk, each beside its baseline from the same run.

    python benchmarks/cluster.py [--tiles 4] [--rounds 1]

Tiles: real-size 52 N tiles, 1113 x 685 px (benchmarks/build_real.py), a block of --tiles in one zone, so a
build has real shards, overviews and a global_rgb pyramid to write.  Each variant is the `build` command as a
user runs it (validation included) in a child process, timed from its call to the end:

  pool-1     --scheduler local --workers 1, out to the local disk             (the 1-worker baseline)
  pool-2     --scheduler local --workers 2, out to the local disk             (the 2-worker baseline)
  cluster-1  a dask-scheduler and 1 dask-worker (1 thread), out to disk
  cluster-2  a dask-scheduler and 2 dask-workers (1 thread each), out to disk
  pool-2-s3  as pool-2, out to s3:// (moto in server mode on 127.0.0.1)       (against pool-2)
  cluster-2-s3  as cluster-2, tiles and out on s3://                          (against cluster-2)

The cluster's processes start before a variant's timer and stop after it, so their start-up is not counted
(a cluster is started once for many builds); the local pool's start is counted (it starts with each build).
The workers run one BLAS thread each, as the local pool's do.  --rounds R runs every variant in turn R times
and prints medians (a drift of the machine's speed reaches every variant).  Throughput is MB/s of tile input
(embeddings + scales + landmask files).  This machine has 2 cores: 2 workers is all it can show.
"""
from __future__ import annotations

import argparse
import os
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
from contextlib import contextmanager, nullcontext
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "benchmarks"))

from build_real import SHAPES, input_bytes, write_tiles  # noqa: E402

S3_ENV = {"AWS_ACCESS_KEY_ID": "bench", "AWS_SECRET_ACCESS_KEY": "bench", "AWS_DEFAULT_REGION": "us-east-1"}
ONE_THREAD = {"OPENBLAS_NUM_THREADS": "1", "OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1"}
VARIANTS = {  # name: (runner, workers, tiles on s3, out on s3)
    "pool-1": ("pool", 1, False, False),
    "pool-2": ("pool", 2, False, False),
    "cluster-1": ("cluster", 1, False, False),
    "cluster-2": ("cluster", 2, False, False),
    "pool-2-s3": ("pool", 2, False, True),
    "cluster-2-s3": ("cluster", 2, True, True),
}
# (variant, its baseline): 2 workers against 1, the cluster against the local pool, s3 against the local disk
COMPARE = [("pool-2", "pool-1"), ("cluster-2", "cluster-1"), ("cluster-1", "pool-1"), ("cluster-2", "pool-2"),
           ("pool-2-s3", "pool-2"), ("cluster-2-s3", "cluster-2")]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def stop(procs: list[subprocess.Popen]) -> None:
    for p in reversed(procs):
        if p.poll() is None:
            p.send_signal(signal.SIGTERM)
    for p in reversed(procs):
        try:
            p.wait(timeout=30)
        except subprocess.TimeoutExpired:
            p.kill()


@contextmanager
def moto_server():
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    p = subprocess.Popen([sys.executable, "-m", "moto.server", "-H", "127.0.0.1", "-p", str(port)],
                         stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        end = time.monotonic() + 60
        while True:
            try:
                urllib.request.urlopen(url, timeout=2)
                break
            except OSError:
                if time.monotonic() > end or p.poll() is not None:
                    raise SystemExit("moto server did not start")
                time.sleep(0.1)
        yield url
    finally:
        stop([p])


@contextmanager
def dask_cluster(tmp: Path, n: int, env: dict):
    """A dask-scheduler and n dask-workers (1 thread each), each in a directory of its own; yields its address."""
    port = free_port()
    address = f"tcp://127.0.0.1:{port}"
    base = dict(os.environ, **env, **ONE_THREAD, PYTHONPATH=str(REPO))
    procs = [subprocess.Popen([sys.executable, "-m", "distributed.cli.dask_scheduler", "--host", "127.0.0.1",
                               "--port", str(port), "--no-dashboard"], cwd=tmp, env=base,
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)]
    try:
        for i in range(n):
            d = tmp / f"worker{i}-{port}"
            (d / "tmp").mkdir(parents=True)
            procs.append(subprocess.Popen(
                [sys.executable, "-m", "distributed.cli.dask_worker", address, "--nthreads", "1", "--no-nanny",
                 "--no-dashboard", "--local-directory", str(d / "dask")], cwd=d, env=dict(base, TMPDIR=str(d / "tmp")),
                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL))
        from distributed import Client
        with Client(address, timeout=120) as c:
            c.wait_for_workers(n, timeout=120)
        yield address
    finally:
        stop(procs)


def worker_peak_rss_mb(address: str) -> list[float]:
    """Each worker process's peak resident memory so far (MB)."""
    import resource

    from distributed import Client
    with Client(address, timeout=120) as c:
        return sorted(v / 1024 for v in c.run(lambda: resource.getrusage(resource.RUSAGE_SELF).ru_maxrss).values())


def timed_build(tiles: str, out: str, scheduler: str, workers: int, env: dict) -> float:
    """Seconds of one `build` command (its call to its end, validation included) in a child process."""
    args = ["build", tiles, "--year", "2024", "--out", out, "--scheduler", scheduler, "--workers", str(workers), "-q"]
    code = ("import sys, time; from builder.cli import main; t = time.perf_counter(); "
            f"rc = main({args!r}); print('ELAPSED', time.perf_counter() - t); sys.exit(rc)")
    p = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True, env=dict(os.environ, **env))
    if p.returncode:
        raise SystemExit(f"{args}: {p.stderr[-2000:]}")
    return float(next(line.split()[1] for line in p.stdout.splitlines() if line.startswith("ELAPSED")))


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--tiles", type=int, default=4, choices=(1, 4), help="52 N tiles in one block (1 or 4)")
    ap.add_argument("--rounds", type=int, default=1)
    ap.add_argument("--only", help="comma-separated variants (default: all)")
    a = ap.parse_args()
    names = a.only.split(",") if a.only else list(VARIANTS)
    times: dict[str, list[float]] = {v: [] for v in names}
    rss: dict[str, float] = {}
    stored = 0.0
    with tempfile.TemporaryDirectory() as d, moto_server() as s3:
        tmp = Path(d)
        env = {**S3_ENV, "AWS_ENDPOINT_URL": s3}
        os.environ.update(env)
        shape, lon0, lat0 = SHAPES["52N 1113x685"]
        tiles = tmp / "tiles"
        write_tiles(tiles, shape, lon0, lat0, a.tiles)
        mb = input_bytes(tiles) / 1e6
        import boto3
        import s3fs
        boto3.client("s3", endpoint_url=s3).create_bucket(Bucket="bench")
        s3fs.S3FileSystem(client_kwargs={"endpoint_url": s3}).put(str(tiles), "bench/tiles", recursive=True)
        k = 0
        for r in range(a.rounds):
            for v in names:
                runner, n, tiles_s3, out_s3 = VARIANTS[v]
                k += 1
                src = "s3://bench/tiles" if tiles_s3 else str(tiles)
                out = f"s3://bench/out{k}" if out_s3 else str(tmp / f"out{k}")
                with (dask_cluster(tmp, n, env) if runner == "cluster" else nullcontext("local")) as sched:
                    times[v].append(timed_build(src, out, sched, n, env))
                    if runner == "cluster":
                        rss[v] = max(rss.get(v, 0), *worker_peak_rss_mb(sched))
                if not out_s3:
                    stored = sum(p.stat().st_size for p in (Path(out) / "2024.zarr").rglob("*") if p.is_file()) / 1e6
                print(f"round {r + 1} {v}: {times[v][-1]:.2f} s", file=sys.stderr)
    med = {v: statistics.median(t) for v, t in times.items()}
    print(f"{a.tiles} real-size tiles (52 N, 1113 x 685 px), {mb:.0f} MB of tile input, a store of {stored:.0f} MB; "
          f"median of {a.rounds} round(s)")
    for v in names:
        line = f"  {v:13s} {med[v]:7.2f} s  {mb / med[v]:6.1f} MB/s"
        if v in rss:
            line += f"  (worker peak RSS {rss[v]:.0f} MB)"
        for which, base in COMPARE:
            if which == v and base in med:
                line += f"   x{med[base] / med[v]:.2f} the throughput of {base}"
        print(line)


if __name__ == "__main__":
    main()
