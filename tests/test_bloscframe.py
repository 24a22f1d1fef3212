"""builder.bloscframe writes c-blosc's own bytes: every frame is compared byte for byte with numcodecs'
blosc.compress of the same chunk (the c-blosc 1 the rest of the ecosystem calls), and decoded by it."""
from __future__ import annotations

import json

import google_crc32c
import numpy as np
import pytest
from numcodecs import blosc

from builder.bloscframe import RowCompressor, bitshuffle_rows, decompress
from builder.core.shardio import ShardIndex, chunk_grid, open_chunk


def _c_blosc(rows: np.ndarray, cfg: dict) -> list[bytes]:
    shuffle = {"noshuffle": 0, "shuffle": 1, "bitshuffle": 2}[cfg["shuffle"]]
    return [bytes(blosc.compress(np.ascontiguousarray(r), cfg["cname"].encode(), cfg["clevel"], shuffle, 0))
            for r in rows]


def _cfg(cname="zstd", clevel=3, shuffle="bitshuffle"):
    return {"cname": cname, "clevel": clevel, "shuffle": shuffle, "blocksize": 0, "typesize": 1}


def _embedding_like(n: int, m: int, seed: int = 0) -> np.ndarray:
    """int8 rows with about an embedding's spread: normal around 0 (sd 20), clipped to the int8 range."""
    rng = np.random.default_rng(seed)
    return np.clip(np.round(rng.normal(0, 20, (n, m))), -127, 127).astype(np.int8)


def test_bitshuffle_of_bytes_matches_a_bit_by_bit_transpose():
    rows = np.random.default_rng(1).integers(0, 256, (5, 64), dtype=np.uint8)
    bits = np.unpackbits(rows, bitorder="little").reshape(5, 64, 8)  # [row, element, bit]
    want = np.packbits(bits.transpose(0, 2, 1), axis=2, bitorder="little").reshape(5, 64)  # plane b: bit b of each
    np.testing.assert_array_equal(bitshuffle_rows(rows), want)


@pytest.mark.parametrize("clevel", [1, 3, 8])
@pytest.mark.parametrize("shuffle", ["bitshuffle", "noshuffle"])
@pytest.mark.parametrize("m", [128, 136, 2048, 8192, 32760])
def test_frames_are_c_blosc_bytes(clevel, shuffle, m):
    rows = np.concatenate([_embedding_like(6, m, seed=m), np.zeros((1, m), np.int8),
                           np.full((1, m), -7, np.int8)])
    cfg = _cfg(clevel=clevel, shuffle=shuffle)
    ours = RowCompressor(cfg).rows(rows)
    assert ours == _c_blosc(rows, cfg)
    for frame, row in zip(ours, rows):
        assert blosc.decompress(frame) == row.tobytes()


@pytest.mark.parametrize("cfg,rows", [
    (_cfg(), np.random.default_rng(2).integers(-128, 128, (4, 2048), dtype=np.int8)),  # incompressible: stored
    (_cfg(), _embedding_like(3, 64)),                                                   # under 128 bytes: copied
    (_cfg(), _embedding_like(2, 32768)),                                                # L1 and over: several blocks
    (_cfg(), _embedding_like(3, 132)),                                                  # bitshuffle of 132 bytes
    (_cfg(clevel=9), _embedding_like(3, 2048)),                                         # zstd's highest level
    (_cfg(shuffle="shuffle"), _embedding_like(3, 2048)),
    (_cfg(cname="lz4"), _embedding_like(3, 2048)),
    (_cfg(), _embedding_like(3, 512).view(np.float32)),                                 # 4-byte elements
])
def test_every_other_case_is_c_blosc_too(cfg, rows):
    assert RowCompressor(cfg).rows(rows) == _c_blosc(rows, cfg)


def _scales_like(n: int, seed: int = 0) -> np.ndarray:
    """(n, 16) float32 rows as a scales array's 4x4-px chunks hold them: positive scales, some NaN (no data)."""
    rng = np.random.default_rng(seed)
    rows = rng.uniform(0.001, 0.2, (n, 16)).astype(np.float32)
    rows[rng.random((n, 16)) < 0.3] = np.nan
    rows[0] = np.nan
    return rows


def _interleaved(m: int) -> np.ndarray:
    """int8 rows of m bytes that do not compress (uniform), between rows that do (embedding-like, zeros)."""
    rng = np.random.default_rng(m)
    rows = [rng.integers(-128, 128, (1, m), dtype=np.int8) if k % 3 else _embedding_like(1, m, seed=k) for k in range(30)]
    return np.concatenate([*rows, np.zeros((1, m), np.int8), rng.integers(-128, 128, (2, m), dtype=np.int8)])


@pytest.mark.parametrize("cfg,rows", [
    (_cfg(shuffle="shuffle"), _scales_like(40)),                                              # scales: 64 bytes
    (_cfg(), np.random.default_rng(3).integers(0, 256, (40, 64), dtype=np.uint8)),           # rgb previews
    (_cfg(clevel=9, shuffle="noshuffle"), np.random.default_rng(4).integers(0, 256, (5, 127), dtype=np.uint8)),
    (_cfg(cname="lz4", shuffle="shuffle"), _scales_like(5, seed=1)[:, :8].astype(np.float64)),  # 8-byte elements
    (_cfg(), np.zeros((3, 1), np.int8)),
    (_cfg(), _interleaved(2048)),                                                             # embeddings, 4x4 px
    (_cfg(clevel=1, shuffle="noshuffle"), _interleaved(136)),
])
def test_chunks_c_blosc_copies_are_its_bytes(cfg, rows):
    """c-blosc copies a chunk under 128 bytes, or one that does not compress, behind a header: the frames built
    here from the header of its first such frame are its bytes, chunk for chunk (values, NaNs, element sizes,
    settings, and copied chunks between compressed ones vary)."""
    ours = RowCompressor(cfg).rows(rows)
    assert ours == _c_blosc(rows, cfg)
    assert [decompress(f) for f in ours] == [r.tobytes() for r in rows]


def test_the_builders_embeddings_shard_holds_c_blosc_bytes(store):
    """Every inner chunk of a built shard, decoded and compressed again by numcodecs, is the stored chunk."""
    adir = store / "utm30" / "embeddings"
    meta = json.loads((adir / "zarr.json").read_text())
    sharding = meta["codecs"][0]["configuration"]
    cfg = next(c for c in sharding["codecs"] if c["name"] == "blosc")["configuration"]
    assert (cfg["cname"], cfg["shuffle"]) == ("zstd", "bitshuffle")
    path = max((p for p in (adir / "c").rglob("*") if p.is_file()), key=lambda p: p.stat().st_size)
    buf = path.read_bytes()
    grid = chunk_grid(meta["chunk_grid"]["configuration"]["chunk_shape"], sharding["chunk_shape"])
    chunks = ShardIndex.read(buf, grid, google_crc32c.value).chunks()
    assert len(chunks) > 100
    for _, off, ln in chunks:
        stored = open_chunk(buf[off:off + ln], google_crc32c.value)
        raw = np.frombuffer(blosc.decompress(stored), dtype=np.int8)
        assert stored == _c_blosc(raw[None], cfg)[0]


@pytest.mark.parametrize("m", [1, 64, 127, 128, 2048])
def test_decompress_reads_stored_and_compressed_frames(m):
    """Under 128 bytes c-blosc stores a chunk uncompressed (read here by slicing); from 128 it compresses."""
    for shuffle in ("noshuffle", "shuffle", "bitshuffle"):
        for row in (_embedding_like(1, m)[0], np.arange(m, dtype=np.uint8)):
            frame = _c_blosc(row[None], _cfg(shuffle=shuffle))[0]
            assert decompress(frame) == row.tobytes() == decompress(memoryview(frame))
    assert decompress(_c_blosc(np.ones((1, 16), np.float32), _cfg(shuffle="shuffle"))[0]) == np.ones(16, np.float32).tobytes()

