"""Running many independent build tasks in parallel, with a progress bar.

`--scheduler` chooses where: "local" runs them on a pool of worker processes on this machine (the
default), "threads" and "sync" use Dask's in-process schedulers (handy for small builds and
debugging), and anything else is the address of an existing Dask distributed scheduler
(tcp://host:8786).

The local pool: a forkserver process imports the builder's task modules once (`PRELOAD`) and forks
one worker per CPU the build may use (`cores`) from that state, so a worker is ready in milliseconds
instead of importing Dask and the builder itself (a Dask LocalCluster's nannies, workers and scheduler cost a 2-core
machine about a second of CPU per build, which decided the time of a one-tile build).  Why not
Dask's own "processes" scheduler: it pickles each task graph through cloudpickle and starts its pool
with spawn, for a flat map of independent tasks that concurrent.futures does directly.  A worker
exits when the build's process is gone (it watches that process), so a killed build leaves no worker
behind; a worker that dies mid-task fails the build with one line (the finished shards are
journalled: a re-run resumes); workers ignore Ctrl-C, which the build itself answers.

The pool starts in the background as the runner is entered, on the core the build's own reading and
planning leave free (the build fits its colour and code models with one BLAS thread meanwhile: OpenBLAS's
threads waiting on a busy core made those small fits fifteen times slower); the first `map` sent to it
waits for it.  `map(..., here=True)` runs I/O-bound work on this process's threads unless the runner is a
remote cluster.  `concurrently` runs independent stages (each its own series of maps) side by side, so one
stage's serial tail leaves the other's tasks a core; their progress lines share one display.
"""
from __future__ import annotations

import contextlib
import multiprocessing
import os
import sys
import threading
import time
from concurrent.futures import FIRST_EXCEPTION, ProcessPoolExecutor, ThreadPoolExecutor, wait
from concurrent.futures.process import BrokenProcessPool
from typing import Any, Callable, Iterable, Iterator

from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn, TimeRemainingColumn

from builder.errors import BuildError

# imported once by the local pool's forkserver, so each worker forked from it starts with them
PRELOAD = ["builder.shardtask", "builder.products", "builder.overviews", "builder.pyramid", "builder.levels"]


def cores() -> int:
    """The CPUs this process may use: its affinity, bounded by a cgroup v2 CPU quota (a container's limit).
    Why by hand: dask.system.CPU_COUNT does this, but importing Dask costs the build 0.35 s before its first
    shard, and os.cpu_count() counts the host's CPUs (64 workers in a 2-CPU container)."""
    n = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)
    try:
        with open("/sys/fs/cgroup/cpu.max") as f:
            quota, period = f.read().split()[:2]
        if quota != "max":
            n = min(n, max(1, int(quota) // int(period)))
    except (OSError, ValueError):
        pass
    return max(1, n)


def _worker_init(build_pid: int) -> None:
    """Initializer of a local worker process:
    - one BLAS thread: the pool runs a task per core, so a task's BLAS threads (OpenBLAS starts one per
      core) only compete with the other workers' (one 52N tile's shards took 1.3-1.4x as long with them);
    - Ctrl-C ignored: the build's process gets it too, and shuts the pool down (an idle worker would
      print a KeyboardInterrupt traceback);
    - exit once the build's process is gone, so a SIGKILLed build leaves no worker waiting on its task
      queue for ever.  Its parent is no sign: that is the forkserver, which lives as long as any worker
      (each holds a copy of the descriptor whose closing tells it to exit).  A pidfd becomes readable when
      the process exits (a zombie not yet reaped included; no pid reuse); without one, its pid is polled."""
    import select
    import signal
    from threadpoolctl import threadpool_limits
    threadpool_limits(1)
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    try:
        fd = os.pidfd_open(build_pid)
    except (AttributeError, OSError):
        fd = None

    def watch() -> None:
        while True:
            if fd is not None:
                select.select([fd], [], [])
                os._exit(1)
            time.sleep(0.5)
            try:
                os.kill(build_pid, 0)
            except ProcessLookupError:
                os._exit(1)
            except PermissionError:  # alive (another user's process cannot have its pid this soon)
                pass
    threading.Thread(target=watch, name="tessera-build-watch", daemon=True).start()


def _ping() -> int:
    return os.getpid()


def progress_bar() -> Progress:
    return Progress(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(),
                    TimeElapsedColumn(), TimeRemainingColumn(), transient=False)


class Runner:
    def __init__(self, scheduler: str = "local", workers: int | None = None, quiet: bool = False):
        self.scheduler = scheduler
        self.workers = workers
        self.quiet = quiet
        self._client = None  # a remote Dask cluster's client
        self._pool: ProcessPoolExecutor | None = None  # the local worker processes
        self._starting: threading.Thread | None = None
        self._start_error: BaseException | None = None
        self._lock = threading.Lock()
        self._prog: Progress | None = None
        self._prog_users = 0

    @property
    def remote(self) -> bool:
        return self.scheduler not in ("local", "threads", "sync")

    @property
    def parallelism(self) -> int:
        """How many tasks run at once: the local workers or threads, or the threads of the remote cluster's workers."""
        if self._client is not None:
            return max(1, sum(self._client.nthreads().values()))
        return 1 if self.scheduler == "sync" else self.workers or cores()

    def __enter__(self) -> "Runner":
        if self.remote:
            from dask.distributed import Client
            self._client = Client(self.scheduler)
        self.start()  # the local pool comes up on another core while the build reads and plans
        return self

    def start(self) -> None:
        """Start the local worker processes in the background (no-op for other schedulers or when started)."""
        with self._lock:
            if self.scheduler != "local" or self._starting is not None or self._pool is not None:
                return
            self._starting = threading.Thread(target=self._start_local, name="tessera-pool-start", daemon=True)
            self._starting.start()

    def _start_local(self) -> None:
        try:
            # The resource tracker (a child interpreter started with this one's -W options) reports at exit
            # the queue semaphores of a pool whose worker was killed as "leaked", in lines after our one-line
            # error; it unlinks them all the same.  (This silences every resource_tracker warning of this
            # process's children, and works only if no tracker runs yet: none does before the pool.)
            if "ignore:resource_tracker:UserWarning" not in sys.warnoptions:
                sys.warnoptions.append("ignore:resource_tracker:UserWarning")
            ctx = multiprocessing.get_context("forkserver")
            ctx.set_forkserver_preload(PRELOAD)
            n = self.workers or cores()
            pool = ProcessPoolExecutor(n, mp_context=ctx, initializer=_worker_init, initargs=(os.getpid(),))
            self._pool = pool
            # one call per worker: each submit to a pool with no idle worker starts one, and every worker
            # is up (forked, initialised) once these return
            for f in [pool.submit(_ping) for _ in range(n)]:
                f.result()
        except BaseException as e:  # raised by every map that needs the pool
            self._start_error = e

    def _ready(self) -> ProcessPoolExecutor:
        """The local pool once it is up (starting it if nobody did); its start-up error is raised here, to every
        caller (two stages of `concurrently` may ask at once)."""
        self.start()
        with self._lock:
            starting = self._starting
        if starting is not None:
            starting.join()
        if self._start_error is not None:
            raise self._start_error
        return self._pool

    def __exit__(self, *exc) -> None:
        if self._starting is not None:
            self._starting.join()
        if self._pool is not None:
            self._pool.shutdown(wait=True, cancel_futures=True)
        if self._client is not None:
            self._client.close()
        self._pool, self._starting, self._start_error = None, None, None

    def map(self, fn: Callable[..., Any], items: Iterable[Any], desc: str, here: bool = False, **kwargs) -> list[Any]:
        """fn(item, **kwargs) for every item, results in input order; the first failure is raised.
        `here`: on this process's threads (I/O-bound work), unless the scheduler is a remote cluster."""
        items = list(items)
        if not items:
            return []
        with self._progress(desc, len(items)) as advance:
            if here and not self.remote and self.scheduler != "sync":
                with ThreadPoolExecutor(self.workers) as pool:
                    return self._gather([pool.submit(fn, it, **kwargs) for it in items], advance)
            if self.scheduler == "local":
                try:
                    pool = self._ready()
                    return self._gather([pool.submit(fn, it, **kwargs) for it in items], advance)
                except BrokenProcessPool as e:
                    if "terminated abruptly" not in str(e):  # e.g. a task's result or error that could not be unpickled
                        raise BuildError(f"the worker processes failed during '{desc}': {e} ({e.__cause__})") from None
                    raise BuildError(f"a worker process died during '{desc}' (killed, or out of memory?); "
                                     "what it finished is kept: run the same build again to resume") from None
            if self._client is not None:
                from dask.distributed import as_completed as dask_completed
                futs = self._client.map(fn, items, pure=False, **kwargs)
                index = {f.key: i for i, f in enumerate(futs)}
                out: list[Any] = [None] * len(items)
                try:
                    for fut in dask_completed(futs):
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

    @staticmethod
    def _gather(futs: list, advance: Callable[[], None]) -> list[Any]:
        """The futures' results in order, advancing the progress line as each is done.  On a failure the ones not
        started are cancelled, the running ones finish, and the failure of the first item in input order is
        raised (the same one from run to run, whichever finished first)."""
        for f in futs:
            f.add_done_callback(lambda _: advance())
        done, _ = wait(futs, return_when=FIRST_EXCEPTION)
        if any(f.exception() is not None for f in done):
            for f in futs:
                f.cancel()
            wait(futs)
            raise next(f.exception() for f in futs if not f.cancelled() and f.exception() is not None)
        return [f.result() for f in futs]

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
