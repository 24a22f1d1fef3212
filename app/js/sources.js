// A source is one store URL (a Zarr v3 store over HTTP, or a Kerchunk JSON reference index ending
// in .json) with its root document and two zarrita stores: `pixel` (fewest bytes) and `region`
// (whole shards), both composed from zarrita's own extensions (withConsolidatedMetadata) and ours
// (app/js/ranges.js).  Arrays are opened through them with every crc32c checked (app/js/checksums.js) and a
// mismatch named: the array, the chunk and its shard (the "corrupt" kind).
import * as zarr from "zarrita";
import ReferenceStore from "@zarrita/storage/ref";
import { LIMITS, TesseraError, allowedOrigins, cappedText, checkReference, fetchJSONDoc, parseBytes,
         parseJSON, tracedFetch } from "./fetching.js";
import { withChunkCache } from "./chunks.js";
import { sharedFetch } from "./flights.js";
import { options, withRootDocument, withSharedRanges, withWholeShards } from "./ranges.js";
import { ChecksumError, Crc32cCodec } from "./checksums.js";
import { recordOf } from "./chunkruns.js";
import { chunkKey, shardLayout } from "./shards.js";

// Every crc32c in a store's codecs is checked (app/js/checksums.js): zarrita's own codec drops the checksum
// unread.  `tesseraBridgeOptions = {verifyChecksums: false}` keeps zarrita's (the benchmark's same-run baseline).
if (options.verifyChecksums) zarr.registry.set("crc32c", () => Crc32cCodec);

const sources = new Map();

function fill(spec) {
  const templates = spec.templates || {};
  return (s) => s.replace(/\{\{(\w+)\}\}/g, (m, k) => (k in templates ? templates[k] : m));
}

function checkIndexReferences(spec, indexUrl, allowed) {
  const f = fill(spec);
  for (const [key, ref] of Object.entries(spec.refs || {})) {
    if (Array.isArray(ref) && typeof ref[0] === "string") checkReference(f(ref[0]), indexUrl, allowed, key);
  }
}

// Statuses zarrita's FetchStore does not know: 403 is how S3-style hosts answer a missing key; any
// other failure is an "http" error with the URL, not zarrita's bare "Unexpected response status".
const storeFetch = (fetchFn) => async (request) => {
  const resp = await fetchFn(request);
  if (resp.status === 403) return new Response(null, { status: 404 });
  if (!resp.ok && resp.status !== 404) throw new TesseraError("http", `HTTP ${resp.status} for ${request.url}`);
  return resp;
};

async function openIndex(url) {
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
  const contained = async (request) => {
    checkReference(request.url, url, allowed, "(request)");
    return sharedFetch(request, url);
  };
  const store = ReferenceStore.fromSpec(spec, { fetch: storeFetch(contained) });
  const raw = await store.get("/zarr.json");
  if (raw === undefined) throw new TesseraError("invalid", `${url} has no root zarr.json reference`);
  const f = fill(spec);
  const locate = (path) => {
    const ref = spec.refs[path.replace(/^\//, "")];
    if (!Array.isArray(ref) || typeof ref[0] !== "string") return null;
    return { url: new URL(f(ref[0]), location.href).href, offset: ref[1] ?? 0, length: ref[2] };
  };
  return { store, raw, rootMeta: parseBytes(raw, url + " (zarr.json)"), locate };
}

async function openHttp(url) {
  const base = url.endsWith("/") ? url : url + "/";
  // Probe that the host honours Range: a 1-byte read of the root document, from the host itself (the
  // browser's HTTP cache answers a range of a file it holds whole with a 206 of its own, and the
  // preview, app/web/preview.js, may have fetched this document whole from a host that ignores Range).
  // Sent with the document's own read (one round trip for both), awaited after it: a missing store is
  // reported as one, not as the probe's failure.
  const probe = tracedFetch(new Request(base + "zarr.json", { headers: { Range: "bytes=0-0" }, cache: "no-store" }));
  probe.catch(() => {});
  const resp = await tracedFetch(new Request(base + "zarr.json", { headers: { Range: "bytes=0-" } }));
  if (resp.status === 404) throw new TesseraError("notfound", `no Zarr store at ${base} (zarr.json: HTTP 404)`);
  if (!resp.ok) throw new TesseraError("http", `HTTP ${resp.status} for ${base}zarr.json`);
  const text = await cappedText(resp, base + "zarr.json", LIMITS.metadataBytes);
  const rootMeta = parseJSON(text, base + "zarr.json");
  // Suffix ranges (bytes=-N) read a shard index in one request, without a HEAD first.
  const store = new zarr.FetchStore(base, { fetch: storeFetch((r) => sharedFetch(r, url)), useSuffixRequest: true });
  await probe;
  const locate = (path) => ({ url: base + path.replace(/^\//, ""), offset: 0, length: undefined });
  return { store, raw: new TextEncoder().encode(text), rootMeta, locate };
}

async function open(url) {
  const { store, raw, rootMeta, locate } = await (url.endsWith(".json") ? openIndex(url) : openHttp(url));
  if (rootMeta === null || typeof rootMeta !== "object" || Array.isArray(rootMeta)) {
    throw new TesseraError("invalid", `${url}: its root zarr.json is not a JSON object`);
  }
  // Array metadata comes from the root's consolidated metadata when it has any: opening an array
  // then costs no request.  A store without it is explored node by node (readNode).
  const meta = await zarr.withMaybeConsolidatedMetadata(withRootDocument(store, { bytes: raw }), { format: "v3" });
  const pixel = options.sharedRanges ? withSharedRanges(meta, { locate }) : meta;
  const region = withWholeShards(meta, { locate });
  return { url, rootMeta, store, pixel: zarr.root(pixel), region: zarr.root(region), arrays: new Map() };
}

export async function source(url) {
  if (!sources.has(url)) {
    const p = open(url);
    sources.set(url, p);
    p.catch(() => sources.delete(url));
  }
  return sources.get(url);
}

// The metadata document of the node at `path` of a zarrita store (size- and depth-checked), or null when it has none.
export async function metadata(store, path) {
  const raw = await store.get(path.replace(/\/+$/, "") + "/zarr.json");
  return raw === undefined ? null : parseBytes(raw, path + "/zarr.json");
}

// What a checksum failure of a chunk read is, in one line naming the array and the chunk: zarrita reports a
// codec's failure without them (a CodecPipelineError, the codec's error its cause).  `coords`: the chunk's
// coordinates in the array's grid of (inner) chunks; sharded arrays name its shard file too.
async function corrupt(arr, coords, err, url) {
  const name = arr.path.replace(/^\/+/, "");
  const meta = await metadata(arr.store, arr.path).catch(() => null);
  const layout = meta && shardLayout(meta);
  if (!layout) {
    const key = meta ? chunkKey(meta)(coords) : coords.join("/");
    return new TesseraError("corrupt", `corrupt chunk: ${name} ${key} (crc32c mismatch) of ${url}`);
  }
  const per = layout.shardShape.map((n, i) => n / layout.chunkShape[i]);
  const shard = layout.key(coords.map((c, i) => Math.floor(c / per[i])));
  if (err.what === "shard index") {
    return new TesseraError("corrupt", `corrupt shard index: ${name} ${shard} (crc32c mismatch) of ${url}`);
  }
  return new TesseraError("corrupt", `corrupt chunk: ${name} ${layout.key(coords)} (crc32c mismatch) in shard ${shard} of ${url}`);
}

const withNamedChecksums = zarr.defineArrayExtension((arr, { url }) => ({
  async getChunk(coords, ...rest) {
    try {
      return await arr.getChunk(coords, ...rest);
    } catch (err) {
      const cause = err instanceof ChecksumError ? err : err && err.cause;
      if (!(cause instanceof ChecksumError)) throw err;
      throw await corrupt(arr, coords, cause, url);
    }
  },
}));

// Typed arrays of the data types whose chunks a record may stand in for with fill (the zone arrays' and levels').
const FILLED = { int8: Int8Array, uint8: Uint8Array, int16: Int16Array, uint16: Uint16Array, int32: Int32Array,
                 uint32: Uint32Array, float32: Float32Array, float64: Float64Array };

// A chunk of a shard (or a chunk) that the array's record says does not exist (app/js/chunkruns.js) is its fill,
// with no request: a sparse store never wrote it (builder/core/chunkruns.py), and asking for it was a failed
// request (a 404 in the page's console) for bytes known to be fill.  zarrita's own fill chunk, built the same way.
const withRecordedChunks = zarr.defineArrayExtension((arr, { has, per }) => ({
  async getChunk(coords, ...rest) {
    if (has(coords.map((c, i) => Math.floor(c / per[i])))) return arr.getChunk(coords, ...rest);
    const shape = arr.chunks, stride = shape.map((_, i) => shape.slice(i + 1).reduce((a, b) => a * b, 1));
    const data = new FILLED[arr.dtype](shape.reduce((a, b) => a * b, 1));
    data.fill(arr.fillValue);
    return { data, shape, stride };
  },
}));

async function recorded(a, loc) {
  const meta = await metadata(loc.store, loc.path).catch(() => null);
  const has = meta && FILLED[a.dtype] ? recordOf(meta) : null;
  if (has === null) return a;
  const outer = meta.chunk_grid.configuration.chunk_shape;
  return withRecordedChunks(a, { has, per: outer.map((n, i) => Math.max(1, Math.round(n / a.chunks[i]))) });
}

// The opened array at `path`, through the pixel or the region store; its big chunks kept decoded (chunks.js), the
// chunks its record says do not exist read as fill (chunkruns.js).
export function array(src, kind, path) {
  const key = kind + ":" + path;
  if (!src.arrays.has(key)) {
    const loc = src[kind].resolve(path);
    const p = zarr.open.v3(loc, { kind: "array" })
      .then((a) => recorded(withChunkCache(withNamedChecksums(a, { url: src.url }), { url: src.url }), loc));
    src.arrays.set(key, p);
    p.catch(() => src.arrays.delete(key));
  }
  return src.arrays.get(key);
}

// The metadata document of the node at `path`, or null when there is none (404, or 403 as S3-style
// hosts answer for a missing key).  Same size and depth limits as the root.
export async function node(url, path) {
  const src = await source(url);
  const key = "/" + path.replace(/^\/+|\/+$/g, "") + "/zarr.json";
  if (url.endsWith(".json")) {
    const raw = await src.store.get(key);
    return raw === undefined ? null : parseBytes(raw, url + key);
  }
  const full = (url.endsWith("/") ? url.slice(0, -1) : url) + key;
  const resp = await tracedFetch(new Request(full), url);
  if (resp.status === 404 || resp.status === 403) return null;
  if (!resp.ok) throw new TesseraError("http", `HTTP ${resp.status} for ${full}`);
  return parseJSON(await cappedText(resp, full, LIMITS.metadataBytes), url + key);
}
