// The Zarr v3 `crc32c` codec, verifying.  zarrita 0.7.5's own drops a chunk's 4 checksum bytes without
// checking them, so bytes changed on disk or on the way decoded to other values without a word.  This one is
// registered in zarrita's codec registry in its place (app/js/sources.js): every store whose codecs name crc32c
// then has each inner chunk checked before it is decompressed, and each shard index before it is used (zarrita
// decodes a shard's index through the same registry: the sharding codec's index_codecs).  A mismatch is a
// ChecksumError; the bridge names the array and the chunk (sources.js).
//
// The CRC-32C (Castagnoli) itself is crc-32's (npm: SheetJS, slicing-by-16 in plain JavaScript, no dependencies);
// this module imports nothing else, so that node can test it on its own (tests/test_checksums_node.py).
import CRC32C from "crc-32/crc32c.js";

const CRC_BYTES = 4;

// The CRC-32C of `bytes` (a Uint8Array) as an unsigned 32-bit integer (crc-32 returns it signed).
export function crc32c(bytes) {
  return CRC32C.buf(bytes) >>> 0;
}

// `what`: "chunk" or "shard index".
export class ChecksumError extends Error {
  constructor(what, stored, computed) {
    super(stored === null ? `${what} of ${computed} bytes is shorter than its crc32c`
      : `crc32c mismatch in a ${what}: stored ${hex(stored)}, computed ${hex(computed)}`);
    this.what = what;
  }
}

const hex = (n) => n.toString(16).padStart(8, "0");

// zarrita's sharding codec decodes a shard's index (uint64 [offset, nbytes] pairs: shape [...chunks per shard, 2])
// with a pipeline of its own whose fill value is null; an array's chunks always have one (Zarr v3 requires it).
function isShardIndex(meta) {
  return meta != null && meta.dataType === "uint64" && meta.fillValue === null && Array.isArray(meta.shape)
    && meta.shape[meta.shape.length - 1] === 2;
}

export class Crc32cCodec {
  kind = "bytes_to_bytes";

  constructor(what = "chunk") {
    this.what = what;
  }

  // zarrita calls this with the codec's configuration (crc32c has none) and the metadata of what it decodes.
  static fromConfig(_configuration, meta) {
    return new Crc32cCodec(isShardIndex(meta) ? "shard index" : "chunk");
  }

  // `bytes` followed by their CRC-32C, little endian.
  encode(bytes) {
    const out = new Uint8Array(bytes.length + CRC_BYTES);
    out.set(bytes);
    new DataView(out.buffer).setUint32(bytes.length, crc32c(bytes), true);
    return out;
  }

  // The bytes before the checksum (a view, no copy), once their CRC-32C equals it; a ChecksumError otherwise.
  decode(bytes) {
    if (bytes.length < CRC_BYTES) throw new ChecksumError(this.what, null, bytes.length);
    const n = bytes.length - CRC_BYTES;
    const body = bytes.subarray(0, n);
    const stored = new DataView(bytes.buffer, bytes.byteOffset + n, CRC_BYTES).getUint32(0, true);
    const computed = crc32c(body);
    if (stored !== computed) throw new ChecksumError(this.what, stored, computed);
    return body;
  }

  computeEncodedSize(decodedSize) {
    return decodedSize + CRC_BYTES;
  }
}
