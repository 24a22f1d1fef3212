// An array's record of the chunks that exist (builder/core/chunkruns.py: the attribute `chunks_present`, at most
// RUNS_MAX runs [row, col0, col1) over the first two dimensions of its outer chunk grid, sorted) as a test
// (i, j) => bool, or null when it has none or one that is not valid (validate reports it): a reader then asks
// for every chunk, taking a missing one as fill.  The preview's global_rgb levels (app/web/preview.js) and every
// array read through the bridge (app/js/sources.js, prefetch.js) use it.
export const ATTR = "chunks_present";
export const RUNS_MAX = 4096;

const shown = (r) => `[${r.join(", ")}]`;  // a run as Python prints it

// The runs `runs` of a record over a grid of rows x cols chunks, checked by ChunkRuns.from_attr's rules
// (builder/core/chunkruns.py), in order, with its messages; an Error naming what is wrong.
export function checkRuns(runs, rows, cols) {
  if (!Array.isArray(runs)) throw new Error(`${ATTR} is not a list`);
  if (runs.length > RUNS_MAX) throw new Error(`${ATTR} has ${runs.length} runs, more than ${RUNS_MAX}`);
  let last = null;
  for (const r of runs) {
    if (!Array.isArray(r) || r.length !== 3 || !r.every(Number.isSafeInteger)) {
      throw new Error(`${ATTR}: a run is not [row, col0, col1] integers: ${String(JSON.stringify(r)).slice(0, 40)}`);
    }
    const [i, a, b] = r;
    if (!(0 <= i && i < rows && 0 <= a && a < b && b <= cols)) {
      throw new Error(`${ATTR}: run ${shown(r)} is outside the level's ${rows}x${cols} chunks`);
    }
    if (last && (i < last[0] || (i === last[0] && (a < last[1] || (a === last[1] && b <= last[2]))))) {
      throw new Error(`${ATTR}: runs are not sorted at ${shown(r)}`);
    }
    if (last && last[0] === i && last[2] > a) throw new Error(`${ATTR}: run ${shown(r)} overlaps the one before`);
    last = r;
  }
  return runs;
}

// Each refused record's line once on the console (an array's record is checked again at each prefetch).
const warned = new Set();

export function chunksPresent(runs, rows, cols) {
  if (runs === undefined || runs === null) return null;
  try {
    checkRuns(runs, rows, cols);
  } catch (e) {
    if (!warned.has(e.message) && warned.size < 100) {
      warned.add(e.message);
      console.warn(`tessera: ${e.message} (the record is ignored: every chunk is asked for)`);
    }
    return null;
  }
  const byRow = new Map();
  for (const [i, a, b] of runs) {
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
