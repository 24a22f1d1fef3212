// An array's record of the chunks that exist (builder/core/chunkruns.py: the attribute `chunks_present`, at most
// RUNS_MAX runs [row, col0, col1) over the first two dimensions of its outer chunk grid, sorted) as a test
// (i, j) => bool, or null when it has none or one that is not valid (validate reports it): a reader then asks
// for every chunk, taking a missing one as fill.  The preview's global_rgb levels (app/web/preview.js) and every
// array read through the bridge (app/js/sources.js, prefetch.js) use it.
export const RUNS_MAX = 4096;

export function chunksPresent(runs, rows, cols) {
  if (!Array.isArray(runs) || runs.length > RUNS_MAX) return null;
  const byRow = new Map();
  for (const r of runs) {
    if (!Array.isArray(r) || r.length !== 3 || !r.every(Number.isSafeInteger)) return null;
    const [i, a, b] = r;
    if (i < 0 || i >= rows || a < 0 || a >= b || b > cols) return null;
    if (!byRow.has(i)) byRow.set(i, []);
    byRow.get(i).push([a, b]);
  }
  return (i, j) => (byRow.get(i) || []).some(([a, b]) => a <= j && j < b);
}

// The record of an array from its metadata document (zarr.json): a test on the coordinates of its outer chunks
// (shards for a sharded array), or null when it has none that applies (not valid, or an outer grid more than
// one chunk wide past its first two dimensions: the record does not say which of those exist).
export function recordOf(meta) {
  const outer = meta?.chunk_grid?.configuration?.chunk_shape, shape = meta?.shape;
  const runs = meta?.attributes?.chunks_present;
  if (runs === undefined || !Array.isArray(outer) || !Array.isArray(shape) || shape.length < 2
      || outer.length !== shape.length || !outer.every((c) => Number.isSafeInteger(c) && c > 0)) return null;
  const grid = shape.map((n, i) => Math.ceil(n / outer[i]));
  if (grid.slice(2).some((n) => n !== 1)) return null;
  const has = chunksPresent(runs, grid[0], grid[1]);
  return has && ((coords) => has(coords[0], coords[1]));
}
