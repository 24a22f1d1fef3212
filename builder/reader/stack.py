"""Our multi-year index (`tessera-stack:`, builder/virtual/): each zone's embeddings (year, y, x, band) and scales
(year, y, x) reference the year stores' shard files on a leading year axis.  One year of it is a tessera: v1 zone:
`YearOf` presents one year of a stacked array as the (y, x[, band]) array a v1 ZoneView reads, so every read
(points, windows, regions, the xarray engine) is the v1 one."""
from __future__ import annotations

import numpy as np

from builder.core import extensions as ext
from builder.core.bounds import COORD_VALUES_MAX
from builder.reader.base import EmbeddingStore
from builder.reader.layouts import V1, Zone, ZoneView, zone_of_group

STACKED = ("embeddings", "scales")  # the arrays with the year axis a v1 view reads


class YearOf:
    """Year index `t` of a stacked zarr array: its shape, chunks and reads without the leading year axis."""

    def __init__(self, array, t: int):
        self.array, self.t = array, int(t)
        self.shape, self.chunks = tuple(array.shape[1:]), tuple(array.chunks[1:])
        self.shards = tuple(array.shards[1:]) if array.shards else None
        self.dtype, self.ndim = array.dtype, array.ndim - 1
        self.vindex = _YearVindex(self)

    def __getitem__(self, sel):
        return self.array[(self.t, *(sel if isinstance(sel, tuple) else (sel,)))]


class _YearVindex:
    def __init__(self, year: YearOf):
        self.year = year

    def __getitem__(self, sel: tuple):
        shape = np.broadcast_shapes(*(np.shape(s) for s in sel))
        return self.year.array.vindex[(np.full(shape, self.year.t, dtype=np.int64), *sel)]


class YearGroup:
    """One year of a stacked zone group, as the group a v1 ZoneView reads (its stacked arrays only)."""

    def __init__(self, group, t: int):
        self.arrays = {n: YearOf(group[n], t) for n in STACKED}

    def __getitem__(self, name: str) -> YearOf:
        return self.arrays[name]

    def array_keys(self):
        return iter(self.arrays)


class StackStore(EmbeddingStore):
    """Our multi-year index (years.json / years.parquet, or a zarr.json root registering tessera-stack:): the
    years of `tessera-stack:years`, each read as the tessera: v1 year store whose shards it references."""

    rules = V1

    def __init__(self, url: str, group, years: tuple[int, ...]):
        self.url, self._group, self._years = url, group, [int(y) for y in years]
        from builder.reader.store import zone_names  # here: store.py opens this kind
        self._zones = {}
        for name in zone_names(group, url):
            g = group[name]
            try:
                for a in STACKED:
                    if g[a].ndim < 1 or g[a].shape[0] != len(self._years) or len(self._years) > COORD_VALUES_MAX:
                        raise ValueError(f"{a} has shape {g[a].shape}, not {len(self._years)} years "
                                         f"({ext.STACK_YEARS}) first")
                self._zones[name] = zone_of_group(name, dict(g.attrs), YearGroup(g, 0), V1)
            except (KeyError, TypeError, ValueError) as e:
                raise ValueError(f"{url}/{name}: not a readable zone group ({type(e).__name__}: {e})") from None
        if not self._zones:
            raise ValueError(f"{url}: no zone group (utmNN)")

    @property
    def years(self) -> list[int]:
        return sorted(self._years)

    def zones(self, year=None) -> dict[str, Zone]:
        self.year(year)
        return self._zones

    def view(self, zone, year=None) -> ZoneView:
        y = self.year(year)
        if zone not in self._zones:
            raise ValueError(f"{self.url}: no zone {zone!r} in {y} (zones {', '.join(self._zones)})")
        t = self._years.index(y)
        return ZoneView(V1, YearGroup(self._group[zone], t), self._zones[zone], y, None)
