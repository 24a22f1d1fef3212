// Warming the shard indexes of the shards in view, so that a click there costs one round trip (its
// chunk) instead of two (the shard's index, then its chunk).
//
// `prefetchIndexes(url, items)`: items are [path, sel] pairs, `sel` a box of the array (one [start, stop]
// pair or null per dimension, as `read` takes).  Each shard file the boxes touch has its index read the
// way zarrita's sharding codec reads it (a suffix range of the same length, through the same pixel store),
// so the bytes land in the shared range cache (ranges.js) and the click's index read is answered from
// memory; a click that comes while a prefetch read is under way waits for those bytes (one request).
//
// Shards the array's record says do not exist (app/js/chunkruns.js) are not asked for.
//
// Bounded: at most `options.prefetchFiles` shard files per call, nearest the boxes' centres first, two
// requests at a time (a click's own reads never queue behind a burst of them); a newer call (the view
// moved on) supersedes it: what it has not started is dropped.  Does nothing without the shared range
// cache (`sharedRanges: false`, the benchmark's baseline), and for arrays whose index it cannot size
// (not sharded, index at the start, index codecs other than bytes and crc32c): it is an optimisation only.
import { recordOf } from "./chunkruns.js";
import { options } from "./ranges.js";
import { shardLayout } from "./shards.js";
import { metadata, source } from "./sources.js";

export const prefetchStats = { calls: 0, files: 0, bytes: 0 };
let generation = 0;

// Shard coordinates a box touches, nearest its centre first.
function shardsOf(shape, shardShape, sel) {
  const ranges = shape.map((n, i) => {
    const [a, b] = sel[i] == null ? [0, n] : [Math.max(0, sel[i][0]), Math.min(n, sel[i][1])];
    return b <= a ? [] : Array.from({ length: Math.floor((b - 1) / shardShape[i]) - Math.floor(a / shardShape[i]) + 1 },
                                    (_, k) => Math.floor(a / shardShape[i]) + k);
  });
  let out = [[]];
  for (const r of ranges) out = out.flatMap((c) => r.map((i) => [...c, i]));
  const mid = ranges.map((r) => (r.length ? (r[0] + r[r.length - 1]) / 2 : 0));
  const dist = (c) => c.reduce((s, x, i) => s + (x - mid[i]) ** 2, 0);
  return out.filter((c) => c.length === shape.length).sort((p, q) => dist(p) - dist(q));
}

// -> {files, bytes, superseded}: the shard indexes this call read (or found read), and whether a newer
// call stopped it before the end.
export async function prefetchIndexes(url, items) {
  const mine = ++generation;
  if (!options.sharedRanges || !items.length) return { files: 0, bytes: 0, superseded: false };
  prefetchStats.calls += 1;
  const src = await source(url);
  const tasks = [];
  for (const [path, sel] of items) {
    const loc = src.pixel.resolve(path);
    const meta = await metadata(loc.store, loc.path).catch(() => null);
    const plan = meta && meta.node_type === "array" ? shardLayout(meta) : null;
    if (plan === null || plan.indexBytes === null || sel.length !== meta.shape.length) continue;
    const has = recordOf(meta) || (() => true);  // the shards that exist, when recorded (chunkruns.js)
    shardsOf(meta.shape, plan.shardShape, sel).filter(has).forEach((coords, rank) =>
      tasks.push({ rank, path: `${loc.path}/${plan.key(coords)}`, suffixLength: plan.indexBytes }));
  }
  tasks.sort((a, b) => a.rank - b.rank);  // the boxes' central shards first, array after array
  const todo = tasks.slice(0, options.prefetchFiles);
  const done = { files: 0, bytes: 0, superseded: false };
  const store = src.pixel.store;
  const worker = async () => {
    for (let t = todo.shift(); t; t = todo.shift()) {
      if (mine !== generation) {
        done.superseded = true;
        return;
      }
      // A missing shard (404: no data there) or a failed read is left to the click, which reports it.
      const bytes = await store.getRange(t.path, { suffixLength: t.suffixLength }).catch(() => undefined);
      if (bytes) {
        done.files += 1;
        done.bytes += bytes.length;
        prefetchStats.files += 1;
        prefetchStats.bytes += bytes.length;
      }
    }
  };
  await Promise.all([worker(), worker()]);
  done.superseded ||= mine !== generation; // a newer call came while the last reads were under way
  return done;
}
