"""Which chunks of a sparse array exist: the array's record, as runs of chunk columns per chunk row.

The builder writes a global_rgb level chunk only where a zone has data (builder/pyramid.py), and a zone's
embeddings, scales, rgb and overview shards only where the shard has a valid pixel (builder/shardtask.py,
builder/overviews.py).  Each such array
records the chunks (for a sharded array: the shards) that exist in its attribute `chunks_present`: a list of
[row, first column, end column) runs, sorted, over the first two dimensions of its outer chunk grid (the others
are one chunk wide).  Readers (app/basemap.py, app/web/preview.js for the levels; app/js/sources.js for every
array read in the browser) ask only for recorded chunks and take the others as fill, so a sparse array costs no
failed request; builder/chunkrecord.py keeps the record exact as builds write, and `validate --deep` compares it
with the files.  An array with more than RUNS_MAX runs has no record (its metadata would outgrow the store's
one-request listing), nor has one left out of a store's budget of runs (STORE_RUNS_MAX), and readers of an array
without one ask for every chunk, taking a missing one as fill.

The record is store metadata, so it is data: `from_attr` bounds it and refuses anything odd.
"""
from __future__ import annotations

import bisect
from collections.abc import Iterable
from dataclasses import dataclass

ATTR = "chunks_present"
RUNS_MAX = 4096
# The runs of every record of a store together (builder/recordbudget.py): every array's zarr.json is inlined into
# the root's consolidated metadata, which readers read in one request within ROOT_JSON_MAX bytes and
# JSON_VALUES_MAX values (builder/core/bounds.py).  A run costs 4 JSON values and about 110 bytes there (its three
# numbers indented 14 deep; tests/test_record_budget.py measures it), so 32768 runs take under a quarter of each
# bound, the rest left for the arrays' other metadata; RUNS_MAX runs for each of a zone's ~37 arrays would not fit.
STORE_RUNS_MAX = 32768


@dataclass(frozen=True)
class ChunkRuns:
    """A set of chunks (row, col), held as sorted runs (row, col0, col1): col0 <= col < col1."""

    runs: tuple[tuple[int, int, int], ...]

    @classmethod
    def of(cls, chunks: Iterable[tuple[int, int]]) -> "ChunkRuns":
        runs: list[list[int]] = []
        for i, j in sorted(set(chunks)):
            if runs and runs[-1][0] == i and runs[-1][2] == j:
                runs[-1][2] = j + 1
            else:
                runs.append([i, j, j + 1])
        return cls(tuple(tuple(r) for r in runs))

    def __contains__(self, chunk) -> bool:
        i, j = chunk
        k = bisect.bisect_right(self.runs, (i, j, float("inf"))) - 1
        return k >= 0 and self.runs[k][0] == i and self.runs[k][1] <= j < self.runs[k][2]

    def __iter__(self):
        return ((i, j) for i, a, b in self.runs for j in range(a, b))

    def __len__(self) -> int:
        return sum(b - a for _, a, b in self.runs)

    def to_attr(self) -> list[list[int]] | None:
        """The attribute's value, or None when the runs are too many to record."""
        return [list(r) for r in self.runs] if len(self.runs) <= RUNS_MAX else None

    @classmethod
    def from_attr(cls, value, grid: tuple[int, int]) -> "ChunkRuns":
        """The record `value` of a level of `grid` (chunk rows, chunk columns); ValueError naming what is wrong."""
        if not isinstance(value, list):
            raise ValueError(f"{ATTR} is not a list")
        if len(value) > RUNS_MAX:
            raise ValueError(f"{ATTR} has {len(value)} runs, more than {RUNS_MAX}")
        runs = []
        for r in value:
            if not (isinstance(r, list) and len(r) == 3 and all(type(x) is int for x in r)):
                raise ValueError(f"{ATTR}: a run is not [row, col0, col1] integers: {str(r)[:40]}")
            i, a, b = r
            if not (0 <= i < grid[0] and 0 <= a < b <= grid[1]):
                raise ValueError(f"{ATTR}: run {r} is outside the level's {grid[0]}x{grid[1]} chunks")
            if runs and tuple(r) <= runs[-1]:
                raise ValueError(f"{ATTR}: runs are not sorted at {r}")
            if runs and runs[-1][0] == i and runs[-1][2] > a:
                raise ValueError(f"{ATTR}: run {r} overlaps the one before")
            runs.append(tuple(r))
        return cls(tuple(runs))


def grid_of(shape, outer) -> tuple[int, int] | None:
    """(rows, cols) of the grid a record of an array of `shape` with outer chunks (shards) `outer` is over: the
    outer chunk grid's first two dimensions; None when the grid is more than one chunk wide past them (a record
    could not say which of those exist)."""
    if len(shape) < 2 or len(outer) != len(shape) or any(-(-s // c) != 1 for s, c in zip(shape[2:], outer[2:])):
        return None
    return -(-shape[0] // outer[0]), -(-shape[1] // outer[1])


def record_of(attrs, shape, outer) -> ChunkRuns | None:
    """An array's record from its attributes, or None: none, none that applies (grid_of), or one that is not valid
    (`validate` reports it; readers then ask for every chunk, taking a missing one as fill)."""
    value = attrs.get(ATTR) if isinstance(attrs, dict) else None
    grid = grid_of(shape, outer)
    if value is None or grid is None:
        return None
    try:
        return ChunkRuns.from_attr(value, grid)
    except ValueError:
        return None

