// The sharding of an array, read from its metadata document (zarr.json): prefetch.js sizes the shard indexes it
// warms with it, sources.js names the shard of a corrupt chunk.
//
// `shardLayout(meta)` -> {shardShape, chunkShape, key(coords), indexBytes} or null when the array is not sharded
// (`sharding_indexed`) or its shapes do not fit.  shardShape: the array's chunk grid (one shard file per chunk);
// chunkShape: the inner chunks'; key: the file name of chunk coordinates under the array's chunk_key_encoding
// (c/1/2/0, or 1.2.0 for v2); indexBytes: the size of the index at the end of each shard file, or null when it
// cannot be known here (the index at the start, index codecs other than bytes and crc32c).
export function shardLayout(meta) {
  const codecs = meta && meta.codecs;
  if (!Array.isArray(codecs)) return null;
  const sharding = codecs.find((c) => c && c.name === "sharding_indexed");
  const cfg = sharding && sharding.configuration;
  const grid = meta.chunk_grid && meta.chunk_grid.configuration && meta.chunk_grid.configuration.chunk_shape;
  if (!cfg || !Array.isArray(grid) || !Array.isArray(cfg.chunk_shape) || cfg.chunk_shape.length !== grid.length) return null;
  const inner = grid.map((d, i) => d / cfg.chunk_shape[i]);
  if (!inner.every((n) => Number.isInteger(n) && n > 0)) return null;
  let indexBytes = 16 * inner.reduce((a, b) => a * b, 1);
  for (const c of cfg.index_codecs || [{ name: "bytes" }]) {
    if (c && c.name === "crc32c") indexBytes += 4;
    else if (!c || c.name !== "bytes") indexBytes = null;
    if (indexBytes === null) break;
  }
  if ((cfg.index_location || "end") !== "end") indexBytes = null;
  return { shardShape: grid, chunkShape: cfg.chunk_shape, key: chunkKey(meta), indexBytes };
}

// coords -> the name of that chunk's file under the array's chunk_key_encoding.
export function chunkKey(meta) {
  const enc = (meta && meta.chunk_key_encoding) || { name: "default" };
  const v2 = enc.name === "v2";
  const sep = (enc.configuration && enc.configuration.separator) || (v2 ? "." : "/");
  return (coords) => (v2 ? coords.join(sep) : ["c", ...coords].join(sep));
}
