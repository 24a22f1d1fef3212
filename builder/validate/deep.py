"""--deep: every chunk file of the zone arrays (overviews included) and the global_rgb levels, and each array's
record of the chunks or shards that exist (builder/core/chunkruns.py) against its files.

Each inner chunk of a shard is checked against its crc32c (written at build
time, the Zarr v3 `crc32c` codec after Blosc) and decoded; chunks without a
crc32c (global_rgb levels, stores built before checksums) can only be
decoded, which catches most but not all corruption.
"""
from __future__ import annotations

import struct

import numpy as np
from zarr.core.sync import sync

from builder.core import convention as conv
from builder.core.shardio import ShardIndex, has_chunk_crc, open_chunk
from builder.validate.documents import CHUNK_BYTES_MAX, LEVELS_MAX, PROTO, SHARD_BYTES_MAX, Reader, mib, plain_key
from builder.validate.nodes import Array, open_array


def _blosc_nbytes(raw: bytes) -> int | None:
    """Decoded size declared by a Blosc frame's header (bytes 4..8, little endian), None if no header."""
    return struct.unpack_from("<I", raw, 4)[0] if len(raw) >= 16 else None


def _decode_inner(raw: bytes, crc: bool, blosc: bool, nbytes: int, crc32c, decompress) -> str | None:
    """None when an inner chunk's bytes check out, else what is wrong with them."""
    if crc:
        try:
            raw = open_chunk(raw, crc32c)
        except ValueError as e:
            return str(e)
    if blosc:
        declared = _blosc_nbytes(raw)
        if declared != nbytes:
            return f"Blosc header declares {declared} decoded bytes, expected {nbytes} (corrupt data)"
        try:
            raw = decompress(raw)
        except Exception as e:
            return f"does not decode ({type(e).__name__}: {e})"
    if len(raw) != nbytes:
        return f"decodes to {len(raw)} bytes, expected {nbytes} (corrupt data)"
    return None


def _chain(names: list) -> tuple[bool, bool] | None:
    """(blosc?, crc32c?) for the inner codec chains the builder writes: bytes [, blosc] [, crc32c]."""
    names = list(names)
    crc = has_chunk_crc({"codecs": [{"name": n} for n in names]})
    if crc:
        names = names[:-1]
    blosc = bool(names) and names[-1] == "blosc"
    if blosc:
        names = names[:-1]
    return (blosc, crc) if names == ["bytes"] else None


def _files(reader: Reader, a: Array) -> list[str]:
    """The array's chunk (or shard) files, sorted."""
    async def keys():
        return sorted([k async for k in reader.store.list_prefix(f"{a.path}/c/")])
    return sync(keys())


def _deep_array(reader: Reader, a: Array, stats: dict, files: list[str]) -> list[str]:
    import google_crc32c
    import numcodecs
    decompress = numcodecs.Blosc().decode
    crc32c = google_crc32c.value
    sharded = a.sharding is not None
    inner = a.sharding.get("codecs", []) if sharded else a.doc.get("codecs", [])
    chain = _chain([c.get("name") for c in inner if isinstance(c, dict)])
    if chain is None:
        return [f"{a.path}: codecs {[c.get('name') for c in inner if isinstance(c, dict)]} are not "
                "checked by --deep (it reads bytes [, blosc] [, crc32c])"]
    blosc, crc = chain
    nbytes = int(np.prod(a.chunks, dtype=object)) * a.dtype.itemsize
    if nbytes > CHUNK_BYTES_MAX:
        return [f"{a.path}: inner chunks {a.chunks} of {nbytes} bytes, too large to check "
                f"(--deep decodes at most {mib(CHUNK_BYTES_MAX)} per chunk)"]
    grid = tuple(s // c for s, c in zip(a.shards, a.chunks)) if sharded else None
    index_bytes = ShardIndex.nbytes(grid) if sharded else 0
    probs: list[str] = []
    for key in files:
        try:
            size = sync(reader.store.getsize(key))
        except FileNotFoundError:
            continue
        if size > SHARD_BYTES_MAX:
            probs.append(f"{key}: {size} bytes, too large to check (--deep reads at most {mib(SHARD_BYTES_MAX)})")
            continue
        if sharded and size < index_bytes:
            probs.append(f"{key}: {size} bytes is shorter than its shard index ({index_bytes} bytes)")
            continue
        buf = sync(reader.store.get(key, PROTO)).to_bytes()
        stats["files"] = stats.get("files", 0) + 1
        if not sharded:
            stats["chunks"] = stats.get("chunks", 0) + 1
            bad = _decode_inner(buf, crc, blosc, nbytes, crc32c, decompress)
            if bad:
                probs.append(f"{key}: {bad}")
            continue
        try:
            index = ShardIndex.read(buf, grid, crc32c)
        except ValueError as e:
            probs.append(f"{key}: {e}")
            continue
        end = index.data_end
        bad_chunks = []
        view = memoryview(buf)
        for i, off, ln in index.chunks():
            stats["chunks"] = stats.get("chunks", 0) + 1
            if off + ln > end:
                bad_chunks.append((i, f"bytes {off}..{off + ln} run past the chunk data ({end} bytes)"))
                continue
            bad = _decode_inner(bytes(view[off:off + ln]), crc, blosc, nbytes, crc32c, decompress)
            if bad:
                bad_chunks.append((i, bad))
        if bad_chunks:
            i, what = bad_chunks[0]
            coord = index.coord(i)
            more = f"; {len(bad_chunks) - 1} more corrupt inner chunks in this shard" if len(bad_chunks) > 1 else ""
            probs.append(f"{key}: inner chunk {coord}: {what}{more}")
    if sharded and not crc and files:
        probs.append(f"{a.path}: inner chunks carry no crc32c checksum; --deep decoded them "
                     f"({len(files)} shards) but cannot verify them")
    return probs


def check_chunks(reader: Reader, zones: list[str], stats: dict) -> list[str]:
    """Every chunk file of the zones' sharded arrays and of the global_rgb levels."""
    from builder.validate.overviews import deep_sample, overview_paths
    from builder.validate.records import record_problems
    paths = [f"{zone}/{aname}" for zone in zones for aname, spec in conv.ZONE_ARRAYS.items() if spec["sharded"]]
    paths += [p for zone in zones for p in overview_paths(reader, zone)]
    g = reader.node(conv.GLOBAL_GROUP)
    ms = g.get("attributes", {}).get("multiscales") if isinstance(g, dict) and isinstance(g.get("attributes"), dict) else None
    layout = ms.get("layout") if isinstance(ms, dict) else None
    levels = [f"{conv.GLOBAL_GROUP}/{item['asset']}/rgb" for item in (layout if isinstance(layout, list) else [])[:LEVELS_MAX]
              if isinstance(item, dict) and plain_key(item.get("asset"))]
    probs: list[str] = []
    for path in paths + levels:
        a = open_array(reader, path, probs)
        if isinstance(a, Array):
            files = _files(reader, a)
            probs += _deep_array(reader, a, stats, files)
            probs += record_problems(a, files)  # its record of the chunks that exist (if any), against the files
    if not probs:  # values are compared only where every chunk decodes
        for zone in zones:
            probs += deep_sample(reader, zone)
    return probs
