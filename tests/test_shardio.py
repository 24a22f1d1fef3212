"""builder.core.shardio.ShardIndex on real shards written by the builder: sizes derived from the array's
shapes, crc32c checked, and the one parser that decode_shard, validate --deep and the virtual writer use."""
from __future__ import annotations

import json
import math

import google_crc32c
import numpy as np
import pytest
import zarr

from builder.core.shardio import CRC_BYTES, ENTRY_BYTES, ShardIndex, chunk_grid, open_chunk
from builder.arrayfiles import ShardedArrayFiles
from test_contract import REPO, imports


def _shard(store, name="embeddings"):
    """(array dir, shard file, (sr, sc), chunk grid) of the largest shard of utm30/<name>."""
    adir = store / "utm30" / name
    meta = json.loads((adir / "zarr.json").read_text())
    shard_shape = meta["chunk_grid"]["configuration"]["chunk_shape"]
    chunk_shape = meta["codecs"][0]["configuration"]["chunk_shape"]
    path = max((p for p in (adir / "c").rglob("*") if p.is_file()), key=lambda p: p.stat().st_size)
    sr, sc = (int(x) for x in path.relative_to(adir / "c").parts[:2])
    return adir, path, (sr, sc), chunk_grid(shard_shape, chunk_shape)


@pytest.mark.parametrize("name", ["embeddings", "scales"])
def test_index_of_a_built_shard(store, name):
    adir, path, _, grid = _shard(store, name)
    buf = path.read_bytes()
    index = ShardIndex.read(buf, grid, google_crc32c.value)
    n = math.prod(grid)
    assert ShardIndex.nbytes(grid) == ENTRY_BYTES * n + CRC_BYTES
    assert index.table.shape == (n, 2) and index.data_end == len(buf) - ShardIndex.nbytes(grid)
    chunks = index.chunks()
    assert chunks, "the largest shard holds data"
    # The builder writes the stored chunks back to back from offset 0, in C order, then the index.
    assert [off for _, off, _ in chunks] == [0, *np.cumsum([ln for _, _, ln in chunks])[:-1].tolist()]
    assert chunks[-1][1] + chunks[-1][2] == index.data_end
    for _, off, ln in chunks:  # every inner chunk carries its own crc32c
        open_chunk(buf[off:off + ln], google_crc32c.value)
    assert index.coord(chunks[-1][0]) == tuple(int(x) for x in np.unravel_index(chunks[-1][0], grid))
    assert ShardIndex.encode(index.table, google_crc32c.value) == buf[-ShardIndex.nbytes(grid):]
    assert ShardIndex.read(buf[-ShardIndex.nbytes(grid):], grid, google_crc32c.value).chunks() == chunks


def test_decode_matches_zarr_python(store):
    adir, _, (sr, sc), _ = _shard(store)
    files = ShardedArrayFiles(adir)
    s0, s1 = files.shard_shape[:2]
    ours = files.read(sr, sc)
    theirs = zarr.open_array(adir, mode="r")[sr * s0:(sr + 1) * s0, sc * s1:(sc + 1) * s1]
    assert np.array_equal(ours, theirs)


@pytest.mark.parametrize("name", ["embeddings", "scales", "rgb"])
def test_read_region_of_a_few_chunks_matches_zarr_python(store, name):
    """read_region decodes only the inner chunks a window touches (decode_window): unaligned windows, inside
    one shard and across shard edges, equal zarr-python's reads (NaN where it reads NaN)."""
    adir = store / "utm30" / name
    files = ShardedArrayFiles(adir)
    arr = zarr.open_array(adir, mode="r")
    h, w = arr.shape[:2]
    assert h > 520 and w > 200, "the windows below cross shard edges"
    for r0, r1, c0, c1 in [(0, 1, 0, 1), (3, 9, 5, 6), (250, 262, 129, 200), (509, 520, 1, w - 3), (1, h - 2, 2, w - 1),
                           (h - 5, h, w - 7, w)]:
        ours, theirs = files.read_region(r0, r1, c0, c1), arr[r0:r1, c0:c1]
        assert ours.shape == theirs.shape
        np.testing.assert_array_equal(ours, theirs)


def test_corrupt_or_short_index_is_refused(store):
    _, path, _, grid = _shard(store)
    buf = bytearray(path.read_bytes())
    buf[-ShardIndex.nbytes(grid)] ^= 0x01  # the first index entry's low byte
    with pytest.raises(ValueError, match="checksum mismatch"):
        ShardIndex.read(bytes(buf), grid, google_crc32c.value)
    ShardIndex.read(bytes(buf), grid, None)  # parsed, not checked, when no checksum function is given
    with pytest.raises(ValueError, match="shorter than its index"):
        ShardIndex.read(bytes(buf[-ShardIndex.nbytes(grid) + 1:]), grid, google_crc32c.value)


def test_shardio_is_pure():
    """Like the browser core: stdlib and numpy only (the codecs are passed in)."""
    import sys
    for imp in imports(REPO / "builder" / "core" / "shardio.py"):
        top = imp.split(".")[0]
        assert top in sys.stdlib_module_names or top in ("numpy", "__future__"), imp
