"""What the checks need of one node: its attributes against a schema and the registrations, its array
metadata (parsed by zarr-python), and the values of a 1-D coordinate array, read within the bounds."""
from __future__ import annotations

import jsonschema
import zarr
from zarr.core.sync import sync

from builder.core import convention as conv
from builder.validate.documents import COORD_CHUNKS_MAX, COORD_VALUES_MAX, MISSING, Reader


def schema_problems(attrs: dict, schema: dict, where: str) -> list[str]:
    return conv.schema_problems(jsonschema, attrs, schema, where)  # the explorer's check too


def registration_problems(attrs: dict, required, where: str) -> list[str]:
    return [f"{where}: convention {name!r} is not registered in zarr_conventions (uuid, schema_url, spec_url)"
            for name in conv.registered(attrs, required)]


def node_attrs(doc: dict, where: str, probs: list[str]) -> dict:
    attrs = doc.get("attributes", {})
    if not isinstance(attrs, dict):
        probs.append(f"{where}: attributes is not a JSON object")
        return {}
    return attrs


class Array:
    """What the checks need of one array's zarr.json (parsed by zarr-python, which validates it)."""

    def __init__(self, path: str, doc: dict):
        from zarr.codecs import ShardingCodec
        from zarr.core.metadata.v3 import ArrayV3Metadata
        self.path, self.doc = path, doc
        self.meta = ArrayV3Metadata.from_dict(dict(doc))
        self.shape = tuple(int(s) for s in self.meta.shape)
        self.dtype = self.meta.dtype.to_native_dtype()
        self.fill_value = self.meta.fill_value
        self.dims = list(self.meta.dimension_names or [])
        grid = tuple(int(c) for c in self.meta.chunk_grid.chunk_shape)
        first = self.meta.codecs[0] if self.meta.codecs else None
        if isinstance(first, ShardingCodec):
            self.shards, self.chunks = grid, tuple(int(c) for c in first.chunk_shape)
            self.sharding = doc["codecs"][0].get("configuration", {})
        else:
            self.shards, self.chunks, self.sharding = None, grid, None
        self.codec_names = [c.get("name") for c in doc.get("codecs", []) if isinstance(c, dict)]


def open_array(reader: Reader, path: str, probs: list[str]):
    doc = reader.node(path)
    if doc is MISSING or doc is None:
        return doc
    if doc.get("node_type") != "array":
        return MISSING
    try:
        return Array(path, doc)
    except Exception as e:  # zarr-python's own validation of the document
        probs.append(f"{path}/zarr.json: invalid Zarr v3 array metadata ({type(e).__name__}: {e})")
        return None


def coord_values(reader: Reader, a: Array, probs: list[str]):
    """The values of a 1-D coordinate array, or None (with the reason reported) when they are not read:
    more values or chunks than the bounds, compressed, or unreadable."""
    n = a.shape[0] if len(a.shape) == 1 else None
    if n is None:
        return None
    if n > COORD_VALUES_MAX:
        probs.append(f"{a.path}: shape ({n},) too large to check (the validator reads at most "
                     f"{COORD_VALUES_MAX} coordinate values)")
        return None
    chunk = a.shards[0] if a.shards else a.chunks[0]
    nchunks = -(-n // max(chunk, 1))
    if nchunks > COORD_CHUNKS_MAX:
        probs.append(f"{a.path}: {nchunks} chunks of {chunk} values, too many to check (the validator reads "
                     f"at most {COORD_CHUNKS_MAX} chunks of a coordinate array)")
        return None
    if a.codec_names != ["bytes"]:
        return None  # compressed or sharded: reported as such; a compressed chunk's size says nothing
    limit = chunk * a.dtype.itemsize
    try:
        arr = zarr.open_array(reader.store, path=a.path, mode="r", zarr_format=3)
        for i in range(nchunks):
            key = "/".join([a.path, *arr.metadata.encode_chunk_key((i,)).split("/")])
            try:
                size = sync(reader.store.getsize(key))
            except FileNotFoundError:
                continue
            if size > limit:
                probs.append(f"{key}: {size} bytes, more than the {limit} bytes of an uncompressed chunk (not read)")
                return None
        return arr[:]
    except Exception as e:  # a chunk that does not match its codec
        probs.append(f"{a.path}: cannot read values ({type(e).__name__}: {e})")
        return None
