"""Chunk keys of the arrays of a reference index, from the arrays' own metadata (Zarr v2 or v3).

A Kerchunk Parquet index files each chunk reference under its array and its chunk number (C order over
the chunk grid), so both writing and reading one need, per array: its chunk grid and how its chunk keys
spell coordinates.  fsspec's LazyReferenceMapper knows only Zarr v2 (`.zarray`, keys `i.j.k`, and any
`.../.zgroup` taken for an array); this reads both:

* v2 `.zarray`: grid = ceil(shape / chunks), keys `i.j.k` (or `i/j/k` with dimension_separator "/");
* v3 `zarr.json` (node_type "array"): grid = ceil(shape / chunk_grid.configuration.chunk_shape), keys
  `c/i/j/k` for the default chunk_key_encoding (whose leading `c` is not a coordinate; separator from its
  configuration, `c` alone for a 0-d array) or `i.j.k` for the "v2" encoding.

Every other key of an index is metadata (`zarr.json`, `.zgroup`, `.zarray`, `.zattrs`).
"""
from __future__ import annotations

import json
import math
from dataclasses import dataclass

META_NAMES = frozenset({"zarr.json", ".zgroup", ".zarray", ".zattrs"})


def is_meta(key: str) -> bool:
    return key.rsplit("/", 1)[-1] in META_NAMES


def parent(key: str) -> str:
    return key.rsplit("/", 1)[0] if "/" in key else ""


@dataclass(frozen=True)
class ArrayKeys:
    """The chunk keys of one array: `path` in the hierarchy, chunk `grid`, key `prefix` and `sep`."""

    path: str
    grid: tuple[int, ...]
    prefix: str  # "c" for the v3 default encoding, "" otherwise
    sep: str

    @classmethod
    def from_meta(cls, key: str, doc) -> "ArrayKeys | None":
        """The array whose metadata document `doc` is stored at `key`; None for a group's document."""
        if isinstance(doc, (str, bytes)):
            doc = json.loads(doc)
        name, path = key.rsplit("/", 1)[-1], parent(key)
        try:
            if name == ".zarray":
                shape, chunks = doc["shape"], doc["chunks"]
                prefix, sep = "", doc.get("dimension_separator") or "."
            elif name == "zarr.json" and doc.get("node_type") == "array":
                cg = doc["chunk_grid"]
                if cg.get("name") != "regular":
                    raise ValueError(f"chunk grid {cg.get('name')!r} is not regular")
                shape, chunks = doc["shape"], cg["configuration"]["chunk_shape"]
                enc = doc.get("chunk_key_encoding") or {"name": "default"}
                default = enc.get("name") == "default"
                prefix = "c" if default else ""
                sep = (enc.get("configuration") or {}).get("separator", "/" if default else ".")
            else:
                return None
            grid = tuple(math.ceil(int(s) / int(c)) for s, c in zip(shape, chunks, strict=True))
        except (KeyError, TypeError, ValueError, ZeroDivisionError) as e:
            raise ValueError(f"{key}: array metadata without a usable chunk grid ({e})") from None
        return cls(path, grid, prefix, sep)

    def number(self, rest: str) -> int | None:
        """The chunk number of `rest` (a key relative to the array), None if it is not one of its chunk keys."""
        if self.prefix:
            if not self.grid:
                return 0 if rest == self.prefix else None
            if not rest.startswith(self.prefix + self.sep):
                return None
            rest = rest[len(self.prefix) + len(self.sep):]
        elif not self.grid:
            return 0 if rest == "0" else None
        parts = rest.split(self.sep)
        if len(parts) != len(self.grid) or not all(p.isdigit() for p in parts):
            return None
        n = 0
        for p, g in zip(parts, self.grid):
            i = int(p)
            if i >= g:
                return None
            n = n * g + i
        return n

    def key(self, n: int) -> str:
        """The chunk key (from the hierarchy's root) of chunk number `n`."""
        coords = []
        for g in reversed(self.grid):
            n, i = divmod(n, g)
            coords.append(str(i))
        rel = self.sep.join(reversed(coords)) if coords else ("" if self.prefix else "0")
        rel = (self.prefix + self.sep + rel if rel else self.prefix) if self.prefix else rel
        return f"{self.path}/{rel}" if self.path else rel

    @property
    def slots(self) -> int:
        return math.prod(self.grid)


class Arrays:
    """Every array of an index, from its metadata documents {key: document}; splits chunk keys."""

    def __init__(self, metadata: dict):
        self.by_path: dict[str, ArrayKeys] = {}
        for key, doc in metadata.items():
            a = ArrayKeys.from_meta(key, doc) if key.rsplit("/", 1)[-1] in (".zarray", "zarr.json") else None
            if a is not None:
                self.by_path[a.path] = a

    def split(self, key: str) -> tuple[ArrayKeys, int] | None:
        """(array, chunk number) of a chunk key; None for any other key.  The longest array path wins."""
        path = key
        while path:
            path = parent(path)
            a = self.by_path.get(path)
            if a is not None:
                n = a.number(key[len(path) + 1:] if path else key)
                return None if n is None else (a, n)
        return None
