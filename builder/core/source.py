"""Where a reader's bytes come from (pure core: stdlib + numpy): the `Source` protocol every transport declares.

A `Source` gives a store's root document, its nodes' metadata, boxes of its arrays and byte ranges of its files,
all asynchronously (the browser's reads are promises).  `Hint` says what a box read is for: PIXEL reads the
fewest bytes (single inner chunks: a click), REGION whole shards (previews, tools).  `prefetches` says whether
`prefetch` warms anything (the browser's shard-index prefetch) or is a no-op.  A store that cannot be read is a
`SourceError` of one of the kinds in errors.json beside this module: one list for both sides of the browser's
bridge (app/js/fetching.js imports the same file; builder/site.py ships it), each with the title the explorer
shows for it.

The transports: the browser's zarrita bridge (app/reader.py JSSource, app/js/tessera.js) and zarr-python over
fsspec on CPython (builder/reader/source.py ZarrSource).  tests/test_bridge.py checks each against the protocol.
"""
from __future__ import annotations

import json
from enum import Enum
from pathlib import Path
from typing import Protocol, runtime_checkable

import numpy as np

Box = tuple[slice, ...]  # one slice per dimension (slice(None) for all of it)

ERROR_KINDS: dict[str, str] = json.loads((Path(__file__).parent / "errors.json").read_text())  # kind -> title
GENERIC = "error"  # the kind of a failure whose kind is not in ERROR_KINDS


class SourceError(Exception):
    """A store that cannot be read, with the kind of failure (a key of ERROR_KINDS)."""

    def __init__(self, kind: str, message: str):
        self.kind = kind if kind in ERROR_KINDS else GENERIC
        super().__init__(message)

    @property
    def title(self) -> str:
        return ERROR_KINDS[self.kind]


def as_slices(box) -> Box:
    """A box as a tuple of slices, from slices, (start, stop) pairs or None (all): the core's layout rules
    (builder/core/layout.py pixel_sel) give pairs."""
    return tuple(s if isinstance(s, slice) else slice(None) if s is None else slice(int(s[0]), int(s[1]))
                 for s in box)


class Hint(str, Enum):
    """What a box read is for (its value is the string the browser's bridge takes)."""

    PIXEL = "pixel"  # the fewest bytes: single inner chunks
    REGION = "region"  # whole shards: previews and tools

    @classmethod
    def of(cls, hint) -> "Hint":
        """A hint from itself or its string; ValueError (one line) for anything else."""
        try:
            return cls(hint)
        except ValueError:
            raise ValueError(f"read hint must be {cls.PIXEL.value!r} or {cls.REGION.value!r}, not {hint!r}") from None


PIXEL, REGION = Hint.PIXEL, Hint.REGION


@runtime_checkable
class Source(Protocol):
    url: str
    prefetches: bool  # whether `prefetch` warms anything (False: it always returns None)

    async def meta(self) -> dict:
        """The store's root zarr.json (with consolidated metadata when it has some)."""

    async def node(self, path: str) -> dict | None:
        """The zarr.json of the node at `path`, None when there is none."""

    async def read(self, path: str, box: Box, hint: Hint = Hint.PIXEL) -> np.ndarray:
        """Box `box` of the array at `path`, read as `hint` says."""

    async def read_ranges(self, key: str, ranges: list[tuple[int, int]]) -> list[bytes]:
        """Byte ranges ((offset, length) pairs) of the file `key` below the store's root, in order."""

    async def prefetch(self, items: list[tuple[str, list]]) -> dict | None:
        """Warm what PIXEL reads in these boxes read first; None where there is nothing to warm."""
