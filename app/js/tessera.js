// The browser's data path: Zarr v3 reads with zarrita (sharding, Blosc via
// numcodecs.js wasm), called from Python in Pyodide through `window.tesseraJS`.
//
// Two kinds of read:
//  * pixel reads go through zarrita's FetchStore: one HTTP range request per
//    inner chunk, the shard index fetched once per shard (suffix range) and
//    cached by zarrita;
//  * region reads (previews, similarity) go through WholeFileStore, which
//    fetches each shard file whole with one GET and answers zarrita's range
//    reads from memory: one request per shard instead of one per 4x4 chunk.
// Every request goes through `tracedFetch`, which counts requests and bytes
// and turns a host that ignores Range (200 instead of 206) into an error
// rather than silently wrong data.
import * as zarr from "zarrita";
import ReferenceStore from "@zarrita/storage/ref";
import { feature, mesh } from "topojson-client";

export const stats = { requests: 0, bytes: 0, log: [] };

export function resetStats() {
  stats.requests = 0;
  stats.bytes = 0;
  stats.log = [];
}

export class TesseraError extends Error {
  constructor(kind, message) {
    super(message);
    this.kind = kind;
  }
}

// Limits on documents that come from a store, a catalog or an index: they are
// data from somewhere else, so neither their size nor their nesting may take
// the tab down (a 300 MB zarr.json exhausts memory; JSON nested 100,000 deep
// overflows CPython's stack in Pyodide, which is fatal to the whole runtime).
export const LIMITS = { metadataBytes: 16 * 2 ** 20, indexBytes: 64 * 2 ** 20, depth: 64 };

// The body of `resp`, refused as soon as it is known to exceed `limit` bytes
// (from Content-Length when the host sends it, otherwise while streaming).
async function cappedText(resp, url, limit) {
  const declared = Number(resp.headers.get("Content-Length") || 0);
  const tooLarge = (n) => new TesseraError("invalid", `${url} is ${n} bytes or more; documents over ${limit} bytes are refused`);
  if (declared > limit) {
    resp.body?.cancel();
    throw tooLarge(declared);
  }
  const reader = resp.body.getReader();
  const parts = [];
  let n = 0;
  for (;;) {
    const { done, value } = await reader.read();
    if (done) break;
    n += value.length;
    if (n > limit) {
      reader.cancel();
      throw tooLarge(n);
    }
    parts.push(value);
  }
  const all = new Uint8Array(n);
  let at = 0;
  for (const p of parts) {
    all.set(p, at);
    at += p.length;
  }
  return new TextDecoder().decode(all);
}

// Depth of a parsed JSON value, walked iteratively (no recursion to overflow).
function checkDepth(value, url, limit = LIMITS.depth) {
  const stack = [[value, 1]];
  while (stack.length) {
    const [v, d] = stack.pop();
    if (v === null || typeof v !== "object") continue;
    if (d > limit) throw new TesseraError("invalid", `${url} is nested more than ${limit} levels deep`);
    for (const child of Array.isArray(v) ? v : Object.values(v)) {
      if (child !== null && typeof child === "object") stack.push([child, d + 1]);
    }
  }
  return value;
}

export function parseJSON(text, url) {
  let value;
  try {
    value = JSON.parse(text);
  } catch (err) {
    throw new TesseraError("invalid", `${url} is not valid JSON (${err.message})`);
  }
  return checkDepth(value, url);
}

async function fetchJSONDoc(request, source, limit) {
  const resp = await tracedFetch(request, source);
  if (resp.status === 404) throw new TesseraError("notfound", `${request.url}: HTTP 404`);
  if (!resp.ok) throw new TesseraError("http", `HTTP ${resp.status} for ${request.url}`);
  return parseJSON(await cappedText(resp, request.url, limit), request.url);
}

// Every URL an index refers to must lie on an allowed origin (the index's own,
// the page's and the catalog's): a hostile index must not make the page send
// requests to a third host.  Checked for every reference when the index is
// opened, and again for every request its store makes.
const catalogOrigins = new Set();

function allowedOrigins(indexUrl) {
  return new Set([new URL(indexUrl).origin, location.origin, ...catalogOrigins]);
}

function checkReference(target, indexUrl, allowed, key) {
  let u;
  try {
    u = new URL(target, indexUrl);
  } catch {
    throw new TesseraError("refused", `index ${indexUrl}: reference ${key} is not a URL: ${target}`);
  }
  if (!allowed.has(u.origin)) {
    throw new TesseraError("refused", `index ${indexUrl}: reference ${key} points to another origin (${u.origin}); refused`);
  }
  return u.href;
}

function checkIndexReferences(spec, indexUrl, allowed) {
  const templates = spec.templates || {};
  const fill = (s) => s.replace(/\{\{(\w+)\}\}/g, (m, k) => (k in templates ? templates[k] : m));
  for (const [key, ref] of Object.entries(spec.refs || {})) {
    if (Array.isArray(ref) && typeof ref[0] === "string") checkReference(fill(ref[0]), indexUrl, allowed, key);
  }
}

const containedFetch = (indexUrl, allowed) => async (request) => {
  checkReference(request.url, indexUrl, allowed, "(request)");
  return tracedFetch(request, indexUrl);
};

// One fetch wrapper per source, so the log tells which store a request served.
const tracedFetchFor = (source) => (request) => tracedFetch(request, source);

async function tracedFetch(request, source = null) {
  let resp;
  try {
    resp = await fetch(request);
  } catch (err) {
    throw new TesseraError("network", `could not fetch ${request.url}: the server is unreachable or refused CORS (${err.message})`);
  }
  const len = Number(resp.headers.get("Content-Length") || 0);
  stats.requests += 1;
  stats.bytes += request.method === "HEAD" ? 0 : len;
  stats.log.push({ url: request.url, source, method: request.method, range: request.headers.get("Range"),
                   status: resp.status, bytes: request.method === "HEAD" ? 0 : len });
  if (request.headers.get("Range") && resp.status === 200) {
    throw new TesseraError("range", `the server ignored an HTTP Range request for ${request.url}; range requests are required`);
  }
  return resp;
}

class WholeFileStore {
  constructor(base, fetchFn, maxFiles = 64) {
    this.base = base.endsWith("/") ? base : base + "/";
    this.fetchFn = fetchFn;
    this.files = new Map();
    this.maxFiles = maxFiles;
  }
  url(path) {
    return this.base + path.replace(/^\//, "");
  }
  async file(path) {
    if (this.files.has(path)) {
      const hit = this.files.get(path);
      this.files.delete(path);
      this.files.set(path, hit); // LRU: most recent last
      return hit;
    }
    const p = (async () => {
      const resp = await this.fetchFn(new Request(this.url(path)));
      if (resp.status === 404 || resp.status === 403) return null;
      if (!resp.ok) throw new TesseraError("http", `HTTP ${resp.status} for ${this.url(path)}`);
      return new Uint8Array(await resp.arrayBuffer());
    })();
    this.files.set(path, p);
    if (this.files.size > this.maxFiles) this.files.delete(this.files.keys().next().value);
    try {
      return await p;
    } catch (e) {
      this.files.delete(path);
      throw e;
    }
  }
  async get(path) {
    const f = await this.file(path);
    return f === null ? undefined : f;
  }
  async getRange(path, range) {
    const f = await this.file(path);
    if (f === null) return undefined;
    if ("suffixLength" in range) return f.subarray(Math.max(0, f.length - range.suffixLength));
    return f.subarray(range.offset, range.offset + range.length);
  }
}

// Answers `<node>/zarr.json` from the root's consolidated metadata and passes
// every other read through untouched (zarrita's own consolidation extension
// turns range reads into whole-file reads, which would defeat the pixel path).
class ConsolidatedStore {
  constructor(inner, nodes) {
    this.inner = inner;
    this.docs = new Map();
    const enc = new TextEncoder();
    for (const [key, meta] of Object.entries(nodes)) this.docs.set(`/${key}/zarr.json`, enc.encode(JSON.stringify(meta)));
  }
  async get(path, opts) {
    return this.docs.has(path) ? this.docs.get(path) : this.inner.get(path, opts);
  }
  async getRange(path, range, opts) {
    return this.inner.getRange(path, range, opts);
  }
}

const sources = new Map();

// A source is one store URL (a Zarr v3 store over HTTP, or a Kerchunk JSON
// reference index ending in .json) with its two readers and opened arrays.
async function source(url) {
  if (sources.has(url)) return sources.get(url);
  const p = (async () => {
    let pixelStore, regionStore, rootMeta;
    if (url.endsWith(".json")) {
      const spec = await fetchJSONDoc(new Request(url), url, LIMITS.indexBytes);
      if (spec === null || typeof spec !== "object" || typeof spec.refs !== "object" || spec.refs === null) {
        throw new TesseraError("invalid", `${url} is not a reference index (no "refs" object)`);
      }
      // A relocatable index ({{base}} templates written empty) resolves against its own directory.
      if (spec.templates && "base" in spec.templates && !spec.templates.base) {
        spec.templates.base = new URL(".", url).href;
      }
      const allowed = allowedOrigins(url);
      checkIndexReferences(spec, url, allowed);
      const ref = ReferenceStore.fromSpec(spec, { fetch: containedFetch(url, allowed) });
      pixelStore = ref;
      regionStore = ref;
      const raw = await ref.get("/zarr.json");
      if (raw === undefined) throw new TesseraError("invalid", `${url} has no root zarr.json reference`);
      if (raw.length > LIMITS.metadataBytes) {
        throw new TesseraError("invalid", `${url}: root zarr.json is ${raw.length} bytes; documents over ${LIMITS.metadataBytes} bytes are refused`);
      }
      rootMeta = parseJSON(new TextDecoder().decode(raw), url + " (zarr.json)");
    } else {
      const base = url.endsWith("/") ? url : url + "/";
      const resp = await tracedFetch(new Request(base + "zarr.json", { headers: { Range: "bytes=0-" } }));
      if (resp.status === 404) throw new TesseraError("notfound", `no Zarr store at ${base} (zarr.json: HTTP 404)`);
      if (!resp.ok && resp.status !== 206) throw new TesseraError("http", `HTTP ${resp.status} for ${base}zarr.json`);
      rootMeta = parseJSON(await cappedText(resp, base + "zarr.json", LIMITS.metadataBytes), base + "zarr.json");
      if (rootMeta === null || typeof rootMeta !== "object" || Array.isArray(rootMeta)) {
        throw new TesseraError("invalid", `${base}zarr.json is not a JSON object`);
      }
      // Suffix ranges (bytes=-N) read a shard index in one request, without a HEAD first.
      pixelStore = new zarr.FetchStore(base, { fetch: tracedFetchFor(url), useSuffixRequest: true });
      regionStore = new WholeFileStore(base, tracedFetchFor(url));
      // Probe that the host honours Range: a 1-byte read of the root document.
      await tracedFetch(new Request(base + "zarr.json", { headers: { Range: "bytes=0-0" } }));
    }
    // Array metadata comes from the root's consolidated metadata when it has any:
    // opening an array then costs no request.
    const nodes = rootMeta.consolidated_metadata?.metadata;
    if (nodes) {
      pixelStore = new ConsolidatedStore(pixelStore, nodes);
      regionStore = new ConsolidatedStore(regionStore, nodes);
    }
    return { url, rootMeta, pixel: zarr.root(pixelStore), region: zarr.root(regionStore), arrays: new Map(),
             rawStore: pixelStore };
  })();
  sources.set(url, p);
  try {
    return await p;
  } catch (e) {
    sources.delete(url);
    throw e;
  }
}

async function array(src, kind, path) {
  const key = kind + ":" + path;
  if (!src.arrays.has(key)) {
    src.arrays.set(key, zarr.open.v3(src[kind].resolve(path), { kind: "array" }));
  }
  return src.arrays.get(key);
}

function describe(err) {
  if (err instanceof TesseraError) return { kind: err.kind, message: err.message };
  return { kind: "error", message: String(err && err.message ? err.message : err) };
}

// The catalog (a JSON document with the same limits), as a checked JSON string
// that Python can parse safely; its origin becomes one an index may refer to.
export async function fetchJSON(url) {
  try {
    const abs = new URL(url, location.href).href;
    const value = await fetchJSONDoc(new Request(abs), abs, LIMITS.metadataBytes);
    catalogOrigins.add(new URL(abs).origin);
    return JSON.stringify({ ok: true, value });
  } catch (e) {
    return JSON.stringify({ ok: false, error: describe(e) });
  }
}

// Root metadata (with consolidated children when present), as a JSON string.
export async function openSource(url) {
  try {
    const src = await source(url);
    return JSON.stringify({ ok: true, meta: src.rootMeta });
  } catch (e) {
    return JSON.stringify({ ok: false, error: describe(e) });
  }
}

// The metadata document of the node at `path` (a store without consolidated metadata is
// explored node by node), as a JSON string: {ok, meta} with meta null when there is no such node
// (404, or 403 as S3-style hosts answer for a missing key).  Same size and depth limits as the root.
export async function readNode(url, path) {
  try {
    const src = await source(url);
    const key = "/" + path.replace(/^\/+|\/+$/g, "") + "/zarr.json";
    let text;
    if (url.endsWith(".json")) {
      const raw = await src.rawStore.get(key);
      if (raw === undefined) return JSON.stringify({ ok: true, meta: null });
      if (raw.length > LIMITS.metadataBytes) throw new TesseraError("invalid", `${url}${key} is over ${LIMITS.metadataBytes} bytes`);
      text = new TextDecoder().decode(raw);
    } else {
      const full = (url.endsWith("/") ? url.slice(0, -1) : url) + key;
      const resp = await tracedFetch(new Request(full), url);
      if (resp.status === 404 || resp.status === 403) return JSON.stringify({ ok: true, meta: null });
      if (!resp.ok) throw new TesseraError("http", `HTTP ${resp.status} for ${full}`);
      text = await cappedText(resp, full, LIMITS.metadataBytes);
    }
    return JSON.stringify({ ok: true, meta: parseJSON(text, url + key) });
  } catch (e) {
    return JSON.stringify({ ok: false, error: describe(e) });
  }
}

// Read a box of an array; `sel` is a list of [start, stop] pairs or null
// (whole dimension).  Returns {ok, data (TypedArray), shape, dtype}.
export async function read(url, path, sel, whole) {
  try {
    const src = await source(url);
    const arr = await array(src, whole ? "region" : "pixel", path);
    const selection = Array.from(sel, (s) => (s == null ? null : zarr.slice(s[0], s[1])));
    const out = await zarr.get(arr, selection);
    return { ok: true, data: out.data, shape: out.shape, dtype: arr.dtype };
  } catch (e) {
    return { ok: false, error: describe(e) };
  }
}

// ---------------------------------------------------------------- geography --
// Coastlines and country borders from world-atlas (Natural Earth) TopoJSON, self-hosted
// in vendor/world-atlas/.  Decoded and projected to Web Mercator here, in JS, so Python
// gets flat x/y arrays (NaN between lines) ready for one Bokeh line glyph per layer,
// plus each country's name and lon/lat box for the "go to" box.
const R_MERC = 6378137.0;
const MAX_LAT = 85.05112878;

function lines(multi) {
  let n = 0;
  for (const line of multi.coordinates) n += line.length + 1;
  const xs = new Float64Array(n), ys = new Float64Array(n);
  let i = 0;
  for (const line of multi.coordinates) {
    for (const [lon, lat] of line) {
      const phi = (Math.max(-MAX_LAT, Math.min(MAX_LAT, lat)) * Math.PI) / 180;
      xs[i] = (lon * Math.PI * R_MERC) / 180;
      ys[i] = R_MERC * Math.log(Math.tan(Math.PI / 4 + phi / 2));
      i += 1;
    }
    xs[i] = NaN;
    ys[i] = NaN;
    i += 1;
  }
  return { xs, ys };
}

// The lon/lat box of a country's largest polygon (by points): a country split by the
// antimeridian or with far islands is framed on its main land.
function mainBox(geometry) {
  const polys = geometry.type === "Polygon" ? [geometry.coordinates] : geometry.type === "MultiPolygon" ? geometry.coordinates : [];
  let best = null, size = -1;
  for (const poly of polys) {
    const ring = poly[0] || [];
    if (ring.length > size) {
      size = ring.length;
      best = ring;
    }
  }
  if (!best) return null;
  let w = Infinity, s = Infinity, e = -Infinity, n = -Infinity, w2 = Infinity, e2 = -Infinity;
  for (const [lon, lat] of best) {
    const lon2 = lon < 0 ? lon + 360 : lon; // the same ring seen across the antimeridian
    w = Math.min(w, lon); e = Math.max(e, lon); s = Math.min(s, lat); n = Math.max(n, lat);
    w2 = Math.min(w2, lon2); e2 = Math.max(e2, lon2);
  }
  return e2 - w2 < e - w ? [w2 > 180 ? w2 - 360 : w2, s, w2 > 180 ? e2 - 360 : e2, n] : [w, s, e, n];
}

export async function loadGeography(url) {
  const resp = await tracedFetch(new Request(url), "geography");
  if (!resp.ok) throw new TesseraError("http", `HTTP ${resp.status} for ${url}`);
  const topo = parseJSON(await cappedText(resp, url, LIMITS.indexBytes), url);
  const countries = topo.objects.countries;
  const coast = lines(mesh(topo, countries, (a, b) => a === b));
  const borders = lines(mesh(topo, countries, (a, b) => a !== b));
  const places = [];
  for (const f of feature(topo, countries).features) {
    const box = mainBox(f.geometry || {});
    const name = f.properties && f.properties.name;
    if (box && typeof name === "string") places.push([name, box]);
  }
  return { coast_x: coast.xs, coast_y: coast.ys, border_x: borders.xs, border_y: borders.ys,
           places: JSON.stringify(places) };
}
