// Reads that share HTTP requests (a "flight": one request, with its retries, and every read it answers).
//
//  * Deduplication: a read of a URL and range that a flight in the air already covers (the same suffix or whole
//    file, or a byte range inside the flight's) waits for that flight instead of sending its own request.  A flight
//    that fails fails every read it carries with the same error (one retry sequence for all of them, fetching.js).
//  * Coalescing: byte ranges of one file asked for in the same task (zarrita asks for the inner chunks of a shard
//    one after another, without waiting) are gathered until the task ends, and neighbours become one request
//    (SHARING below); each read gets exactly its own bytes, in a Response of its own.
//  * Cancelling: a read whose Request's signal aborts rejects at once with the signal's reason; the flight's
//    request is aborted when every read it carries has been (other readers of it are not disturbed).
//
// Written here rather than taken from zarrita's withRangeCoalescing (0.7.5), which batches one store's ranges per
// microtask but has no cap on a merged request, does not let a later read join a request in flight, aborts a whole
// group when any one caller aborts (AbortSignal.any), and sees one store only: the page's pixel, region and index
// stores read the same files.
//
// Only GETs with no Range, one suffix range or one byte range are shared; anything else (HEAD, several ranges,
// the Range probe's no-store read) is sent as it is.  `tesseraBridgeOptions = {sharedFlights: false}` sends every
// read as its own request: a benchmark's same-run baseline (options.js).
import { tracedFetch } from "./fetching.js";
import { options } from "./options.js";

// The limits of sharing.  Gaps: two ranges of one file at most `gapBytes` apart are read as one request, the gap's
// bytes read and dropped; 64 KiB take less time than one more round trip on any link faster than about 5 Mbit/s at
// 100 ms of latency (and a busy CDN answers fewer requests faster).  Size: no merged request exceeds `mergedBytes`
// (8 MiB), so that a read does not wait long for bytes other reads asked for; a single range larger than that is
// still read, alone.  Table: at most `flights` requests are shared at once; beyond that a read gets a request of
// its own, unshared (a burst of thousands of reads does not grow the table without end).
export const SHARING = { gapBytes: 64 * 2 ** 10, mergedBytes: 8 * 2 ** 20, flights: 256 };

export const flightStats = { flights: 0, joined: 0, coalesced: 0 };

const flights = new Map();  // url -> Set of flights in the air
let flying = 0;             // how many flights the table holds
const pending = new Map();  // url -> ranges waiting for the end of the task
let flushing = false;

// The Range header as {kind: "whole"} | {kind: "suffix", n} | {kind: "range", start, end} (end exclusive), or
// null for what is not shared.
function wanted(range) {
  if (range === null) return { kind: "whole" };
  let m = /^bytes=(\d+)-(\d+)$/.exec(range.trim());
  if (m) return { kind: "range", start: Number(m[1]), end: Number(m[2]) + 1 };
  m = /^bytes=-(\d+)$/.exec(range.trim());
  if (m) return { kind: "suffix", n: Number(m[1]) };
  return null;
}

function covers(flight, want) {
  if (flight.aborted) return false;
  const w = flight.want;
  if (w.kind !== want.kind) return false;
  if (w.kind === "range") return w.start <= want.start && want.end <= w.end;
  return w.kind === "whole" || w.n === want.n;
}

function findFlight(url, want) {
  for (const f of flights.get(url) || []) if (covers(f, want)) return f;
  return null;
}

function forget(flight) {
  const set = flights.get(flight.url);
  if (set && set.delete(flight)) {
    flying -= 1;
    if (!set.size) flights.delete(flight.url);
  }
}

// One request for `want` of `url`, its headers those of `template`; registered in the table when there is room.
function launch(url, want, template, source) {
  const controller = new AbortController();
  const headers = new Headers(template.headers);
  if (want.kind === "range") headers.set("Range", `bytes=${want.start}-${want.end - 1}`);
  const request = new Request(template, { headers, signal: controller.signal });
  const flight = { url, want, controller, readers: 0, aborted: false, received: 0, total: null };
  flight.promise = (async () => {
    const resp = await tracedFetch(request, source);
    const status = resp.status;
    const contentRange = resp.headers.get("Content-Range");
    if (!resp.ok || !resp.body) {
      resp.body?.cancel();
      return { status, contentRange, bytes: null };
    }
    flight.total = Number(resp.headers.get("Content-Length")) || null;
    const reader = resp.body.getReader();
    const parts = [];
    for (;;) {
      const { done, value } = await reader.read();
      if (done) break;
      parts.push(value);
      flight.received += value.length;
    }
    const bytes = new Uint8Array(flight.received);
    let at = 0;
    for (const p of parts) {
      bytes.set(p, at);
      at += p.length;
    }
    return { status, contentRange, bytes };
  })();
  flight.promise.then(() => forget(flight), () => forget(flight));
  flightStats.flights += 1;
  if (flying < SHARING.flights) {
    if (!flights.has(url)) flights.set(url, new Set());
    flights.get(url).add(flight);
    flying += 1;
  }
  return flight;
}

// The Response a read of `want` gets from its flight's result: its own bytes, with the Content-Range of them.
function answer(result, flightWant, want) {
  const { status, contentRange, bytes } = result;
  if (bytes === null) return new Response(null, { status });
  if (want.kind !== "range" || flightWant.kind !== "range") {
    const headers = contentRange ? { "Content-Range": contentRange } : {};
    return new Response(bytes.slice(), { status, headers: { ...headers, "Content-Length": String(bytes.length) } });
  }
  const m = /bytes (\d+)-\d+\/(\d+|\*)/.exec(contentRange || "");
  const first = m ? Number(m[1]) : flightWant.start;
  const from = want.start - first;
  if (from < 0 || from >= bytes.length) return new Response(null, { status: 416 });  // past the end of the file
  const part = bytes.slice(from, Math.min(bytes.length, want.end - first));
  const size = m ? m[2] : "*";
  return new Response(part, { status: 206, headers: { "Content-Range": `bytes ${want.start}-${want.start + part.length - 1}/${size}`,
                                                       "Content-Length": String(part.length) } });
}

// A read carried by `flight`: resolves to its own Response, or rejects with the flight's error, or with the
// reason of `signal` as soon as it aborts.
function join(flight, want, signal) {
  flight.readers += 1;
  return new Promise((resolve, reject) => {
    let settled = false;
    const leave = () => {
      if (settled) return;
      settled = true;
      flight.readers -= 1;
      reject(signal.reason);
      if (flight.readers === 0) {  // nobody waits for it any more
        flight.aborted = true;
        forget(flight);
        flight.controller.abort(signal.reason);
      }
    };
    if (signal.aborted) return leave();
    signal.addEventListener("abort", leave, { once: true });
    flight.promise.then((result) => {
      if (settled) return;
      settled = true;
      signal.removeEventListener("abort", leave);
      resolve(answer(result, flight.want, want));
    }, (err) => {
      if (settled) return;
      settled = true;
      signal.removeEventListener("abort", leave);
      reject(err);
    });
  });
}

// The end of the task: each file's waiting ranges, in order, become flights of neighbours (SHARING).
function flush() {
  flushing = false;
  const batches = [...pending.entries()];
  pending.clear();
  for (const [url, reads] of batches) {
    const live = reads.filter((r) => {
      if (!r.request.signal.aborted) return true;
      r.reject(r.request.signal.reason);
      return false;
    });
    live.sort((a, b) => a.want.start - b.want.start);
    let group = null;
    const groups = [];
    for (const r of live) {
      if (group && r.want.start - group.end <= SHARING.gapBytes && Math.max(group.end, r.want.end) - group.start <= SHARING.mergedBytes) {
        group.end = Math.max(group.end, r.want.end);
        group.reads.push(r);
      } else {
        group = { start: r.want.start, end: r.want.end, reads: [r] };
        groups.push(group);
      }
    }
    for (const g of groups) {
      const want = { kind: "range", start: g.start, end: g.end };
      const flight = findFlight(url, want) || launch(url, want, g.reads[0].request, g.reads[0].source);
      if (g.reads.length > 1) flightStats.coalesced += g.reads.length - 1;
      for (const r of g.reads) join(flight, r.want, r.request.signal).then(r.resolve, r.reject);
    }
  }
}

// `tracedFetch` with deduplication and coalescing; the fetch of the explorer's zarrita stores (sources.js).
export function sharedFetch(request, source = null) {
  const want = options.sharedFlights && request.method === "GET" && request.cache !== "no-store"
    ? wanted(request.headers.get("Range")) : null;
  if (want === null) return tracedFetch(request, source);
  const flight = findFlight(request.url, want);
  if (flight) {
    flightStats.joined += 1;
    return join(flight, want, request.signal);
  }
  if (want.kind !== "range") return join(launch(request.url, want, request, source), want, request.signal);
  return new Promise((resolve, reject) => {
    if (!pending.has(request.url)) pending.set(request.url, []);
    pending.get(request.url).push({ want, request, source, resolve, reject });
    if (!flushing) {
      flushing = true;
      setTimeout(flush, 0);
    }
  });
}

// Bytes of the flights in the air: {received, total} (total: what their Content-Lengths announced so far).
export function flightProgress() {
  let received = 0;
  let total = 0;
  for (const set of flights.values()) {
    for (const f of set) {
      received += f.received;
      total += f.total ?? 0;
    }
  }
  return { received, total };
}
