// The bridge between Python (Pyodide) and the browser's data path, as `self.tesseraJS` in the worker where
// Python runs (app/web/worker.js); the page imports it too, for the preview.
//
// Every call resolves to one shape, never rejects:
//   {ok: true, value}                      value: a JSON string for documents (Python parses it),
//                                          {data, shape, dtype} for array reads, an object otherwise
//   {ok: false, error: {kind, message}}    kind: one of app/js/errors.json (app/errors.py reads the
//                                          same list and raises SourceError(kind, message))
//
// Modules: fetching.js (traced, capped fetches and origin checks), ranges.js (zarrita store
// extensions: shared range cache, whole-shard reads), sources.js (opening stores and indexes, arrays with their
// checksums verified: checksums.js, the crc32c codec; shards.js, an array's sharding from its metadata),
// prefetch.js (warming the shard indexes of the shards in view), geography.js (coastlines, borders, place
// names), mercator.js (the projection, also the preview's), umap.js (UMAP in a Web Worker of its own).
import * as zarr from "zarrita";
import { ERROR_KINDS, LIMITS, TesseraError, catalogOrigins, checkDepth, fetchJSONDoc, fileSizes, parseBytes,
         resetStats as resetFetches, stats } from "./fetching.js";
import { geography } from "./geography.js";
import { prefetchIndexes as prefetch, prefetchStats } from "./prefetch.js";
import { clearCaches, options } from "./ranges.js";
import { array, node, source } from "./sources.js";
import { runUmap } from "./umap.js";

export { ERROR_KINDS, LIMITS, TesseraError, options, prefetchStats, stats };
export * as mercator from "./mercator.js";

// The request log and the prefetch's counters start again (tests and benchmarks).
export function resetStats() {
  resetFetches();
  Object.assign(prefetchStats, { calls: 0, files: 0, bytes: 0 });
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

// The catalog (a JSON document with the same limits), checked; its origin becomes one an index may refer to.
export const fetchJSON = call(async (url) => {
  const abs = new URL(url, location.href).href;
  const value = await fetchJSONDoc(new Request(abs), abs, LIMITS.metadataBytes);
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

// A box of an array: `sel` is a list of [start, stop] pairs or null (whole dimension); `hint` is
// "pixel" (fewest bytes: single inner chunks) or "region" (whole shards, one request each).
export const read = call(async (url, path, sel, hint) => {
  if (hint !== "pixel" && hint !== "region") throw new TesseraError("error", `read hint must be pixel or region, not ${hint}`);
  const src = await source(url);
  const arr = await array(src, hint === "region" ? "region" : "pixel", path);
  const selection = Array.from(sel, (s) => (s == null ? null : zarr.slice(s[0], s[1])));
  const out = await zarr.get(arr, selection);
  return { data: out.data, shape: out.shape, dtype: arr.dtype };
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
  fileSizes.clear();
}
