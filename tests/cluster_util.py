"""A real Dask cluster for the tests: a dask-scheduler and dask-worker processes on 127.0.0.1, started as a user
starts them (README: "Building on a Dask cluster"), each worker in a directory of its own (its working directory,
TMPDIR and Dask's --local-directory): the workers share no temporary directory with each other, with the test
or with the build's client.  They import this checkout's builder (PYTHONPATH), as a cluster's image would have it
installed, and find the object store through their own environment (the AWS variables)."""
from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from contextlib import contextmanager
from pathlib import Path

from browser_util import free_port
from conftest import REPO

DEADLINE_S = 300.0  # a loaded 2-core machine; each wait ends as soon as its condition holds


@contextmanager
def dask_cluster(tmp: Path, env: dict, workers: list[dict] | None = None):
    """Yield (scheduler address, worker processes); `workers`: extra environment of each worker (default two
    workers with none).  Every process is stopped however this ends."""
    workers = [{}, {}] if workers is None else workers
    port = free_port()
    address = f"tcp://127.0.0.1:{port}"
    base = dict(os.environ, **env, PYTHONPATH=str(REPO))
    procs = []
    try:
        sched_dir = tmp / "scheduler"
        sched_dir.mkdir(parents=True)
        procs.append(subprocess.Popen(
            [sys.executable, "-m", "distributed.cli.dask_scheduler", "--host", "127.0.0.1", "--port", str(port),
             "--no-dashboard"], cwd=sched_dir, env=dict(base, TMPDIR=str(sched_dir)),
            stdout=subprocess.DEVNULL, stderr=open(sched_dir / "log", "w")))
        started = []
        for i, extra in enumerate(workers):
            d = tmp / f"worker{i}"
            (d / "tmp").mkdir(parents=True)
            p = subprocess.Popen(
                [sys.executable, "-m", "distributed.cli.dask_worker", address, "--nthreads", "1", "--no-nanny",
                 "--no-dashboard", "--name", f"w{i}", "--local-directory", str(d / "dask")],
                cwd=d, env=dict(base, TMPDIR=str(d / "tmp"), **extra),
                stdout=subprocess.DEVNULL, stderr=open(d / "log", "w"))
            procs.append(p)
            started.append(p)
        _wait_for_workers(address, len(workers), procs)
        yield address, started
    finally:
        # The workers first, while their scheduler still answers: a worker whose scheduler is gone spends its
        # reconnect timeout before it exits (30 s of the suite's time in each cluster test's teardown).
        for group in (procs[1:], procs[:1]):
            for p in group:
                if p.poll() is None:
                    p.send_signal(signal.SIGTERM)
            for p in group:
                try:
                    p.wait(timeout=30)
                except subprocess.TimeoutExpired:
                    p.kill()
                    p.wait()


def _wait_for_workers(address: str, n: int, procs: list[subprocess.Popen]) -> None:
    """Until `n` workers are connected, each importing this checkout's builder; fail at once if a process ends."""
    from distributed import Client
    end = time.monotonic() + DEADLINE_S
    with Client(address, timeout=DEADLINE_S) as client:
        while len(client.scheduler_info()["workers"]) < n:
            for p in procs:
                assert p.poll() is None, f"a cluster process ended ({p.returncode}): {p.args}"
            assert time.monotonic() < end, f"{n} workers did not connect"
            time.sleep(0.05)
        where = client.run(lambda: __import__("builder").__file__)
        assert all(Path(f).parent == REPO / "builder" for f in where.values()), where
        cwds = client.run(os.getcwd)
        assert len(set(cwds.values())) == n, cwds  # each worker in its own directory
