"""Opening a geoemb: store (the TESSERA maintainers' multi-year layout) in the explorer's reader.

The layout's rules (its uuid, axis order, no-data test, zone grid) are builder/core/layout.py's, shared with the
Python reader; this module only finds the store's nodes and fills a StoreModel with them:
  * from the root's consolidated metadata when it has some (no request per node), otherwise
  * by asking for each of the 60 `utmNN/zarr.json` (static HTTP cannot list), then for the arrays used;
  * each zone's years from its `time` array (one small read per zone, at open);
  * the map's overview from `global_rgb` when the store has one; otherwise StoreModel.preview colours the
    smallest nested-depth array `embeddings_d{D}` (D >= 3) the store lists, or `embeddings` itself;
  * each zone's nested depths (Zone.depths), which the tools read first (app/tools/region.py).
"""
from __future__ import annotations

import asyncio

import numpy as np

from builder.core import convention as conv
from builder.core import layout as lay
from builder.core.describe import StoreInfo, levels
from builder.core.describe import zones as describe_zones
from builder.core.source import SourceError


async def _nodes(source, info: StoreInfo) -> dict[str, dict]:
    """Metadata documents by node path: the consolidated ones, or those read one by one."""
    if info.consolidated:
        return info.nodes
    attrs = info.attrs
    names = [conv.zone_group_name(z) for z in range(1, 61)]
    found = await asyncio.gather(*(source.node(n) for n in names))
    nodes = {n: m for n, m in zip(names, found) if m is not None and m.get("node_type") == "group"}
    depths = attrs.get("geoemb:depths")
    depth_names = [lay.depth_name(d) for d in depths[:16] if isinstance(d, int)] if isinstance(depths, list) else []
    keys = [f"{n}/{a}" for n in nodes for a in ("embeddings", *depth_names)]
    g = await source.node(conv.GLOBAL_GROUP)
    if g is not None:
        nodes[conv.GLOBAL_GROUP] = g
        keys += [f"{conv.GLOBAL_GROUP}/{i['asset']}/rgb"
                 for i in (g.get("attributes") or {}).get("multiscales", {}).get("layout", [])]
    found = await asyncio.gather(*(source.node(k) for k in keys))
    nodes.update({k: m for k, m in zip(keys, found) if m is not None})
    return nodes


def depths(arrays: dict) -> tuple[tuple[int, str], ...]:
    """(D, name) of a zone's nested-depth arrays by builder/core/layout.py's rule (nested_depths), ascending."""
    emb = arrays["embeddings"].get("shape")
    if not isinstance(emb, list) or len(emb) != 4 or not all(isinstance(n, int) for n in emb):
        return ()
    shapes = {a: m.get("shape") if isinstance(m, dict) else None for a, m in arrays.items()}
    return lay.nested_depths(shapes, emb, lay.GEOEMB.band_axis)


async def read_geoemb(model, info: StoreInfo) -> None:
    attrs = info.attrs
    model.layout, model.root = info.layout, attrs
    nodes = await _nodes(model.source, info)
    found = {n: z for n, z in describe_zones(nodes).items() if "embeddings" in z.arrays}
    names = sorted(found)
    if not names:
        raise SourceError("invalid", "geoemb: store without a zone group (utmNN with embeddings)")
    times = await asyncio.gather(*(model.source.read(f"{n}/{lay.TIME}", (slice(None),)) for n in names))
    zones = {name: found[name].zone(lay.GEOEMB, has_rgb=False, model_version=str(attrs.get("geoemb:model", "")),
                                    build_version=str(attrs.get("geoemb:build_version", "")),
                                    times=tuple(int(y) for y in np.asarray(t).reshape(-1)),
                                    depths=depths(found[name].arrays))
             for name, t in zip(names, times)}
    model.all_zones = model.zones = zones
    model.years = sorted(set().union(*(z.times for z in zones.values())))
    if not model.years:
        raise SourceError("invalid", "geoemb: store whose zones have no year on their time axis")
    model.levels = list(levels(nodes))
    # The cheapest array holding the first three dimensions of every vector, for the false-colour preview.
    depth = [(d, a) for d, a in zones[names[0]].depths if d >= 3]
    model.preview_array = depth[0][1] if depth else "embeddings"
