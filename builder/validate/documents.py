"""Bounded, cached reading of a store's zarr.json documents, and the validator's own bounds (those the
reader shares, and the rule for one JSON document, are builder/core/bounds.py's).

The store may be hostile: its metadata is read with the bounds below, never
followed outside the store, and never trusted for an allocation.  A bound that
stops a check is itself reported ("... too large to check"), so a store the
validator could not fully check never passes.
"""
from __future__ import annotations

from typing import Any

from zarr.abc.store import RangeByteRequest
from zarr.core.buffer import default_buffer_prototype
from zarr.core.sync import sync

from builder.core.bounds import CHUNK_BYTES_MAX, COORD_VALUES_MAX  # noqa: F401  (the validator's too: deep.py, nodes.py)
from builder.core.bounds import NODE_JSON_MAX, ROOT_JSON_MAX, MetadataError, mib, parse_json

# Bounds on what the validator reads (documented in docs/guarantees.md, "Validate"); those a reader
# shares are builder/core/bounds.py's.
METADATA_TOTAL_MAX = 64 * 2**20  # all zarr.json documents of a store together
NODES_MAX = 10_000               # consolidated entries, and children listed per group
LEVELS_MAX = 64                  # global_rgb multiscales levels
COORD_CHUNKS_MAX = 1024          # chunks read from one coordinate array
SHARD_BYTES_MAX = 1 * 2**30      # one shard or chunk file read by --deep

MISSING = object()
PROTO = default_buffer_prototype()


def plain_key(key: Any) -> bool:
    """A store key that stays inside the store: relative, '/'-separated, no '', '.' or '..' part."""
    if not isinstance(key, str) or not key or "\\" in key or "\0" in key:
        return False
    return all(part not in ("", ".", "..") for part in key.split("/"))


class Reader:
    """Bounded, cached reads of one store's zarr.json documents.  A document that cannot be used is
    reported once (naming its key) and read as None; an absent one as MISSING."""

    def __init__(self, store, probs: list[str]):
        self.store = store
        self.probs = probs
        self.cache: dict[str, Any] = {}
        self.total = 0
        self.over_total = False

    def node(self, path: str) -> Any:
        key = f"{path}/zarr.json" if path else "zarr.json"
        if key not in self.cache:
            doc, problem = self._load(key, NODE_JSON_MAX if path else ROOT_JSON_MAX)
            self.cache[key] = doc
            if problem:
                self.probs.append(problem)
        return self.cache[key]

    def _load(self, key: str, limit: int):
        try:
            size = sync(self.store.getsize(key))
        except FileNotFoundError:
            return MISSING, None
        except Exception:  # a store that cannot tell sizes: the ranged read below still bounds it
            size = None
        if size is not None and size > limit:
            return None, f"{key}: {size} bytes, larger than the {mib(limit)} read of such a document (not read)"
        if self.total + (size or limit) > METADATA_TOTAL_MAX:
            if not self.over_total:
                self.over_total = True
                return None, (f"{key}: the store's metadata exceeds {mib(METADATA_TOTAL_MAX)} in total; "
                              "this and further documents are not checked")
            return None, None
        try:
            buf = sync(self.store.get(key, PROTO, byte_range=RangeByteRequest(0, limit + 1)))
        except Exception as e:
            return None, f"{key}: cannot be read ({type(e).__name__}: {e})"
        if buf is None:
            return MISSING, None
        raw = buf.to_bytes()
        self.total += len(raw)
        try:
            return parse_json(raw, key, limit), None
        except MetadataError as e:
            return None, str(e)

    def children(self, path: str) -> list[str]:
        async def ls():
            out = []
            async for name in self.store.list_dir(path):
                out.append(name)
                if len(out) > NODES_MAX:
                    break
            return out
        try:
            names = sync(ls())
        except Exception:
            return []
        if len(names) > NODES_MAX:
            self.probs.append(f"{path or 'root'}: more than {NODES_MAX} entries; only the first {NODES_MAX} are checked")
        return sorted(n for n in names[:NODES_MAX] if plain_key(n) and n != "zarr.json")
