// zarrita store extensions (zarr.defineStoreExtension) for the two ways the explorer reads shards.
//
//  * withSharedRanges (pixel reads): every range read is keyed by the file it lands in (absolute URL
//    and absolute byte offsets) in one cache shared by every source of the page.  A shard index read
//    by the year store is then not read again by the multi-year index that refers to the same file,
//    the same 2 KB chunk is fetched once when both ask for it, and a suffix read of a file whose size
//    is known (from a reference, or from an earlier Content-Range) becomes a plain range read: no HEAD
//    first, as zarrita's ReferenceStore would otherwise send for every shard index.
//  * withWholeShards (region reads: previews, similarity): a shard file is fetched whole with one
//    GET and zarrita's range reads (index and chunks) are answered from memory: one request per
//    shard instead of one per 4x4 chunk.
//
// Both leave the bytes untouched: they change which HTTP requests fetch them, nothing any other
// Zarr v3 reader of the store depends on.  `window.tesseraBridgeOptions = {sharedRanges: false}`, set
// before the bundle loads, restores plain zarrita reads: the benchmark's same-run baseline.
import * as zarr from "zarrita";
import { fileSizes } from "./fetching.js";
import { options } from "./options.js";

export { options } from "./options.js";  // the switches (a benchmark's baseline turns some off)

// A Map with least-recently-used eviction by total bytes (values: promises of Uint8Array | undefined).
class ByteLRU {
  constructor(limit) {
    this.limit = limit;
    this.map = new Map();
    this.sizes = new Map();
    this.total = 0;
  }
  get(key) {
    const hit = this.map.get(key);
    if (hit !== undefined) {
      this.map.delete(key);
      this.map.set(key, hit);
    }
    return hit;
  }
  set(key, promise, size) {
    this.map.set(key, promise);
    this.sizes.set(key, size);
    this.total += size;
    while (this.total > this.limit() && this.map.size > 1) {
      const oldest = this.map.keys().next().value;
      this.forget(oldest);
    }
  }
  forget(key) {
    this.total -= this.sizes.get(key) || 0;
    this.map.delete(key);
    this.sizes.delete(key);
  }
  clear() {
    this.map.clear();
    this.sizes.clear();
    this.total = 0;
  }
}

const ranges = new ByteLRU(() => options.cacheBytes);
const wholes = new ByteLRU(() => Infinity);

export function clearCaches() {
  ranges.clear();
  wholes.clear();
}

// Memoise `load()` under `key` in `cache`; a failure is not kept (the next read retries).
function shared(cache, key, size, load) {
  const hit = cache.get(key);
  if (hit !== undefined) return hit;
  const p = load();
  cache.set(key, p, size);
  p.catch(() => cache.forget(key));
  return p;
}

// Suffix reads under way, by `${url}#-${n}`: {promise, end} with `end` the absolute end of the window
// read (undefined: the end of the file).  A source that asks for the same tail while another is fetching
// it waits for those bytes instead, when the file's size (known once they arrive) shows the windows end
// at the same byte: the year store and the multi-year index read a shard's index at once (app/session.py).
const tails = new Map();

async function sharedTail(loc, n, read) {
  const key = `${loc.url}#-${n}`;
  const end = loc.length === undefined ? undefined : loc.offset + loc.length;
  const other = tails.get(key);
  if (other) {
    const bytes = await other.promise.catch(() => undefined);
    const size = fileSizes.get(loc.url);
    if (bytes && size !== undefined && (other.end ?? size) === (end ?? size)) return bytes;
  }
  const promise = read();
  const entry = { promise, end };
  tails.set(key, entry);
  const done = () => tails.get(key) === entry && tails.delete(key);
  promise.then(done, done);
  return promise;
}

// `locate(path)` -> {url, offset, length} (length undefined when unknown) or null (not a file: inline data).
export const withSharedRanges = zarr.defineStoreExtension((store, opts) => {
  const ranged = (loc, path, rel, init) =>
    shared(ranges, `${loc.url}#${loc.offset + rel.offset}+${rel.length}`, rel.length, () => store.getRange(path, rel, init));
  return {
    async getRange(path, range, init) {
      const loc = opts.locate(path);
      if (loc === null) return store.getRange(path, range, init);
      if (!("suffixLength" in range)) return ranged(loc, path, range, init);
      return sharedTail(loc, range.suffixLength, async () => {
        const size = loc.length ?? fileSizes.get(loc.url);
        if (size !== undefined) {
          const n = Math.min(range.suffixLength, size);
          return ranged(loc, path, { offset: size - n, length: n }, init);
        }
        const bytes = await store.getRange(path, range, init);  // first touch: the size arrives with it
        const known = fileSizes.get(loc.url);
        if (bytes && known !== undefined) {
          ranges.set(`${loc.url}#${known - bytes.length}+${bytes.length}`, Promise.resolve(bytes), bytes.length);
        }
        return bytes;
      });
    },
  };
});

// `locate` as above; whole files are kept by URL and byte window, the last `options.wholeFiles` of them.
export const withWholeShards = zarr.defineStoreExtension((store, opts) => {
  const file = (path) => {
    const loc = opts.locate(path);
    const key = loc === null ? null : `${loc.url}#${loc.offset}+${loc.length ?? "*"}`;
    if (key === null) return store.get(path);
    const p = shared(wholes, key, 1, () => store.get(path));
    while (wholes.map.size > options.wholeFiles) wholes.forget(wholes.map.keys().next().value);
    return p;
  };
  return {
    async getRange(path, range) {
      const f = await file(path);
      if (f === undefined) return undefined;
      if ("suffixLength" in range) return f.subarray(Math.max(0, f.length - range.suffixLength));
      return f.subarray(range.offset, range.offset + range.length);
    },
  };
});

// Answers the root document from bytes already fetched (size- and depth-checked), so that
// zarr.withConsolidatedMetadata does not fetch it a second time.
export const withRootDocument = zarr.defineStoreExtension((store, opts) => ({
  async get(path, init) {
    return path === "/zarr.json" ? opts.bytes : store.get(path, init);
  },
}));
