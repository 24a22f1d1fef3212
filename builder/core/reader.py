"""The explorer's reader, free of any UI and of any transport: open a store, find pixels, read and compare
embeddings (pure core: stdlib + numpy).

Runs unchanged in Pyodide (over app/reader.py JSSource) and on CPython (over builder/reader/source.py ZarrSource).
"""
from __future__ import annotations

import asyncio

import numpy as np

from builder.core import convention as conv
from builder.core import extensions as ext
from builder.core import layout as lay
from builder.core.describe import TESSERA, Level, StoreError, StoreInfo, describe
from builder.core.geometry import NearestZone
from builder.core.kinds import KINDS, YearStore
from builder.core.pixel import Pixel
from builder.core.source import PIXEL, REGION, Source, SourceError, as_slices
from builder.core.zone import Zone

COLUMNS = 256  # pixels kept, each at every year a store holds (StoreModel._column)
MANY_BATCH = 256  # pixels read at once, one by one, by vectors_of (a label import, labels from a tool's region)
MANY_DENSE = 64  # a shard with at least this many of those pixels is read as one window of it instead


def false_colour(q: np.ndarray, valid: np.ndarray) -> np.ndarray:
    """RGBA of int8 (h, w, 3) embedding dimensions: value v -> 128 + 1.5 v (clipped), a fixed linear map, so
    colours do not change while panning; transparent where there is no data.  The map's preview of a store
    without rgb previews (geoemb:): TESSERA's first dimensions carry the most variance."""
    out = np.zeros(q.shape[:2] + (4,), dtype=np.uint8)
    out[..., :3] = np.clip(128 + 1.5 * q.astype(np.float32), 0, 255).astype(np.uint8)
    out[..., 3] = np.where(valid, 255, 0)
    return out


class StoreModel:
    """A store as the explorer reads it: a tessera: v1 year store, a multi-year index (tessera-stack:) or a
    geoemb: store (years on a time axis), told apart by `kind` (builder/core/kinds.py: `kind.showing(model, year)` gives
    the same geoemb: store at another year, no second open).

    The data-layer API the views and tools use, whatever the layout: `zones`, `locate`, `pixel`, `pixel_at`,
    `pixel_years`, `region` (embeddings (h, w, B) int8, scales (h, w) float32 with NaN wherever there is no
    data), `similarity`.  `jsonschema`: the jsonschema module, which checks the root against the convention's
    schema (builder/core/schemacheck.py: the core cannot import it; the caller hands it in)."""

    def __init__(self, source: Source, *, jsonschema):
        self.source = source
        self.jsonschema = jsonschema
        self.layout: lay.Layout = lay.V1
        self.kind: YearStore = KINDS[TESSERA]  # what differs between store kinds (builder/core/kinds.py), set at open
        self.root: dict = {}
        self.zones: dict[str, Zone] = {}
        self.all_zones: dict[str, Zone] = {}  # geoemb: zones of every year (`zones`: those with the year shown)
        self.levels: list[Level] = []
        self.year: int | None = None
        self.years: list[int] | None = None  # a multi-year index (builder.virtual) or a geoemb: store's years
        self.preview_array: str | None = None  # geoemb: the array the false-colour preview is read from
        self._chunks: dict = {}
        self._previews: dict = {}
        self._columns: dict = {}
        self._codes: dict = {}

    async def open(self, year: int | None = None) -> "StoreModel":
        """Read the root (and, for geoemb:, each zone's time axis: builder/core/kinds.py read); `year`: the geoemb: year to
        show first."""
        doc = await self.source.meta()
        if not isinstance(doc, dict):
            raise SourceError("invalid", "not a tessera store: its root zarr.json is not a JSON object")
        try:
            info = self._describe(doc)
            self.kind = KINDS[info.kind]
            return await self.kind.read(self, info, year)
        except SourceError:
            raise
        except (KeyError, TypeError, ValueError, IndexError, AttributeError) as e:
            # Metadata that passes the root checks but not the zone/level parsing: one line, no traceback.
            what = f"missing {e}" if isinstance(e, KeyError) else str(e)
            raise SourceError("invalid", f"not a tessera store: {what}") from None

    def _describe(self, doc: dict) -> StoreInfo:
        try:
            return describe(doc, jsonschema=self.jsonschema)
        except StoreError as e:
            if e.kind == "version":
                raise SourceError("version", f"this store has tessera:dataset_version={e.version!r}; the explorer "
                                             f"reads {conv.DATASET_VERSION!r} stores only") from None
            raise SourceError("invalid", f"not a tessera store: {e}") from None

    def read_root(self, info: StoreInfo, **zone_fields) -> "StoreModel":
        """Fill the model from a root's consolidated metadata (a year store, a multi-year index: builder/core/kinds.py);
        `zone_fields` override those of every zone (ZoneInfo.zone)."""
        self.root = info.attrs
        if not info.consolidated:
            raise SourceError("invalid", "not a tessera store: no consolidated metadata in its root zarr.json "
                                         "(rebuild or re-consolidate it with zarr.consolidate_metadata)")
        self.layout = info.layout
        self.zones = {n: z.zone(info.layout, times=info.years, **zone_fields) for n, z in info.zones.items()}
        self.all_zones = self.zones
        self.levels = list(info.levels)
        if not self.zones:
            raise SourceError("invalid", "not a tessera store: no zone group (utmNN)")
        return self

    # ------------------------------------------------------------ pixels --
    def locate(self, lon: float, lat: float, zones: dict[str, Zone] | None = None) -> tuple[Zone, int, int] | None:
        """The zone pixel under lon/lat; where zones overlap, the zone whose central meridian is nearest."""
        zs, k, rows, cols = self.locate_many([lon], [lat], zones)
        return None if k[0] < 0 else (zs[k[0]], int(rows[0]), int(cols[0]))

    def locate_many(self, lons, lats, zones: dict[str, Zone] | None = None):
        """`locate` for many points at once: (the zones, each point's index into them or -1 outside every one, rows,
        cols). Where zones overlap, the zone whose central meridian is nearest (the first listed of equals)."""
        zs = list((zones or self.zones).values())
        lon, lat = np.asarray(lons, np.float64), np.asarray(lats, np.float64)
        rows, cols = np.zeros(lon.shape, np.int64), np.zeros(lon.shape, np.int64)
        pick = NearestZone(lon)
        for i, z in enumerate(zs):
            with np.errstate(all="ignore"):  # points far from the zone project to nothing
                r, c = z.to_rowcol(lon, lat)
            hit = pick.offer(i, z.zone, z.near(lon, lat) & z.contains(r, c))
            rows[hit], cols[hit] = r[hit], c[hit]
        return zs, pick.which, rows, cols

    def _t(self, zone: Zone) -> tuple[int, int] | None:
        """The time index of the year shown, as a selection (geoemb:); None for a year store."""
        return self.layout.time_sel(zone.times, self.year)

    async def _box(self, zone: Zone, rows, cols, t, array: str = "embeddings", bands=None, hint: str = PIXEL):
        """(int8 (T?, h, w, B), float32 (T?, h, w)) of a box, whatever the layout's axis order."""
        esel, ssel = (as_slices(b) for b in self.layout.pixel_sel(rows, cols, t, bands))
        e, s = await asyncio.gather(self.source.read(f"{zone.name}/{array}", esel, hint),
                                    self.source.read(f"{zone.name}/scales", ssel, hint))
        return self.layout.to_yxb(e), s

    async def _column(self, zone: Zone, row: int, col: int) -> tuple[np.ndarray, np.ndarray]:
        """A pixel's raw vectors and scales at every time index the store holds for it: (int8 (T, B), float32 (T,)),
        T = 1 for a year store, its years for a multi-year index, its zone's time axis for geoemb: (one inner chunk
        per time index and array).  Kept, the last COLUMNS pixels (shared by every year of a geoemb: store): a
        click on a pixel read ahead (a resting mouse, a finger going down: Explorer.hover), the years plot, a year
        switch and pins read and decode nothing again.  A read in flight is joined, not repeated; a waiter given up
        (cancelled) leaves it to the others; a failed one is not kept (the next asks again)."""
        key = (zone.name, row, col)
        kept = self._columns.get(key)
        if kept is None:
            kept = self._columns[key] = asyncio.ensure_future(self._read_column(zone, row, col))

            def done(f) -> None:
                if self._columns.get(key) is not f:  # let go meanwhile (the oldest): waiters have it still
                    return
                if f.cancelled() or f.exception() is not None:
                    del self._columns[key]
                else:
                    self._columns[key] = f.result()  # the value itself: no future outlives its loop here
            kept.add_done_callback(done)
            while len(self._columns) > COLUMNS:
                self._columns.pop(next(iter(self._columns)))
        return await asyncio.shield(kept) if isinstance(kept, asyncio.Future) else kept

    async def _read_column(self, zone: Zone, row: int, col: int) -> tuple[np.ndarray, np.ndarray]:
        e, s = await self._box(zone, (row, row + 1), (col, col + 1), self.layout.times_sel(len(zone.times)))
        n = s.size
        return e.reshape(n, -1).astype(np.int8), s.reshape(n)

    async def pixel(self, zone: Zone, row: int, col: int) -> Pixel:
        e, s = await self._column(zone, row, col)
        t = self.layout.time_of(zone.times, self.year)
        e, s = e[t], s[t]
        scale = float(s)
        status = str(self.layout.classify(np.array([scale], np.float32))[0])
        vec = None if status != lay.VALID else conv.dequantise(e.astype(np.int8), np.float32(scale))
        lon, lat = zone.centre_lonlat(row, col)
        east, north = zone.utm(row, col)
        return Pixel(zone.name, row, col, lon, lat, east, north, scale, vec, status)

    async def warm_pixels(self, windows: list[tuple[Zone, int, int, int, int]]) -> dict | None:
        """Warm the shard indexes a click in these (zone, r0, r1, c0, c1) windows reads first (embeddings and scales
        of the year shown; geoemb: every time index, as `_column` reads; a multi-year index: every year, as
        `pixel_years` reads): Source.prefetch, when the source prefetches at all."""
        if not self.source.prefetches:
            return None
        items = []
        for zone, r0, r1, c0, c1 in windows:  # every time index, as _column reads them
            esel, ssel = self.layout.pixel_sel((r0, r1), (c0, c1), self.layout.times_sel(len(zone.times)))
            items += [(f"{zone.name}/embeddings", esel), (f"{zone.name}/scales", ssel)]
        return await self.source.prefetch(items)

    async def pixel_at(self, lon: float, lat: float) -> Pixel | None:
        hit = self.locate(lon, lat)
        return None if hit is None else await self.pixel(*hit)

    async def vectors_at(self, lons, lats, progress=None) -> list[np.ndarray | None]:
        """The dequantised vector at each lon/lat (None outside every zone or where there is no data), as pixel_at
        reads it, for many points (a label import): each shard's points together, as one window of that shard where
        they are MANY_DENSE or more (whole shards: one request per shard and array), else pixel by pixel, MANY_BATCH
        at a time. One batch is read at a time, so memory holds at most one shard's window besides the vectors;
        `progress(points done, points)` follows each batch."""
        return await self.vectors_of(*self.locate_many(lons, lats), progress=progress)

    async def vectors_of(self, zs: list[Zone], k, rows, cols, progress=None) -> list[np.ndarray | None]:
        """The dequantised vector of each pixel (zs[k[i]], rows[i], cols[i]) (None where k[i] < 0 or there is no
        data), read as `vectors_at` says: the pixels of a tool's region (Region.label_vectors) go here directly,
        in their own zone (a lon/lat on a zone's edge may land in the neighbouring one)."""
        k, rows, cols = (np.asarray(a, np.int64) for a in (k, rows, cols))
        out: list = [None] * len(k)
        where = np.nonzero(k >= 0)[0]
        done = len(k) - len(where)
        whole = self.kind.shard_windows(self)
        batch: list = []  # (zone, row, col, the points there) read one by one
        shards: dict = {}
        for i in where:
            zone = zs[k[i]]
            shards.setdefault((k[i], rows[i] // zone.shard, cols[i] // zone.shard), {}) \
                .setdefault((int(rows[i]), int(cols[i])), []).append(int(i))
        for (zi, _, _), pixels in shards.items():
            zone = zs[zi]
            if whole and len(pixels) >= MANY_DENSE:
                for (r, c), vec in zip(pixels, await self._window_vectors(zone, list(pixels))):
                    for i in pixels[(r, c)]:
                        out[i] = vec
                done += sum(map(len, pixels.values()))
                if progress:
                    progress(done, len(k))
                continue
            batch += [(zone, r, c, idx) for (r, c), idx in pixels.items()]
            while len(batch) >= MANY_BATCH:
                done += await self._read_batch(batch[:MANY_BATCH], out)
                batch = batch[MANY_BATCH:]
                if progress:
                    progress(done, len(k))
        if batch:
            done += await self._read_batch(batch, out)
            if progress:
                progress(done, len(k))
        return out

    async def _read_batch(self, batch, out: list) -> int:
        """Read the pixels of `batch` [(zone, row, col, point indices)] at once into `out`; the number of points."""
        got = await asyncio.gather(*(self.pixel(zone, r, c) for zone, r, c, _ in batch))
        for (_, _, _, idx), px in zip(batch, got):
            for i in idx:
                out[i] = px.vector
        return sum(len(idx) for *_, idx in batch)

    async def _window_vectors(self, zone: Zone, pixels: list[tuple[int, int]]) -> list[np.ndarray | None]:
        """The vectors of `pixels` [(row, col)] of one shard, from one read of the window that holds them."""
        rs, cs = np.array(pixels).T
        r0, r1, c0, c1 = int(rs.min()), int(rs.max()) + 1, int(cs.min()), int(cs.max()) + 1
        emb, scl = await asyncio.gather(self.region(zone, "embeddings", r0, r1, c0, c1),
                                        self.region(zone, "scales", r0, r1, c0, c1))
        e, s = emb[rs - r0, cs - c0], scl[rs - r0, cs - c0]
        ok = np.isfinite(s)  # region scales are NaN wherever there is no valid data
        vec = conv.dequantise(e.astype(np.int8), s)
        return [vec[j] if ok[j] else None for j in range(len(pixels))]

    async def pixel_years(self, lon: float, lat: float) -> tuple[Zone, int, int, list[np.ndarray | None]] | None:
        """One pixel's dequantised vector in every year of `years` (None where no data), read from a multi-year
        index or a geoemb: store's time axis; None outside every zone or for a year store (builder/core/kinds.py)."""
        return await self.kind.pixel_years(self, lon, lat)

    async def window(self, zone: Zone, year: int, r0: int, r1: int, c0: int, c1: int, array: str = "embeddings"):
        """(int8 `array` (h, w, B): the embeddings or a nested-depth array of them, float32 scales (h, w)) of a
        window of `zone` in `year`, a year this store holds (ValueError for another), however its kind reads it
        (builder/core/kinds.py)."""
        return await self.kind.window(self, zone, year, r0, r1, c0, c1, array)

    # ------------------------------------------------------------ previews --
    async def level_chunk(self, level: Level, ci: int, cj: int) -> np.ndarray:
        """Chunk (ci, cj) of a global_rgb level, padded to the full chunk size (cached)."""
        key = (level.index, ci, cj)
        if key not in self._chunks:
            c = level.chunk
            data = await self.source.read(f"{conv.GLOBAL_GROUP}/{level.index}/rgb",
                                          (slice(ci * c, min((ci + 1) * c, level.height)),
                                           slice(cj * c, min((cj + 1) * c, level.width)), slice(None)), REGION)
            if data.shape[0] < c or data.shape[1] < c:
                pad = np.zeros((c, c, 4), np.uint8)
                pad[: data.shape[0], : data.shape[1]] = data
                data = pad
            self._chunks[key] = data
        return self._chunks[key]

    def has_preview(self, zone: Zone) -> bool:
        return zone.has_rgb or self.preview_array is not None

    async def preview(self, zone: Zone, r0: int, r1: int, c0: int, c1: int) -> np.ndarray:
        """RGBA window of a zone's preview: its rgb array (v1), or false colour from the first three embedding
        dimensions (geoemb:, false_colour).  Each zone's last window read is kept: redraws of a view
        across zones re-read none."""
        key = (r0, r1, c0, c1)
        if self._previews.get(zone.name, (None,))[0] != key:
            if zone.has_rgb:
                rgba = await self.region(zone, "rgb", r0, r1, c0, c1)
            else:
                q, s = await self._box(zone, (r0, r1), (c0, c1), self._t(zone), self.preview_array, (0, 3),
                                       hint=self._region_hint())
                rgba = false_colour(q.reshape(r1 - r0, c1 - c0, 3), self.layout.valid(s.reshape(r1 - r0, c1 - c0)))
            self._previews[zone.name] = (key, rgba)
        return self._previews[zone.name][1]

    # ------------------------------------------------------------ regions --
    def _region_hint(self) -> str:
        """Whole shards for a region where the layout's shards hold whole windows (v1), else inner chunks."""
        return REGION if self.layout.whole_shard_regions else PIXEL

    async def region(self, zone: Zone, array: str, r0: int, r1: int, c0: int, c1: int) -> np.ndarray:
        """A window of a zone array in (h, w[, B]) order: embeddings int8, rgb uint8 (v1 only), scales float32 with
        NaN wherever there is no data (geoemb: +inf too), whatever the layout."""
        hint = self._region_hint()
        if array == "rgb":
            return await self.source.read(f"{zone.name}/rgb", (slice(r0, r1), slice(c0, c1), slice(None)), hint)
        esel, ssel = (as_slices(b) for b in self.layout.pixel_sel((r0, r1), (c0, c1), self._t(zone)))
        if array == "scales":
            s = await self.source.read(f"{zone.name}/scales", ssel, hint)
            return self.layout.nan_nodata(s.reshape(r1 - r0, c1 - c0))
        e = self.layout.to_yxb(await self.source.read(f"{zone.name}/{array}", esel, hint))
        return e.reshape(r1 - r0, c1 - c0, -1)

    # ------------------------------------------------------------ overviews (tessera-ovr:) --
    async def overview(self, zone: Zone, array: str, r0: int, r1: int, c0: int, c1: int) -> np.ndarray:
        """A window of `overviews/{zone.level}/{array}` (embeddings, scales, code, code_scales) in the level's own
        pixels, whole shards; scales with NaN wherever there is no data."""
        a = await self.source.read(f"{zone.name}/{ext.OVR_GROUP}/{zone.level}/{array}",
                                   (slice(r0, r1), slice(c0, c1)) + ((slice(None),) if "scales" not in array else ()),
                                   REGION)
        return a.reshape((r1 - r0, c1 - c0) + a.shape[2:])

    async def code_model(self, zone: Zone):
        """A zone's compact code (builder/core/codes.py: its kind's model arrays, read once, kept)."""
        if zone.name not in self._codes:
            kind = zone.code_kind
            values = await asyncio.gather(*(
                self.source.read(f"{zone.name}/{ext.OVR_GROUP}/{name}", (slice(None),) * len(dims), REGION)
                for name, dims in kind.arrays.items()))
            self._codes[zone.name] = kind.from_arrays(dict(zip(kind.arrays, values)))
        return self._codes[zone.name]

