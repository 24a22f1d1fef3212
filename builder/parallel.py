"""Running many independent build tasks through Dask, with a progress bar.

`--scheduler` chooses where: "local" starts a dask.distributed LocalCluster
on this machine (the default), "threads" and "sync" use Dask's in-process
schedulers (handy for small builds and debugging), and anything else is the
address of an existing distributed scheduler (tcp://host:8786).

The LocalCluster starts in the background when the build calls `start` (once
its colour and code models are fitted: BLAS threads fitting them beside
processes starting up were ten times slower): its worker processes spawn and
import the builder's task modules (`PRELOAD`) while the build fingerprints its
tiles here; the first `map` sent to the cluster waits for it (and starts it if
nobody did).  `map(..., here=True)` runs I/O-bound work on this process's threads
unless the runner is a remote cluster.  `concurrently` runs independent
stages (each its own series of maps) side by side, so one stage's serial
tail leaves the other's tasks a core; their progress lines share one display.
"""
from __future__ import annotations

import contextlib
import threading
from concurrent.futures import ThreadPoolExecutor
from typing import Any, Callable, Iterable, Iterator

from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn, TimeRemainingColumn

# imported by each local worker as it starts, not by the first task it runs
PRELOAD = ["builder.shardtask", "builder.overviews", "builder.pyramid"]


def progress_bar() -> Progress:
    return Progress(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(),
                    TimeElapsedColumn(), TimeRemainingColumn(), transient=False)


class Runner:
    def __init__(self, scheduler: str = "local", workers: int | None = None, quiet: bool = False):
        self.scheduler = scheduler
        self.workers = workers
        self.quiet = quiet
        self._client = None
        self._cluster = None
        self._starting: threading.Thread | None = None
        self._start_error: BaseException | None = None
        self._lock = threading.Lock()
        self._prog: Progress | None = None
        self._prog_users = 0

    def __enter__(self) -> "Runner":
        if self.scheduler not in ("local", "threads", "sync"):
            from dask.distributed import Client
            self._client = Client(self.scheduler)
        return self

    def start(self) -> None:
        """Start the local cluster in the background (no-op for other schedulers or when started)."""
        with self._lock:
            if self.scheduler != "local" or self._starting is not None or self._cluster is not None:
                return
            self._starting = threading.Thread(target=self._start_local, name="tessera-cluster-start", daemon=True)
            self._starting.start()

    def _start_local(self) -> None:
        try:
            from dask.distributed import Client, LocalCluster
            self._cluster = LocalCluster(n_workers=self.workers, threads_per_worker=1, processes=True,
                                         dashboard_address=None, silence_logs=40, preload=PRELOAD)
            self._client = Client(self._cluster)
        except BaseException as e:  # raised by the first map that needs the cluster
            self._start_error = e

    def _ready(self):
        """The distributed client (None for the in-process schedulers), once the local cluster is up."""
        self.start()
        if self._starting is not None:
            self._starting.join()
            self._starting = None
            if self._start_error is not None:
                raise self._start_error
        return self._client

    def __exit__(self, *exc) -> None:
        if self._starting is not None:
            self._starting.join()
        if self._client is not None:
            self._client.close()
        if self._cluster is not None:
            self._cluster.close()

    def map(self, fn: Callable[..., Any], items: Iterable[Any], desc: str, here: bool = False, **kwargs) -> list[Any]:
        """fn(item, **kwargs) for every item, results in input order; the first failure is raised.
        `here`: on this process's threads (I/O-bound work), unless the scheduler is a remote cluster."""
        items = list(items)
        if not items:
            return []
        remote = self.scheduler not in ("local", "threads", "sync")
        with self._progress(desc, len(items)) as advance:
            if here and not remote and self.scheduler != "sync":
                with ThreadPoolExecutor(self.workers) as pool:
                    futs = [pool.submit(fn, it, **kwargs) for it in items]
                    for f in futs:
                        f.add_done_callback(lambda _: advance())
                    return [f.result() for f in futs]
            client = self._ready()
            if client is not None:
                from dask.distributed import as_completed
                futs = client.map(fn, items, pure=False, **kwargs)
                index = {f.key: i for i, f in enumerate(futs)}
                out: list[Any] = [None] * len(items)
                try:
                    for fut in as_completed(futs):
                        out[index[fut.key]] = fut.result()
                        advance()
                except BaseException:
                    for f in futs:
                        f.cancel()
                    raise
                return out
            import dask
            from dask.callbacks import Callback

            class _Tick(Callback):
                def _posttask(self, key, result, dsk, state, id):
                    advance()

            tasks = [dask.delayed(fn, pure=False)(it, **kwargs) for it in items]
            with _Tick():
                return list(dask.compute(*tasks, scheduler="sync" if self.scheduler == "sync" else "threads",
                                         num_workers=self.workers))

    def concurrently(self, *stages: Callable[[], Any]) -> list[Any]:
        """Run each stage (a function making its own maps) on its own thread; results in order, once all
        are done; the first failure is raised."""
        with ThreadPoolExecutor(len(stages) or 1) as pool:
            futs = [pool.submit(stage) for stage in stages]
            return [f.result() for f in futs]

    @contextlib.contextmanager
    def _progress(self, desc: str, total: int) -> Iterator[Callable[[], None]]:
        """A progress line for one map, on the display shared by the maps running at the same time."""
        with self._lock:
            if self._prog_users == 0:
                self._prog = progress_bar()
                self._prog.disable = self.quiet
                self._prog.start()
            self._prog_users += 1
            prog = self._prog
            task = prog.add_task(desc, total=total)
        try:
            yield lambda: prog.advance(task)
        finally:
            with self._lock:
                self._prog_users -= 1
                if self._prog_users == 0:
                    prog.stop()
