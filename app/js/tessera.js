// The bridge between Python (Pyodide) and the browser's data path, as `self.tesseraJS` in the worker where
// Python runs (app/web/worker.js); the page imports it too, for the preview.
//
// Every call resolves to one shape, never rejects:
//   {ok: true, value}                      value: a JSON string for documents (Python parses it),
//                                          {data, shape, dtype} for array reads, an object otherwise
//   {ok: false, error: {kind, message}}    kind: one of builder/core/errors.json (builder/core/source.py
//                                          reads the same list; SourceError(kind, message))
//
// Modules: fetching.js (traced, capped fetches with retries, and origin checks), flights.js (reads in flight
// shared: deduplicated and coalesced), options.js (the switches a benchmark's baseline turns off), ranges.js (zarrita store
// extensions: shared range cache, whole-shard reads), chunks.js (big decoded chunks kept, a read's cost), sources.js (opening stores and indexes, arrays with their
// checksums verified: checksums.js, the crc32c codec; shards.js, an array's sharding from its metadata),
// chunkruns.js (an array's record of the chunks that exist), prefetch.js (warming the shard indexes of the shards
// in view), geography.js (coastlines, borders, place
// names), mercator.js (the projection, also the preview's), umap.js (UMAP in a Web Worker of its own).
import * as zarr from "zarrita";
import { ERROR_KINDS, LIMITS, TesseraError, catalogOrigins, checkDepth, fetchJSONDoc, fileSizes, parseBytes,
         resetStats as resetFetches, stats } from "./fetching.js";
import { CATALOG, checkCatalog, pickStore, readCatalog } from "./catalog.js";
import { BIG_READ_BYTES, chunkCost, clearChunks } from "./chunks.js";
import { flightProgress, flightStats, sharedFetch } from "./flights.js";
import { geography } from "./geography.js";
import { prefetchIndexes as prefetch, prefetchStats } from "./prefetch.js";
import { clearCaches, options } from "./ranges.js";
import { array, node, source } from "./sources.js";
import { runUmap } from "./umap.js";

export { CATALOG, checkCatalog, pickStore, readCatalog };
export { chunksPresent } from "./chunkruns.js";
export { BIG_READ_BYTES, ERROR_KINDS, LIMITS, TesseraError, flightStats, options, prefetchStats, stats };
export * as mercator from "./mercator.js";

// The request log and the prefetch's counters start again (tests and benchmarks).
export function resetStats() {
  resetFetches();
  Object.assign(prefetchStats, { calls: 0, files: 0, bytes: 0 });
  Object.assign(flightStats, { flights: 0, joined: 0, coalesced: 0 });
}

function failure(err) {
  if (err instanceof TesseraError) return { ok: false, error: { kind: err.kind, message: err.message } };
  return { ok: false, error: { kind: "error", message: String(err && err.message ? err.message : err) } };
}

const call = (fn) => async (...args) => {
  try {
    return { ok: true, value: await fn(...args) };
  } catch (e) {
    return failure(e);
  }
};

// The catalog (a JSON document within a catalog's size, app/js/catalog.js), its size and depth checked (Python
// checks its fields, builder/core/catalog.py); its origin becomes one an index may refer to.
export const fetchJSON = call(async (url) => {
  const abs = new URL(url, location.href).href;
  const value = await fetchJSONDoc(new Request(abs), abs, CATALOG.bytes);
  catalogOrigins.add(new URL(abs).origin);
  return JSON.stringify(value);
});

// Data from users, links and host pages, checked with the documents' limits before Python parses or converts it
// (app/documents.py): "" when it is within them, else the one-line reason. Synchronous: Python calls them directly.
export function jsonProblem(text, name) {
  try {
    parseBytes(new TextEncoder().encode(String(text)), name);
    return "";
  } catch (err) {
    return err.message;
  }
}

export function valueProblem(value, name) {
  try {
    checkDepth(value, name);
    return "";
  } catch (err) {
    return err.message;
  }
}

// Root metadata (with consolidated children when present).
export const openSource = call(async (url) => JSON.stringify((await source(url)).rootMeta));

// The metadata document of the node at `path` ("null" when there is no such node).
export const readNode = call(async (url, path) => JSON.stringify(await node(url, path)));

// Reads that may be cancelled, by the id their caller gave (cancelRead).
const cancellable = new Map();
let bigReadListener = null;

// `fn(id, bytes)` is called as a read with an id is about to fetch BIG_READ_BYTES or more of big chunks (not kept
// decoded, chunks.js), before it sends a request: Python's status line says it (app/bigreads.py).
export function watchBigReads(fn) {
  bigReadListener = fn;
}

// A box of an array: `sel` is a list of [start, stop] pairs or null (whole dimension); `hint` is
// "pixel" (fewest bytes: single inner chunks) or "region" (whole shards, one request each).  With an `id`, the
// read can be cancelled: cancelRead(id) aborts its requests (those no other read shares) and it fails with the
// "cancelled" kind; and a big one is announced first (watchBigReads).
export const read = call(async (url, path, sel, hint, id = null) => {
  if (hint !== "pixel" && hint !== "region") throw new TesseraError("error", `read hint must be pixel or region, not ${hint}`);
  const src = await source(url);
  const arr = await array(src, hint === "region" ? "region" : "pixel", path);
  const selection = Array.from(sel, (s) => (s == null ? null : zarr.slice(s[0], s[1])));
  const controller = id === null || id === undefined ? null : new AbortController();
  if (controller) {
    cancellable.set(id, controller);
    const cost = chunkCost(arr, url, Array.from(sel, (s) => (s == null ? null : [s[0], s[1]])));
    if (cost.big && cost.bytes >= BIG_READ_BYTES && bigReadListener) bigReadListener(id, cost.bytes);
  }
  try {
    const out = await zarr.get(arr, selection, controller ? { signal: controller.signal } : {});
    return { data: out.data, shape: out.shape, dtype: arr.dtype };
  } catch (err) {
    if (controller?.signal.aborted) throw new TesseraError("cancelled", `the read of ${path} was cancelled`);
    throw err;
  } finally {
    if (controller && cancellable.get(id) === controller) cancellable.delete(id);
  }
});

// Cancel the read started with this id (nothing when it has ended).
export function cancelRead(id) {
  cancellable.get(id)?.abort();
}

// What a read of `sel` would fetch, before it starts: {bytes, chunks} of the chunks it touches that are not kept
// decoded (chunks.js; a read with an id announces it from BIG_READ_BYTES on: watchBigReads).
export const readCost = call(async (url, path, sel, hint) => {
  const src = await source(url);
  const arr = await array(src, hint === "region" ? "region" : "pixel", path);
  return chunkCost(arr, url, Array.from(sel, (s) => (s == null ? null : [s[0], s[1]])));
});

// Bytes of the requests in the air: {received, total} (the progress of a long read).
export function readProgress() {
  return flightProgress();
}

// Byte ranges of one file, read as the stores read theirs (retried, deduplicated, coalesced: flights.js), all at
// once: `ranges` is a list of [offset, length]; resolves to a list of Uint8Array (tests and benchmarks).
export const readBytes = call(async (url, ranges) => {
  const abs = new URL(url, location.href).href;
  return Promise.all(Array.from(ranges, async ([offset, length]) => {
    const resp = await sharedFetch(new Request(abs, { headers: { Range: `bytes=${offset}-${offset + length - 1}` } }), abs);
    if (resp.status !== 206) throw new TesseraError("http", `HTTP ${resp.status} for ${abs}`);
    return new Uint8Array(await resp.arrayBuffer());
  }));
});

// Warm the shard indexes of the shards that boxes of arrays touch (the view's, once it settled zoomed in):
// `items` is a list of [path, sel] with `sel` as `read` takes it.  Resolves to {files, bytes, superseded}.
export const prefetchIndexes = call((url, items) =>
  prefetch(url, Array.from(items, ([path, sel]) => [String(path), Array.from(sel, (s) => (s == null ? null : [s[0], s[1]]))])));

// Decoded once per URL: the preview (app/web/preview.js) draws the coastlines while Python loads,
// and the Panel map then gets the same arrays (app/web/worker.js asks the page) without a second fetch.
const geographies = new Map();
// The 2-D UMAP layout (Float32Array, n x 2) of n vectors of d bands (app/js/umap.js).
export const umap = call(runUmap);

export const loadGeography = call((url) => {
  if (!geographies.has(url)) {
    const p = geography(url);
    geographies.set(url, p);
    p.catch(() => geographies.delete(url));
  }
  return geographies.get(url);
});

// Blosc, the codec of every TESSERA store's chunks (the convention's, and geoemb:'s), is split off from this bundle
// like the other codecs (builder/site.py): the page asks zarrita's codec registry for it as it starts (the loader a
// read calls), so the preview's first chunk does not wait for it. A failure is said on the console here; the read
// that needs the codec reports it to the user.
export function loadCodecs() {
  Promise.resolve().then(() => zarr.registry.get("blosc")())
    .catch((err) => console.warn("tessera: the Blosc codec did not load:", err && err.message));
}

// Forget every cached byte and learnt file size (benchmarks: a cold shard again, same page).
export function forgetBytes() {
  clearCaches();
  clearChunks();
  fileSizes.clear();
}
