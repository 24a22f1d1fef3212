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
      const resp = await tracedFetch(new Request(url));
      if (resp.status === 404) throw new TesseraError("notfound", `no index at ${url} (HTTP 404)`);
      if (!resp.ok) throw new TesseraError("http", `HTTP ${resp.status} for ${url}`);
      const spec = await resp.json();
      // A relocatable index ({{base}} templates written empty) resolves against its own directory.
      if (spec.templates && "base" in spec.templates && !spec.templates.base) {
        spec.templates.base = new URL(".", url).href;
      }
      const ref = ReferenceStore.fromSpec(spec, { fetch: tracedFetchFor(url) });
      pixelStore = ref;
      regionStore = ref;
      const raw = await ref.get("/zarr.json");
      rootMeta = JSON.parse(new TextDecoder().decode(raw));
    } else {
      const base = url.endsWith("/") ? url : url + "/";
      const resp = await tracedFetch(new Request(base + "zarr.json", { headers: { Range: "bytes=0-" } }));
      if (resp.status === 404) throw new TesseraError("notfound", `no Zarr store at ${base} (zarr.json: HTTP 404)`);
      if (!resp.ok && resp.status !== 206) throw new TesseraError("http", `HTTP ${resp.status} for ${base}zarr.json`);
      rootMeta = await resp.json();
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
    return { url, rootMeta, pixel: zarr.root(pixelStore), region: zarr.root(regionStore), arrays: new Map() };
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

// Root metadata (with consolidated children when present), as a JSON string.
export async function openSource(url) {
  try {
    const src = await source(url);
    return JSON.stringify({ ok: true, meta: src.rootMeta });
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
