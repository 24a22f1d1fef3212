// The data path's switches, read once as the bundle loads: a page may set window.tesseraBridgeOptions
// before it loads (the worker gets the page's, app/web/worker.js).  Every switch is on in the explorer;
// turning one off is a benchmark's same-run baseline, never a user setting:
//   sharedRanges: the shared range cache (ranges.js);  cacheBytes: its size;  wholeFiles: whole shards kept;
//   prefetchFiles: the most shard indexes warmed per settled view (prefetch.js);
//   verifyChecksums: check every crc32c (sources.js, checksums.js);
//   retries: retry what a busy host failed (fetching.js RETRY; off: one try);
//   sharedFlights: deduplicate reads in flight and coalesce neighbouring ranges (flights.js).
export const options = { sharedRanges: true, cacheBytes: 48 * 2 ** 20, wholeFiles: 64, prefetchFiles: 64,
                         verifyChecksums: true, retries: true, sharedFlights: true,
                         ...(globalThis.tesseraBridgeOptions || {}) };
