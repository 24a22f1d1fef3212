// Decoded big chunks, kept: a store whose inner chunks are large (the dClimate copy's 256x256x128 int8 chunks are
// 8.4 MB each) would otherwise fetch and decode a whole chunk again for every pixel in it.  A chunk of at least
// CHUNK_CACHE.minBytes decoded is kept by store URL, array path and chunk coordinates, shared by the pixel and the
// region reads of the page (sources.js opens both through `withChunkCache`), the least recently used dropped first
// beyond CHUNK_CACHE.bytes; a read of a chunk already being read waits for it.  Smaller chunks are not kept here:
// their bytes are in the range cache (ranges.js), and a page reads thousands of them.
//
// `chunkCost(arr, url, sel)` says what a read would fetch before it starts: the decoded bytes of the chunks a
// selection touches that are not kept (the status line's "reading 8.4 MB for this pixel").
import * as zarr from "zarrita";

// minBytes: 1 MiB, the size from which a second read costs more than a round trip on a fast link; bytes: 64 MiB
// in all (seven 8.4 MB chunks: the pixels a user compares in a session's neighbourhood), per thread.
export const CHUNK_CACHE = { minBytes: 2 ** 20, bytes: 64 * 2 ** 20 };

// A read of big chunks that would fetch this much (1 MB) or more is said before it starts (app/js/tessera.js
// watchBigReads); a region of small chunks (a v1 store's) is not.
export const BIG_READ_BYTES = 1_000_000;

const kept = new Map();  // key -> {promise, bytes}; Map order: least recently used first
let keptBytes = 0;

function drop(key) {
  const e = kept.get(key);
  if (e === undefined) return;
  kept.delete(key);
  keptBytes -= e.bytes;
}

export function clearChunks() {
  kept.clear();
  keptBytes = 0;
}

const keyOf = (url, arr, coords) => `${url}#${arr.path}#${coords.join(",")}`;

function chunkBytes(arr) {
  const per = arr.chunks.reduce((a, b) => a * b, 1);
  return per * (BYTES[arr.dtype] ?? 8);
}

// Bytes per element of zarrita's data types (the chunk's decoded size); other types count 8 (an upper bound).
const BYTES = { bool: 1, int8: 1, uint8: 1, int16: 2, uint16: 2, float16: 2, int32: 4, uint32: 4, float32: 4,
                int64: 8, uint64: 8, float64: 8 };

export const withChunkCache = zarr.defineArrayExtension((arr, { url }) => ({
  async getChunk(coords, options, opts) {
    if (chunkBytes(arr) < CHUNK_CACHE.minBytes) return arr.getChunk(coords, options, opts);
    const key = keyOf(url, arr, coords);
    const hit = kept.get(key);
    if (hit !== undefined) {
      kept.delete(key);
      kept.set(key, hit);
      return hit.promise;
    }
    const promise = arr.getChunk(coords, options, opts);
    const entry = { promise, bytes: chunkBytes(arr) };
    kept.set(key, entry);
    keptBytes += entry.bytes;
    promise.catch(() => kept.get(key) === entry && drop(key));  // a failed or cancelled read is not kept
    while (keptBytes > CHUNK_CACHE.bytes && kept.size > 1) drop(kept.keys().next().value);
    return promise;
  },
}));

// {bytes, chunks, big}: the decoded bytes and the number of the chunks `sel` (one [start, stop] pair or null per
// dimension) touches that a read would fetch, i.e. not kept here (decoded sizes: what a chunk holds, about what an
// incompressible chunk of embeddings costs on the wire), and whether its chunks are big (CHUNK_CACHE.minBytes).
export function chunkCost(arr, url, sel) {
  const ranges = arr.shape.map((n, i) => {
    const c = arr.chunks[i];
    const [a, b] = sel[i] == null ? [0, n] : [Math.max(0, sel[i][0]), Math.min(n, sel[i][1])];
    return b <= a ? [0, 0] : [Math.floor(a / c), Math.floor((b - 1) / c) + 1];
  });
  const count = ranges.reduce((k, [a, b]) => k * (b - a), 1);
  // Small chunks (a v1 store's 2 KB ones, thousands per region) are not kept here: no need to list them one by one.
  // Nor a region of more big chunks than the cache could hold many times over: all of them is the cost then.
  const big = chunkBytes(arr) >= CHUNK_CACHE.minBytes;
  if (!big || count > 10_000) return { bytes: count * chunkBytes(arr), chunks: count, big };
  let coords = [[]];
  for (const [a, b] of ranges) coords = coords.flatMap((p) => Array.from({ length: b - a }, (_, k) => [...p, a + k]));
  const todo = coords.filter((c) => !kept.has(keyOf(url, arr, c)));
  return { bytes: todo.length * chunkBytes(arr), chunks: todo.length, big };
}
