"""A store's records of the chunks that exist (builder/core/chunkruns.py) kept within its budget of runs.

Every array's zarr.json, its record included, is inlined into the root's consolidated metadata, which readers read
in one request within the root's bounds (builder/core/bounds.py).  `fit` runs before the root is written: while the
records of all the store's arrays have more than STORE_RUNS_MAX runs together, it leaves out the record with the
most runs (ties by path, so a rebuild leaves out the same ones).  An array without a record reads as one written
before records did (every chunk asked for, a missing one fill): the same values, a failed request for each
missing chunk of only those arrays.  A later build retakes a left-out record from the array's files
(builder/chunkrecord.py) and `fit` weighs it again.
"""
from __future__ import annotations

import zarr

from builder import chunkrecord
from builder.core.chunkruns import ATTR, STORE_RUNS_MAX
from builder.sink import Sink


def fit(store: Sink, runs_max: int = STORE_RUNS_MAX) -> list[str]:
    """Leave out the records with the most runs until the store's records have at most `runs_max` runs; the
    paths of the arrays whose record was left out."""
    group = zarr.open_group(store.zarr_store(), mode="r", use_consolidated=False)
    runs = {}
    for path, node in group.members(max_depth=None):
        value = node.attrs.get(ATTR) if isinstance(node, zarr.Array) else None
        if isinstance(value, list):  # an invalid record costs its size too (validate reports it)
            runs[path] = len(value)
    total, out = sum(runs.values()), []
    for path in sorted(runs, key=lambda p: (-runs[p], p)):
        if total <= runs_max:
            break
        chunkrecord.leave_out(store / path)
        total -= runs[path]
        out.append(path)
    return out
