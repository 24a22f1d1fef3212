"""A tool's compute under way, from its start to its end, said the same way for every tool.

A tool opens a `Step` (through its context, app/tools/tool.py Context.step) as its compute starts, whether a button
or a page-API verb set it off. At once the status line says what runs and on what ("Classification (random forest):
fitting on 120 labels, 5-fold held-out evaluation…"), sent to the page before the work holds the interpreter. Where
the work has parts to count (held-out fits, blocks of pixels predicted, UMAP's epochs) the step's `counter` reports
them as they pass, by count and not by clock (app/tools/progress.py): "…: held-out fit 7 of 25…".

While steps run, the explorer's `running` names the latest one; the page shows it with a seconds counter that its own
thread keeps moving while Python computes in its worker (app/main.py sends it, app/web/busy.js shows it). When the
step ends the tool's own line (its result, or why it could not run) replaces the progress. An exception the tool did
not turn into a line ends the step with one line naming the step and the first line of the error, whatever else wrote
the status line meanwhile; a cancelled step says so only while its own line is still shown.
"""
from __future__ import annotations

import asyncio

from app import views
from app.tools.progress import Progress

SHOWN = 200  # characters of an error's first line in the status line


def first_line(e: BaseException) -> str:
    return ((str(e).splitlines() or [type(e).__name__])[0] or type(e).__name__)[:SHOWN]


class Steps:
    """The steps under way for `owner` (the explorer: its `status` line and its `running` name)."""

    def __init__(self, owner):
        self.owner = owner
        self.open: list[Step] = []

    def __call__(self, title: str, what: str) -> Step:
        return Step(self, title, what)

    def _shown(self) -> None:
        self.owner.running = self.open[-1].title if self.open else ""


class Step:
    """`async with steps(title, what) as step:` around a tool's compute (module docstring)."""

    def __init__(self, steps: Steps, title: str, what: str):
        self.steps, self.title, self.what = steps, title, what
        self.line = None  # the last progress line said: a cancellation's line replaces it only while still shown

    async def __aenter__(self) -> Step:
        self.steps.open.append(self)
        self.steps._shown()
        self.say(self.what)
        try:
            await asyncio.sleep(0)  # the line goes out before a fit holds the interpreter
        except BaseException as e:  # cancelled here, the body never runs and `async with` never calls __aexit__
            await self.__aexit__(type(e), e, e.__traceback__)
            raise
        return self

    async def __aexit__(self, kind, error, tb) -> bool:
        self.steps.open.remove(self)
        self.steps._shown()
        owner = self.steps.owner
        if isinstance(error, asyncio.CancelledError):
            # most often a new run of the tool replaced this one: its line, said since, stays
            if owner.status == self.line:
                owner.status = views.html("{} cancelled.", self.title)
        elif error is not None:  # whatever else wrote the status line since (a label import, a link), it says this
            owner.status = views.html("<b>{} failed:</b> {}", self.title, first_line(error))
        return False

    def say(self, text: str) -> None:
        """The status line: this step and `text` (escaped), as under way."""
        self.line = self.steps.owner.status = views.html("{}: {}…", self.title, text)

    def counter(self, total: int, what: str) -> Progress:
        """A count of `total` parts ("held-out fit", "epoch", ...), each report a status line: "{what} 7 of 25"."""
        return Progress(total, what, self._report, least=1)

    def _report(self, done: int, total: int, what: str) -> None:
        self.say(f"{what} {done:,} of {total:,}")
