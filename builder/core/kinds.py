"""The store kinds the explorer's reader (builder/core/reader.py StoreModel) reads, one class each: what differs
between a `tessera:` year store, a multi-year index (`tessera-stack:`, builder/virtual/: the year stores' arrays
with a leading year axis) and a `geoemb:` store (years on each zone's time axis, any of which the store shows
itself).

StoreModel.open picks one per store from the convention its root registers (builder/core/describe.py
StoreInfo.kind) and keeps it as `model.kind`; the model and its callers ask it, never which kind a store is.
The reading rules of each array layout (axis order, no-data test) stay builder/core/layout.py's.
"""
from __future__ import annotations

import asyncio
import copy

from builder.core import convention as conv
from builder.core.describe import GEOEMB, STACK, TESSERA
from builder.core.geoemb import read_geoemb
from builder.core.source import REGION


class YearStore:
    """A `tessera:` v1 store: one year, the one it shows."""

    async def read(self, model, info, year: int | None):
        """Fill `model` from the store's described root (StoreInfo); the model to show (`year`: the one to show
        first, where the store shows several)."""
        model.year = info.year
        return model.read_root(info)

    def showing(self, model, year: int):
        """`model` showing `year` when this store itself holds that year, else None (the caller opens the catalog's
        store for it)."""
        return model if model.year == year else None

    def own_years(self, model) -> list[int]:
        """The years this store shows by itself (`showing`), which replace its one catalog entry; [] where the
        catalog's year stores show them."""
        return []

    def across_years(self) -> bool:
        """Whether the store reads a pixel in every year it holds (`pixel_years`: the years plot, change)."""
        return False

    def shard_windows(self, model) -> bool:
        """Whether many pixels of one shard are read as one region window of it (StoreModel.vectors_at): where
        region reads fetch whole shards of the year shown."""
        return model.layout.whole_shard_regions

    async def window(self, model, zone, year: int, r0: int, r1: int, c0: int, c1: int, array: str = "embeddings"):
        """(int8 `array` (embeddings or a nested-depth array), float32 scales) of a window of `zone` in `year`, one
        this store holds: (h, w, B) and (h, w), scales NaN wherever there is no data (StoreModel.region)."""
        if year != model.year:
            raise ValueError(f"this store holds {model.year}, not {year}")
        return await asyncio.gather(model.region(zone, array, r0, r1, c0, c1),
                                    model.region(zone, "scales", r0, r1, c0, c1))

    async def pixel_years(self, model, lon: float, lat: float):
        """(zone, row, col, the dequantised vector in every year of `model.years`, None where no data) of the pixel
        under lon/lat; None outside every zone, or for a store of one year."""
        return None


class ManyYears(YearStore):
    """A store holding a pixel's years together (one read gives them all: StoreModel._column)."""

    def across_years(self) -> bool:
        return True

    def shard_windows(self, model) -> bool:
        return False  # a region window would read every year of the shard; pixels are read one by one

    async def pixel_years(self, model, lon, lat):
        hit = model.locate(lon, lat, model.all_zones)
        if hit is None:
            return None
        zone, row, col = hit
        e, s = await model._column(zone, row, col)
        at = {y: i for i, y in enumerate(zone.times)}
        ok = model.layout.valid(s)
        vecs = [conv.dequantise(e[at[y]], s[at[y]]) if y in at and ok[at[y]] else None for y in model.years]
        return zone, row, col, vecs


class YearsIndex(ManyYears):
    """A `tessera-stack:` multi-year index: it shows no year itself (the catalog's year stores do, and their region
    reads fetch whole shards, where the index refers to inner chunks); its windows are read by year index."""

    async def read(self, model, info, year):
        model.years = list(info.years)
        return model.read_root(info, levels=(), code_dims=0)  # no overview levels: each year store has its own

    def showing(self, model, year):
        return None

    async def window(self, model, zone, year, r0, r1, c0, c1, array="embeddings"):
        i = model.years.index(year)  # ValueError for a year the index does not hold
        t, rows, cols = slice(i, i + 1), slice(r0, r1), slice(c0, c1)
        return await asyncio.gather(model.source.read(f"{zone.name}/{array}", (t, rows, cols, slice(None)), REGION),
                                    model.source.read(f"{zone.name}/scales", (t, rows, cols), REGION))


class TimeAxisStore(ManyYears):
    """A `geoemb:` store: it shows any year of its time axis itself, as a copy of the model (same source, metadata
    and caches) whose zones are those holding that year."""

    async def read(self, model, info, year):
        await read_geoemb(model, info)
        return self.showing(model, year if year in model.years else model.years[-1])

    def showing(self, model, year):
        if model.year == year:
            return model
        if year not in model.years:
            return None
        m = copy.copy(model)
        m.year = int(year)
        m.zones = {n: z for n, z in model.all_zones.items() if m.year in z.times}
        m._previews = {}
        return m

    def own_years(self, model):
        return list(model.years)

    async def window(self, model, zone, year, r0, r1, c0, c1, array="embeddings"):
        shown = self.showing(model, year)
        if shown is None:
            raise ValueError(f"year {year} is not on this store's time axis {model.years}")
        return await super().window(shown, zone, year, r0, r1, c0, c1, array)


KINDS = {TESSERA: YearStore(), STACK: YearsIndex(), GEOEMB: TimeAxisStore()}  # by StoreInfo.kind
