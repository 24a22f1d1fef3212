"""How far the reading of a label file has got: the readers (app/tools/labelfiles.py, labels.from_geojson) count
their items (a CSV's lines, a KML's placemarks, a GeoJSON's features) through a `Progress`, which tells its
`report(done, total, what)` at the start (0, total), every `step` items and at the end (total, total). The explorer
shows each report in its status line (labels.Labels.reading), naming the file by `file_name`: one patch sent to the
page, at once, while Python goes on reading (app/page.py).

Reports are made by count, not by clock, so the same file gives the same reports on any machine: every STEP items,
or every twentieth of the total when that is more, so at most 22 per file whatever its size, each a status line of
a hundred bytes or so. A file of fewer than STEP items gets only the first and the last. A tool's step counts its
parts the same way (app/tools/steps.py: held-out fits, blocks of pixels, UMAP's epochs), every `least` of them
(1 there) or every twentieth of the total when that is more.
"""
from __future__ import annotations

from typing import Callable

STEP = 5_000  # items between two reports, at least

Report = Callable[[int, int, str], None]


def file_name(filename) -> str:
    """A file's name as its reports and messages say it: its last 80 characters (user text: shown escaped)."""
    return str(filename)[-80:] or "labels"


class Progress:
    """The count of `what` ("rows", "features", ...) read of `total`, told to `report` (None: to no one)."""

    def __init__(self, total: int, what: str, report: Report | None, least: int = STEP):
        self.total, self.what, self.report = max(int(total), 0), what, report
        self.step = max(least, -(-self.total // 20))
        self.next, self.told = self.step, None
        if report is not None:
            self._tell(0)

    def at(self, done: int) -> None:
        """`done` items read so far (a count that only grows; more than `total` is told as `total`)."""
        if self.report is not None and done >= self.next:
            self.next = (done // self.step + 1) * self.step
            self._tell(min(done, self.total))

    def end(self) -> None:
        """Every item read (told once: not again when the last step told it)."""
        if self.report is not None and self.told != self.total:
            self._tell(self.total)

    def _tell(self, done: int) -> None:
        self.told = done
        self.report(done, self.total, self.what)
