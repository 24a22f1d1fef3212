"""read_region: the window of one zone covering a lon/lat bbox, as a lazy, dask-backed xarray.Dataset.

Streaming: nothing is read until the Dataset is computed (or a block of it: `ds.embeddings.data.blocks`),
and then one 256 x 256 pixel block per dask task, on the store's shard lattice (a tessera: v1 shard; 8x8
inner chunks of a geoemb: shard), so memory stays at a few blocks (32 MiB of float32 each) whatever the
area.  A bbox over several zones' grids raises ValueError naming them: each zone has its own UTM grid,
so pass zone= (one call per zone).
"""
from __future__ import annotations


import xarray as xr

from builder.reader.layouts import BLOCK, Zone, to_crs
from builder.reader.dataset import spatial_ref, zone_dataset


def window(zone: Zone, bbox) -> tuple[int, int, int, int] | None:
    """(r0, r1, c0, c1) of the zone pixels covering bbox (its envelope in the zone's CRS), None if none."""
    w, s, e, n = bbox
    zw, zs, ze, zn = zone.lonlat
    if e < zw or w > ze or n < zs or s > zn:  # not near this zone's grid: do not project it there
        return None
    x0, y0, x1, y1 = to_crs(zone.crs).transform_bounds(w, s, e, n, densify_pts=21)
    return zone.grid.window(x0, y0, x1, y1)


def aligned(a: int, b: int, block: int = BLOCK) -> tuple[int, ...]:
    """Chunk sizes for pixels a:b whose edges fall on multiples of `block` (the shard lattice)."""
    edges = [a, *range((a // block + 1) * block, b, block), b]
    return tuple(int(y - x) for x, y in zip(edges[:-1], edges[1:]))


def read_region(store, bbox, year=None, zone: str | None = None) -> xr.Dataset:
    w, s, e, n = (float(v) for v in bbox)
    if not (w < e and s < n and -180 <= w and e <= 180 and -90 <= s and n <= 90):
        raise ValueError(f"bbox {tuple(bbox)} is not (west, south, east, north) in degrees with west < east, south < north")
    y = store.year(year)
    zones = store.zones(y)
    if zone is not None:
        if zone not in zones:
            raise ValueError(f"{store.url}: no zone {zone!r} in {y} (zones {', '.join(zones)})")
        hits = {zone: window(zones[zone], (w, s, e, n))}
        if hits[zone] is None:
            raise ValueError(f"bbox {(w, s, e, n)} does not overlap {zone} of {store.url} in {y}")
    else:
        hits = {k: win for k, z in zones.items() if (win := window(z, (w, s, e, n))) is not None}
        if not hits:
            raise ValueError(f"bbox {(w, s, e, n)} covers no zone of {store.url} in {y} (zones {', '.join(zones)})")
        if len(hits) > 1:
            raise ValueError(f"bbox {(w, s, e, n)} covers zones {', '.join(sorted(hits))}; pass zone= one of them "
                             "(each zone has its own UTM grid)")
    (name, (r0, r1, c0, c1)), = hits.items()
    ds = zone_dataset([store.view(name, y)], False, drop_variables=("rgb",))
    ds = ds.isel(y=slice(r0, r1), x=slice(c0, c1)).chunk({"y": aligned(r0, r1), "x": aligned(c0, c1), "band": -1})
    g = zones[name].grid
    sp = g.window_attrs(r0, r1, c0, c1)
    ds.attrs.update({**sp, "spatial:dimensions": ["y", "x"], "bbox_lonlat": [w, s, e, n]})
    return ds.assign_coords(spatial_ref=spatial_ref(zones[name].crs, sp["spatial:transform"]))
