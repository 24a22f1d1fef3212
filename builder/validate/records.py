"""An array's record of the chunks (or shards) that exist (builder/core/chunkruns.py): its form, and with --deep
against the array's files.  The global_rgb levels record their chunks, a zone's embeddings, scales, rgb and
overview arrays their shards; the record's grid is the array's outer chunk grid (shards for a sharded array) over
its first two dimensions, whose other dimensions are one chunk (or shard) wide."""
from __future__ import annotations

from builder.core.chunkruns import ATTR as RECORD
from builder.core.chunkruns import ChunkRuns, grid_of


def chunk_record(arr, probs: list[str]) -> ChunkRuns | None:
    """An array's record of its chunks, None when it has none; a record that is not valid is a problem (and None)."""
    attrs = arr.doc.get("attributes")
    if not isinstance(attrs, dict) or RECORD not in attrs:
        return None
    grid = grid_of(arr.shape, arr.shards or arr.chunks)
    if grid is None:
        probs.append(f"{arr.path}: {RECORD} on an array whose grid has more than one chunk past its first two "
                     "dimensions")
        return None
    try:
        return ChunkRuns.from_attr(attrs[RECORD], grid)
    except ValueError as e:
        probs.append(f"{arr.path}: {e}")
        return None


def record_problems(arr, files: list[str]) -> list[str]:
    """An array's record against its chunk files (keys `{path}/c/i/j[/0...]`): the same chunks, or one problem
    each way.  (A record that is not valid is the form check's problem.)"""
    probs: list[str] = []
    runs = chunk_record(arr, [])
    if runs is None:
        return probs
    have = set()
    for key in files:
        parts = key[len(arr.path) + 3:].split("/")
        if len(parts) >= 2 and all(p.isdigit() for p in parts):
            have.add((int(parts[0]), int(parts[1])))
    listed = set(runs)
    for what, extra in (("lists chunks that have no file", listed - have), ("omits chunk files", have - listed)):
        if extra:
            probs.append(f"{arr.path}: {RECORD} {what}: {len(extra)}, the first {min(extra)}")
    return probs
