"""The browser's crc32c codec (app/js/checksums.js) on its own, in node, against google_crc32c on the same bytes:
random buffers, and the inner chunks and shard index of a real store's shard."""
from __future__ import annotations

import json
import random

import google_crc32c
import numpy as np

from builder.core.shardio import ShardIndex, chunk_grid
from conftest import REPO, run_node

# Reads cases from the JSON file argv[2]: {crc: [hex...], decode: [[hex, what]...]} (what: the metadata the codec is
# made for, "chunk" or "index"); prints {crc: [int...], decode: [[ok, hex of the bytes | [error class, what, message]]...]}.
NODE_JS = r"""
import { readFileSync } from "node:fs";
import { ChecksumError, Crc32cCodec, crc32c } from "./checksums.js";
const cases = JSON.parse(readFileSync(process.argv[2], "utf8"));
const bytes = (hex) => Uint8Array.from(Buffer.from(hex, "hex"));
const meta = {
  chunk: { dataType: "int8", shape: [4, 4, 128], fillValue: 0 },
  index: { dataType: "uint64", shape: [64, 64, 1, 2], fillValue: null },  // as zarrita's sharding codec makes it
};
const out = { crc: cases.crc.map((h) => crc32c(bytes(h))), decode: [] };
for (const [hex, what] of cases.decode) {
  const codec = Crc32cCodec.fromConfig(undefined, meta[what]);
  try {
    out.decode.push([true, Buffer.from(codec.decode(bytes(hex))).toString("hex")]);
  } catch (e) {
    out.decode.push([false, [e.constructor.name, e instanceof ChecksumError ? e.what : null, e.message]]);
  }
}
out.encoded = Buffer.from(new Crc32cCodec().encode(bytes(cases.crc[cases.crc.length - 1]))).toString("hex");
console.log(JSON.stringify(out));
"""


def run_cases(tmp_path, cases: dict) -> dict:
    from builder.site import _npm
    # the site build's npm packages (crc-32 among them)
    return run_node(tmp_path, REPO / "app" / "js" / "checksums.js", NODE_JS, cases, _npm(REPO / ".cache"))


def with_crc(data: bytes) -> bytes:
    return data + google_crc32c.value(data).to_bytes(4, "little")


def test_the_crc32c_codec_refuses_a_corrupt_buffer_and_passes_a_good_one(tmp_path, store):
    rng = random.Random(7)
    bufs = [rng.randbytes(n) for n in [*range(0, 40), 63, 64, 65, 1000, 4096, 65537]]
    # Real bytes: inner chunks of a shard of the session's store and that shard's index (entries + crc32c).
    meta = json.loads((store / "utm30" / "embeddings" / "zarr.json").read_text())
    grid = chunk_grid(tuple(meta["chunk_grid"]["configuration"]["chunk_shape"]),
                      tuple(meta["codecs"][0]["configuration"]["chunk_shape"]))
    shard = next(p for p in sorted((store / "utm30" / "embeddings" / "c").rglob("*")) if p.is_file()).read_bytes()
    index = ShardIndex.read(shard, grid, google_crc32c.value)
    chunks = [shard[off:off + ln] for _, off, ln in index.chunks()[:40]]
    index_bytes = shard[-ShardIndex.nbytes(grid):]
    assert len(chunks) == 40

    def flipped(raw: bytes, at: int) -> str:
        b = bytearray(raw)
        b[at] ^= 0x01
        return b.hex()

    decode = []
    for raw in [with_crc(b) for b in bufs[1:]] + chunks:  # good: passes; one bit flipped in the data or the crc: refused
        decode += [[raw.hex(), "chunk"], [flipped(raw, 0), "chunk"], [flipped(raw, len(raw) - 1), "chunk"]]
    decode += [[index_bytes.hex(), "index"], [flipped(index_bytes, 40), "index"], ["abc", "chunk"]]
    got = run_cases(tmp_path, {"crc": [b.hex() for b in bufs + chunks], "decode": decode})

    assert got["crc"] == [google_crc32c.value(b) for b in bufs + chunks]
    assert bytes.fromhex(got["encoded"]) == with_crc(chunks[-1])
    results = iter(got["decode"])
    for raw in [with_crc(b) for b in bufs[1:]] + chunks:
        assert next(results) == [True, raw[:-4].hex()]
        for _ in range(2):
            ok, (cls, what, message) = next(results)
            assert not ok and cls == "ChecksumError" and what == "chunk" and "crc32c mismatch in a chunk" in message
    assert next(results) == [True, index_bytes[:-4].hex()]
    assert np.frombuffer(bytes.fromhex(got["decode"][-3][1]), dtype="<u8").reshape(-1, 2).tolist() == index.table.tolist()
    ok, (cls, what, message) = next(results)
    assert not ok and cls == "ChecksumError" and what == "shard index", message
    ok, (cls, what, message) = next(results)  # 1 byte (the JSON's "abc" is a 1-byte buffer) is shorter than a crc32c
    assert not ok and cls == "ChecksumError" and "shorter than its crc32c" in message, message
