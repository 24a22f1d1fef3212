"""Keeping an array's record of the chunks that exist (builder/core/chunkruns.py) exact as a build writes it.

An array whose chunks (a global_rgb level's 256x256 chunks) or shards (a zone's embeddings, scales, rgb and
overview arrays) are written sparsely records which exist in its zarr.json attribute `chunks_present`, so that
readers ask for no other.  `update` is the one rule every writer of such an array follows once its objects are
written: the record the array had (or, with none, its files: an array written before records, one with too many
runs to record, one left out of the store's budget, or one whose grid moved) with the chunks just written in or
out as they have a file.  `leave_out` removes a record (builder/recordbudget.py keeps a store's within its budget).
Idempotent: a re-run after a kill writes the same objects and the same record.
"""
from __future__ import annotations

import json
from collections.abc import Iterable

from builder.core.chunkruns import ATTR, ChunkRuns, record_of
from builder.sink import Sink


def stored(array: Sink) -> set[tuple[int, int]]:
    """(row, col) of every chunk (or shard) file of an array: keys c/row/col[/0...]."""
    out = set()
    for key in array.keys("c/"):
        parts = key.split("/")
        if len(parts) >= 3 and parts[1].isdigit() and parts[2].isdigit():
            out.add((int(parts[1]), int(parts[2])))
    return out


def update(array: Sink, written: Iterable[tuple[tuple[int, int], bool]] = (), relist: bool = False) -> None:
    """Rewrite the array's record: `written` is (chunk, has a file) of each chunk just written or removed;
    `relist` takes the record from the files alone (after the grid moved: the old record's places are stale)."""
    doc = json.loads(array.get("zarr.json"))
    attrs = doc.setdefault("attributes", {})
    had = None
    if not relist:
        runs = record_of(attrs, doc["shape"], doc["chunk_grid"]["configuration"]["chunk_shape"])
        had = None if runs is None else set(runs)
    written = list(written)
    if had is None:
        now = stored(array)
    else:
        now = (had - {c for c, _ in written}) | {c for c, has in written if has}
    value = ChunkRuns.of(now).to_attr()
    if value is None:
        attrs.pop(ATTR, None)
    else:
        attrs[ATTR] = value
    _write(array, doc)


def leave_out(array: Sink) -> None:
    """Remove the array's record: readers then ask for each of its chunks, taking a missing one as fill."""
    doc = json.loads(array.get("zarr.json"))
    doc.get("attributes", {}).pop(ATTR, None)
    _write(array, doc)


def _write(array: Sink, doc: dict) -> None:
    array.write("zarr.json", json.dumps(doc, indent=2).encode())
