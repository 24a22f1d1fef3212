// Every byte the browser reads comes through here: `tracedFetch` counts requests
// and bytes (the request log the tests and benchmarks read), retries what a busy
// host or a dropped connection failed (RETRY), turns a host that ignores Range
// (200 instead of 206) into an error rather than silently wrong data, and
// remembers each file's size from Content-Range (app/js/ranges.js turns later
// suffix reads of that file into plain ranges with it).  Documents from
// elsewhere (catalogs, indexes, metadata) are size- and depth-capped.
import KINDS from "./errors.json"; // builder/core/errors.json: builder/site.py copies it here to bundle
import { options } from "./options.js";

export const ERROR_KINDS = KINDS; // the one list, shared with Python (builder/core/source.py reads the same file)

export class TesseraError extends Error {
  constructor(kind, message) {
    super(message);
    if (!(kind in KINDS)) throw new Error(`unknown error kind ${kind} (builder/core/errors.json)`);
    this.kind = kind;
  }
}

export const stats = { requests: 0, bytes: 0, log: [] };

export function resetStats() {
  stats.requests = 0;
  stats.bytes = 0;
  stats.log = [];
}

// Limits on documents that come from a store, a catalog or an index: they are
// data from somewhere else, so neither their size nor their nesting may take
// the tab down (a 300 MB zarr.json exhausts memory; JSON nested 100,000 deep
// overflows CPython's stack in Pyodide, which is fatal to the whole runtime).
export const LIMITS = { metadataBytes: 16 * 2 ** 20, indexBytes: 64 * 2 ** 20, depth: 64 };

// File sizes learnt from Content-Range ("bytes a-b/size"), by URL.
export const fileSizes = new Map();

// Retries of one request: a host under load answers 429 or 5xx (a CDN's 520-527
// too), or drops the connection; the same request usually succeeds a moment
// later.  At most `attempts` tries in all, `baseMs` doubling between them (with
// jitter, so that many readers do not return at once), or the host's Retry-After
// when it sends one, never more than `maxDelayMs`: about 3 s of waiting before a
// request is given up.  Every try is in the request log.
export const RETRY = { attempts: 5, baseMs: 200, maxDelayMs: 10_000,
                       statuses: new Set([408, 425, 429, 500, 502, 503, 504, 520, 521, 522, 523, 524, 525, 526, 527]) };

function retryDelay(attempt, resp) {
  const after = resp?.headers.get("Retry-After");
  const seconds = after === null || after === undefined ? NaN : Number(after);
  const ms = Number.isFinite(seconds) && seconds >= 0 ? seconds * 1000 : RETRY.baseMs * 2 ** attempt * (0.75 + Math.random() / 2);
  return Math.min(ms, RETRY.maxDelayMs);
}

// Waits `ms`, or rejects with an AbortError as soon as `signal` aborts (a cancelled read stops between tries too).
function pause(ms, signal) {
  return new Promise((ok, fail) => {
    if (signal?.aborted) return fail(signal.reason);
    const timer = setTimeout(() => {
      signal?.removeEventListener("abort", stop);
      ok();
    }, ms);
    const stop = () => {
      clearTimeout(timer);
      fail(signal.reason);
    };
    signal?.addEventListener("abort", stop, { once: true });
  });
}

export async function tracedFetch(request, source = null) {
  const attempts = options.retries ? RETRY.attempts : 1;  // one try: a benchmark's baseline only (options.js)
  for (let attempt = 0; ; attempt++) {
    const last = attempt + 1 >= attempts;
    let resp;
    try {
      resp = await fetchOnce(request.clone(), source);
    } catch (err) {
      if (last || !(err instanceof TesseraError) || err.kind !== "network") throw err;
      await pause(retryDelay(attempt, null), request.signal);
      continue;
    }
    if (last || !RETRY.statuses.has(resp.status)) {
      if (RETRY.statuses.has(resp.status)) {
        resp.body?.cancel();
        const tries = attempts === 1 ? "1 attempt" : `${attempts} attempts`;
        throw new TesseraError("http", `HTTP ${resp.status} for ${request.url} after ${tries}`);
      }
      return resp;
    }
    resp.body?.cancel();
    await pause(retryDelay(attempt, resp), request.signal);
  }
}

async function fetchOnce(request, source) {
  const start = performance.timeOrigin + performance.now();  // absolute ms: comparable across the page and the worker
  let resp;
  try {
    resp = await fetch(request);
  } catch (err) {
    if (err.name === "AbortError") throw err;
    stats.log.push({ url: request.url, source, method: request.method, range: request.headers.get("Range"),
                     status: 0, bytes: 0, start, end: performance.timeOrigin + performance.now() });
    throw new TesseraError("network", `could not fetch ${request.url}: the server is unreachable or refused CORS (${err.message})`);
  }
  const head = request.method === "HEAD";
  const len = head ? 0 : Number(resp.headers.get("Content-Length") || 0);
  stats.requests += 1;
  stats.bytes += len;
  stats.log.push({ url: request.url, source, method: request.method, range: request.headers.get("Range"),
                   status: resp.status, bytes: len, start, end: performance.timeOrigin + performance.now() });
  if (request.headers.get("Range") && resp.status === 200) {
    throw new TesseraError("range", `the server ignored an HTTP Range request for ${request.url}; range requests are required`);
  }
  const size = /\/(\d+)$/.exec(resp.headers.get("Content-Range") || "");
  if (size) fileSizes.set(request.url, Number(size[1]));
  return resp;
}

// The body of `resp`, refused as soon as it is known to exceed `limit` bytes
// (from Content-Length when the host sends it, otherwise while streaming).
export async function cappedText(resp, url, limit) {
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
  return decodeText(all, url);
}

// UTF-8 as Python reads a document (builder/core/bounds.py): invalid bytes refuse it, a BOM is kept (and then
// is not JSON) rather than dropped.
export function decodeText(raw, url) {
  try {
    return new TextDecoder("utf-8", { fatal: true, ignoreBOM: true }).decode(raw);
  } catch {
    throw new TesseraError("invalid", `${url} is not UTF-8 text`);
  }
}

// Depth of a parsed JSON value (or any plain value), walked iteratively (no recursion to overflow).
// Every value counts, a number or string too, as in Python's rule (builder/core/bounds.py).
export function checkDepth(value, url, limit = LIMITS.depth) {
  const stack = [[value, 1]];
  while (stack.length) {
    const [v, d] = stack.pop();
    if (d > limit) throw new TesseraError("invalid", `${url} is nested more than ${limit} levels deep`);
    if (v === null || typeof v !== "object") continue;
    for (const child of Array.isArray(v) ? v : Object.values(v)) stack.push([child, d + 1]);
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

// Bytes of a document decoded and checked like a fetched one.
export function parseBytes(raw, url, limit = LIMITS.metadataBytes) {
  if (raw.length > limit) {
    throw new TesseraError("invalid", `${url} is ${raw.length} bytes; documents over ${limit} bytes are refused`);
  }
  return parseJSON(decodeText(raw, url), url);
}

export async function fetchJSONDoc(request, source, limit) {
  const resp = await tracedFetch(request, source);
  if (resp.status === 404) throw new TesseraError("notfound", `${request.url}: HTTP 404`);
  if (!resp.ok) throw new TesseraError("http", `HTTP ${resp.status} for ${request.url}`);
  return parseJSON(await cappedText(resp, request.url, limit), request.url);
}

// Every URL an index refers to must lie on an allowed origin (the index's own,
// the page's and the catalog's): a hostile index must not make the page send
// requests to a third host.  Checked for every reference when the index is
// opened, and again for every request its store makes.
export const catalogOrigins = new Set();

export function allowedOrigins(indexUrl) {
  return new Set([new URL(indexUrl).origin, location.origin, ...catalogOrigins]);
}

export function checkReference(target, indexUrl, allowed, key) {
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
