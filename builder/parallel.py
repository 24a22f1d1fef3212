"""Running many independent build tasks through Dask, with a progress bar.

`--scheduler` chooses where: "local" starts a dask.distributed LocalCluster
on this machine (the default), "threads" and "sync" use Dask's in-process
schedulers (handy for small builds and debugging), and anything else is the
address of an existing distributed scheduler (tcp://host:8786).
"""
from __future__ import annotations

import contextlib
from typing import Any, Callable, Iterable, Iterator

from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn, TimeRemainingColumn


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

    def __enter__(self) -> "Runner":
        if self.scheduler not in ("threads", "sync"):
            from dask.distributed import Client, LocalCluster
            if self.scheduler == "local":
                self._cluster = LocalCluster(n_workers=self.workers, threads_per_worker=1, processes=True,
                                             dashboard_address=None, silence_logs=40)
                self._client = Client(self._cluster)
            else:
                self._client = Client(self.scheduler)
        return self

    def __exit__(self, *exc) -> None:
        if self._client is not None:
            self._client.close()
        if self._cluster is not None:
            self._cluster.close()

    def map(self, fn: Callable[..., Any], items: Iterable[Any], desc: str, **kwargs) -> list[Any]:
        """fn(item, **kwargs) for every item, results in input order; the first failure is raised."""
        items = list(items)
        if not items:
            return []
        with self._progress() as (prog, task):
            prog.update(task, description=desc, total=len(items))
            if self._client is not None:
                from dask.distributed import as_completed
                futs = self._client.map(fn, items, pure=False, **kwargs)
                index = {f.key: i for i, f in enumerate(futs)}
                out: list[Any] = [None] * len(items)
                try:
                    for fut in as_completed(futs):
                        out[index[fut.key]] = fut.result()
                        prog.advance(task)
                except BaseException:
                    for f in futs:
                        f.cancel()
                    raise
                return out
            import dask
            from dask.callbacks import Callback

            class _Tick(Callback):
                def _posttask(self, key, result, dsk, state, id):
                    prog.advance(task)

            tasks = [dask.delayed(fn, pure=False)(it, **kwargs) for it in items]
            with _Tick():
                return list(dask.compute(*tasks, scheduler="sync" if self.scheduler == "sync" else "threads",
                                         num_workers=self.workers))

    @contextlib.contextmanager
    def _progress(self) -> Iterator[tuple[Progress, Any]]:
        prog = progress_bar()
        prog.disable = self.quiet
        with prog:
            yield prog, prog.add_task("", total=None)
