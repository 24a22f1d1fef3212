"""Zarr v3 layout of a year store: creating zone groups and their arrays.

zarr-python does the format work (sharding codec, Blosc, metadata); this
module only decides shapes, codecs and attributes from the convention.  The
store is a builder.sink.Sink: zarr's LocalStore writes each key to a temporary
file and renames it into place, an object store takes each key in one PUT, so a
key is either absent or complete, never half-written.
"""
from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Callable

import numpy as np
import jsonschema
import zarr
from zarr.codecs import BloscCodec, Crc32cCodec

from builder.core import convention as conv
from builder.core.describe import TESSERA, StoreError, describe
from builder.errors import BuildError
from builder.core.chunkruns import STORE_RUNS_MAX
from builder.core.grid import ZoneGrid
from builder.recordbudget import fit
from builder.sink import Sink

SHARDED = ("embeddings", "scales", "rgb")  # written a shard at a time, each recording its shards (chunkrecord)


@dataclass(frozen=True)
class Layout:
    shard: int = conv.SHARD
    chunk: int = conv.CHUNK
    cname: str = "zstd"
    clevel: int = 3

    def compressor(self, dtype: str) -> BloscCodec:
        # Bit-shuffling int8/uint8 groups the slowly varying high bits of neighbouring
        # values (measured on demo shards: 1.15x vs 1.03x with byte shuffle); byte
        # shuffle suits the float32 scales.
        shuffle = "bitshuffle" if np.dtype(dtype).itemsize == 1 else "shuffle"
        return BloscCodec(cname=self.cname, clevel=self.clevel, shuffle=shuffle)


def read_root(sink: Sink) -> dict | None:
    """The root zarr.json of the group at `sink`, or None when there is no group there."""
    raw = sink.get("zarr.json")
    if raw is None:
        return None
    where = f"{sink}/zarr.json"
    try:
        doc = json.loads(raw)
    except ValueError:
        raise BuildError("zarr.json is not valid JSON", where) from None
    if not isinstance(doc, dict) or doc.get("zarr_format") != 3 or doc.get("node_type") != "group":
        raise BuildError("not a Zarr v3 group", where)
    return doc


def open_year(sink: Sink, year: int) -> zarr.Group:
    """Open or create the root group of a year store, refusing any other dataset (the root read by
    builder/core/describe.py, so a bad root is the same one line as everywhere else)."""
    doc = read_root(sink)
    if doc is None:
        if not sink.is_empty():
            raise BuildError("target exists and is not a Zarr store; refusing to write into it", str(sink))
        sink.prepare()
        # Attributes in the same write as the group: a kill can never leave an unmarked root behind.
        return zarr.open_group(sink.zarr_store(), mode="w", zarr_format=3, attributes=conv.root_attrs(year))
    sink.prepare()
    try:
        info = describe(doc, str(sink), jsonschema=jsonschema)
    except StoreError as e:
        if e.kind == "version":
            raise BuildError(f"store has tessera:dataset_version={e.version!r:.80}; this builder writes "
                             f"{conv.DATASET_VERSION!r} and will not mix them", str(sink)) from None
        raise BuildError(str(e)) from None  # names the store already
    if info.kind != TESSERA:
        raise BuildError(f"not a tessera: v1 year store but a {info.kind} root; refusing to write into it", str(sink))
    if info.year != year:
        raise BuildError(f"store is for year {info.year}, not {year}", str(sink))
    return zarr.open_group(sink.zarr_store(), mode="r+", zarr_format=3, use_consolidated=False)


def consolidate(sink: Sink, runs_max: int = STORE_RUNS_MAX) -> None:
    """Inline every child's metadata into the root zarr.json (zarr-python's v3 consolidated
    metadata), so a browser learns the zones and arrays of a store from one request, with the arrays' records
    of their chunks within `runs_max` runs (builder/recordbudget.py).  The build's last write: the store's commit
    point."""
    fit(sink, runs_max)
    zarr.consolidate_metadata(sink.zarr_store())


def _sharded(group: zarr.Group, name: str, shape: tuple[int, ...], dtype: str, fill, layout: Layout,
             dims: list[str]) -> zarr.Array:
    tail = shape[2:]
    return group.create_array(
        name, shape=shape, dtype=dtype, fill_value=fill,
        shards=(layout.shard, layout.shard, *tail), chunks=(layout.chunk, layout.chunk, *tail),
        # crc32c after Blosc: every inner chunk carries its checksum (validate --deep, zarr-python, tensorstore)
        compressors=[layout.compressor(dtype), Crc32cCodec()], dimension_names=dims, overwrite=True,
        config={"write_empty_chunks": False})


def write_coords(group: zarr.Group, grid: ZoneGrid, n_bands: int) -> None:
    """The three coordinate arrays: uncompressed, unsharded, one chunk each."""
    for name, values in (("easting", conv.easting_coords(grid.origin_e, grid.width)),
                         ("northing", conv.northing_coords(grid.origin_n, grid.height)),
                         ("band", np.arange(n_bands, dtype=np.int32))):
        spec = conv.ZONE_ARRAYS[name]
        arr = group.create_array(name, shape=values.shape, dtype=spec["dtype"], chunks=values.shape,
                                 compressors=None, filters=None, fill_value=0,
                                 dimension_names=spec["dims"], overwrite=True)
        arr[:] = values


def write_group(sink: Sink, fill: Callable[[zarr.Group], None]) -> None:
    """Replace whatever is at `sink` with the group `fill(group)` makes: composed in memory by zarr-python, then
    written in one batch (concurrently on an object store, where each of its documents would otherwise cost a
    round trip or three through zarr's store calls), the group's own zarr.json last."""
    docs: dict = {}
    fill(zarr.open_group(zarr.storage.MemoryStore(docs), mode="w", zarr_format=3))
    root = docs.pop("zarr.json")
    sink.delete_all()
    sink.write_many({key: buf.to_bytes() for key, buf in sorted(docs.items())})
    sink.write("zarr.json", root.to_bytes())


def create_zone(zone: Sink, grid: ZoneGrid, n_bands: int, rgb: bool, layout: Layout,
                extra: Callable[[zarr.Group, ZoneGrid], None] | None = None) -> None:
    """The zone group at `zone` with its arrays, and what `extra(group, grid)` adds to it (the overviews),
    replacing whatever a killed creation left there (`write_group`)."""
    def fill(g: zarr.Group) -> None:
        h, w = grid.height, grid.width
        for name, shape in (("embeddings", (h, w, n_bands)), ("scales", (h, w)), ("rgb", (h, w, 4))):
            if name == "rgb" and not rgb:
                continue
            spec = conv.ZONE_ARRAYS[name]
            _sharded(g, name, shape, spec["dtype"], spec["fill"], layout, spec["dims"])
        write_coords(g, grid, n_bands)
        if extra is not None:
            extra(g, grid)
    write_group(zone, fill)


def resize_zone(group: zarr.Group, grid: ZoneGrid, n_bands: int) -> None:
    for name in SHARDED:
        if name in group:
            arr = group[name]
            arr.resize((grid.height, grid.width, *arr.shape[2:]))
    write_coords(group, grid, n_bands)


def move_shards(src: Sink, dst: Sink, dr: int, dc: int) -> None:
    """Move every shard object of the array at src to the array at dst, shifted by (dr, dc) shards.  Idempotent:
    a killed move is finished by moving again."""
    for key in src.keys("c"):
        parts = key.split("/")
        src.move(key, dst, "/".join(["c", str(int(parts[1]) + dr), str(int(parts[2]) + dc), *parts[3:]]))
    src.delete_all("c")
