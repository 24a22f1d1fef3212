"""Corrupt bytes in real Chromium: an inner chunk or a shard index whose crc32c does not match is an error naming
it, never a value, a similarity, a tool result or an export (app/js/checksums.js, the bridge's crc32c codec).

Each test copies the demo's 2024 store, corrupts bytes of one shard file (located through the shard index at the
shard's end, read here with builder.core.shardio and google_crc32c, not with the code under test) so that Blosc still
decodes them to other values, serves it, and drives the explorer at it.
"""
from __future__ import annotations

import json
import shutil
from pathlib import Path

import google_crc32c
import numcodecs
import numpy as np
import pytest

from browser_util import all_text, model_data, wait_text
from builder.core.shardio import EMPTY, ShardIndex, chunk_grid
from test_browser import interior_valid, open_app, pixel_lonlat, truth

pytestmark = pytest.mark.browser
CRC_BYTES = 4


def copy_store(site: Path, name: str) -> Path:
    dst = site / "data" / "corrupt" / name
    if dst.exists():
        shutil.rmtree(dst)
    shutil.copytree(site / "data" / "2024.zarr", dst)
    return dst


class Shard:
    """The shard file of `array` that holds pixel (row, col), its index, and where that pixel's inner chunk lies."""

    def __init__(self, store: Path, zone: str, array: str, row: int, col: int):
        meta = json.loads((store / zone / array / "zarr.json").read_text())
        cfg = meta["codecs"][0]["configuration"]
        assert meta["codecs"][0]["name"] == "sharding_indexed" and cfg["codecs"][-1]["name"] == "crc32c"
        assert cfg["index_codecs"][-1]["name"] == "crc32c"
        self.shard_shape = meta["chunk_grid"]["configuration"]["chunk_shape"]
        self.chunk_shape = cfg["chunk_shape"]
        self.grid = chunk_grid(tuple(self.shard_shape), tuple(self.chunk_shape))
        self.shard = (row // self.shard_shape[0], col // self.shard_shape[1], 0)
        self.path = store / zone / array / "c" / "/".join(map(str, self.shard))
        self.buf = bytearray(self.path.read_bytes())
        self.index = ShardIndex.read(bytes(self.buf), self.grid, google_crc32c.value)  # its crc32c checked
        self.chunk = (row // self.chunk_shape[0], col // self.chunk_shape[1], 0)  # in the whole array's grid of chunks
        inner = (self.chunk[0] % self.grid[0], self.chunk[1] % self.grid[1], 0)
        self.linear = int(np.ravel_multi_index(inner, self.grid))
        self.offset, self.length = (int(x) for x in self.index.table[self.linear])
        self.pos = (row % self.chunk_shape[0]) * self.chunk_shape[1] + col % self.chunk_shape[1]  # pixel in the chunk

    def pixel_of(self, raw: bytes) -> np.ndarray:
        """The pixel's int8 vector in an inner chunk's bytes (Blosc after the crc32c is taken off, as numcodecs reads)."""
        data = np.frombuffer(numcodecs.Blosc().decode(raw[:-CRC_BYTES]), dtype=np.int8)
        return data.reshape(-1, self.chunk_shape[2])[self.pos]

    def chunk_bytes(self) -> bytes:
        return bytes(self.buf[self.offset:self.offset + self.length])

    def write(self) -> None:
        self.path.write_bytes(bytes(self.buf))


def corrupt_chunk(shard: Shard, n: int = 100) -> np.ndarray:
    """XOR `n` bytes inside the pixel's inner chunk (its crc32c left as it was), at the first place where Blosc
    still decodes the chunk and the pixel's vector changes: corruption no decoder would notice. Returns the vector
    the corrupt bytes decode to."""
    good = shard.chunk_bytes()
    want = shard.pixel_of(good)
    for start in range(32, shard.length - CRC_BYTES - n, 16):
        bad = bytearray(good)
        bad[start:start + n] = bytes(b ^ 0x5A for b in bad[start:start + n])
        try:
            got = shard.pixel_of(bytes(bad))
        except Exception:  # noqa: BLE001 (Blosc noticed: not the silent corruption wanted here)
            continue
        if (got != want).sum() > 8:
            shard.buf[shard.offset:shard.offset + shard.length] = bad
            shard.write()
            return got
    raise AssertionError("no 100-byte window of the chunk decodes to other values")


def status_line(page) -> str:
    return page.evaluate("""async () => await window.tesseraWorker.python(`
import gc
from app.session import Explorer
next(str(o.status) for o in gc.get_objects() if isinstance(o, Explorer))`)""")


def spectrum_labels(page) -> list:
    return model_data(page, "spectrum-source")["label"]


def rejection(page, js: str, arg=None) -> str:
    """The one line a tesseraApi call (`js`: an async function of `arg`) rejects with, or what it resolved to."""
    return page.evaluate("""async ([src, arg]) => {
        try {
            const v = await (0, eval)(src)(arg);
            return 'resolved: ' + (v instanceof Uint8Array ? `${v.length} bytes` : JSON.stringify(v));
        } catch (e) { return e.message; } }""", [js, arg])


def store_of(site: Path) -> Path:
    return site / "data" / "2024.zarr"  # the store as built: its true values


def wrong_values(shown: dict, want: np.ndarray, decoded: np.ndarray) -> str:
    """What a page that plotted a corrupt chunk's pixel showed (the assertion's message)."""
    if not shown["ys"]:
        return "no vector, but a label plotted"
    ys = np.array(shown["ys"][0], dtype=np.float64)
    bad = np.flatnonzero(~np.isclose(ys, want, rtol=1e-6))
    b = int(bad[0]) if len(bad) else 0
    return (f"a corrupt chunk was shown as data: {len(bad)} of {len(want)} bands wrong (band {b}: {want[b]:.4f} "
            f"shown as {ys[b]:.4f}; the corrupt bytes decode to int8 {decoded[b]} there)")


def test_a_corrupt_inner_chunk_is_an_error_naming_it_never_a_vector_a_similarity_or_an_export(page, server, site):
    store = copy_store(site, "chunk.zarr")
    row, col = interior_valid(store, "utm30", 1)
    shard = Shard(store, "utm30", "embeddings", row, col)
    wrong = corrupt_chunk(shard)
    key = "c/{}/{}/{}".format(*shard.chunk)
    said = f"corrupt chunk: utm30/embeddings {key} (crc32c mismatch)"
    lon, lat = pixel_lonlat(store, "utm30", row, col)
    assert open_app(page, server + "index.html?store=data/corrupt/chunk.zarr") == "ready"

    # The pixel: the error, naming the array and the chunk, in the status line; no vector plotted.
    got = page.evaluate("async ([lon, lat]) => await window.tesseraApi.select(lon, lat)", [lon, lat])
    shown = model_data(page, "spectrum-source")
    assert got is None and shown["label"] == [], wrong_values(shown, truth(store_of(site), "utm30", row, col), wrong)
    status = status_line(page)
    assert said in status and "\n" not in status and "Traceback" not in status, status
    assert f"in shard c/{shard.shard[0]}/{shard.shard[1]}/0" in status, status
    wait_text(page, said)

    # The session goes on: a pixel of another inner chunk of the same shard is read and plotted exactly.
    other_r, other_c = row + 8, col
    assert Shard(store, "utm30", "embeddings", other_r, other_c).linear != shard.linear
    olon, olat = pixel_lonlat(store, "utm30", other_r, other_c)
    got = page.evaluate("async ([lon, lat]) => await window.tesseraApi.select(lon, lat)", [olon, olat])
    assert got is not None and got["valid"] and (got["row"], got["col"]) == (other_r, other_c)
    np.testing.assert_allclose(np.array(model_data(page, "spectrum-source")["ys"][0], dtype=np.float64),
                               truth(store, "utm30", other_r, other_c), rtol=1e-6)

    # A region read over the corrupt chunk: the view's similarity (the page's toggle) is no layer and no value, and
    # the status line names the chunk; the tools' similarity and a timed read of the whole shard reject with it.
    # The tools read the zones' 10 m embeddings, as for a store without overviews (the demo store's overview
    # levels, tessera-ovr:, are whole: read from them, the view's tools would not touch the corrupt chunk).
    page.evaluate("async () => await window.tesseraWorker.python('import app.budgets as m; m.OVERVIEWS = False')")
    page.evaluate("async ([lon, lat]) => await window.tesseraApi.view(lon, lat, 7600)", [lon, lat])
    page.evaluate("async () => await window.tesseraApi.similarity(true)")
    sims = page.evaluate("async (pts) => Promise.all(pts.map(([lon, lat]) => window.tesseraApi.simAt(lon, lat)))",
                         [[lon, lat], [olon, olat]])
    assert sims == [None, None], f"a similarity was computed over the corrupt chunk: {sims}"
    assert said in status_line(page)
    err = rejection(page, "async () => await window.tesseraApi.similarity('selection', 'mean', null)")
    assert said in err and "\n" not in err, err
    r0, c0 = shard.shard[0] * shard.shard_shape[0], shard.shard[1] * shard.shard_shape[1]
    err = rejection(page, "async (w) => await window.tesseraApi.timeSimilarity('utm30', ...w)",
                    [r0, r0 + shard.shard_shape[0], c0, c0 + shard.shard_shape[1]])
    assert said in err, err

    # An export of the region is refused: the API rejects, the page's button saves nothing and says why.
    err = rejection(page, "async () => await window.tesseraApi.exportRegion()")
    assert said in err, err
    downloads = []
    page.on("download", lambda d: downloads.append(d))
    page.get_by_role("button", name="Region (.npy + JSON)").click()
    wait_text(page, "Export failed:")
    assert said in status_line(page) and downloads == []
    assert "Traceback" not in all_text(page)


def test_a_shard_index_that_points_at_another_chunk_is_an_error_naming_the_shard(page, server, site):
    """Two entries of a shard's index swapped: each inner chunk is whole and its own crc32c matches, so only the
    index's crc32c shows that the pixel would be read from another chunk's bytes."""
    store = copy_store(site, "index.zarr")
    row, col = interior_valid(store, "utm30", 4)
    shard = Shard(store, "utm30", "embeddings", row, col)
    table = shard.index.table
    other = next(i for i in range(len(table)) if i != shard.linear and table[i, 0] != EMPTY)
    start = len(shard.buf) - ShardIndex.nbytes(shard.grid)
    entries = np.frombuffer(bytes(shard.buf[start:start + 16 * len(table)]), dtype="<u8").reshape(-1, 2).copy()
    entries[[shard.linear, other]] = entries[[other, shard.linear]]
    shard.buf[start:start + 16 * len(table)] = entries.tobytes()  # the index's crc32c left as it was
    shard.write()
    off, ln = (int(x) for x in entries[shard.linear])
    swapped = shard.pixel_of(bytes(shard.buf[off:off + ln]))  # what the pixel would read: another chunk's values
    assert (swapped != shard.pixel_of(shard.chunk_bytes())).any()
    said = "corrupt shard index: utm30/embeddings c/{}/{}/0 (crc32c mismatch)".format(*shard.shard[:2])
    lon, lat = pixel_lonlat(store, "utm30", row, col)
    assert open_app(page, server + "index.html?store=data/corrupt/index.zarr") == "ready"
    got = page.evaluate("async ([lon, lat]) => await window.tesseraApi.select(lon, lat)", [lon, lat])
    shown = model_data(page, "spectrum-source")
    assert got is None and shown["label"] == [], f"a corrupt shard index was read as data: {got}"
    status = status_line(page)
    assert said in status and "\n" not in status, status
    wait_text(page, said)
