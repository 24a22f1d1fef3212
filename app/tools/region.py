"""The view's region: the embeddings of the pixels under the map view, in every zone the view shows.

A view that spans UTM zones is read in each of them (`Regions`: one `Region` per zone, the zone holding the
view's centre first, the primary); the tools run on all the parts' pixels together and give one `Layer` per
zone (a Layer's `parts`).  Each zone is read on its own grid, as follows.  A zone with embedding overviews
(tessera-ovr:) is read at the level whose pixel is the finest still at least the view's metres per screen
pixel (`level_for`), over the whole view: its full vectors when they fit budgets.REGION_BYTES (and
budgets.MAX_REGION per side; level 0 only), else its compact code (builder/core/codes.py, a few bytes per pixel;
`Region.vectors` reconstructs B-d float32 vectors from it, and similarity runs on the code itself).  A zone
without overviews (geoemb:, a multi-year index, a store built with --no-overviews) is read at 10 m, at most
budgets.MAX_REGION (768) pixels per side around the view's centre: a zoomed-out view is capped, and `describe`
says so; a zone with nested-depth arrays (geoemb: `embeddings_d{D}`, the first D values of every vector) is read
from the one of depth TOOL_DEPTH (`depth_of`) unless the exact result is asked for, and its vectors are those D
values (vectors from elsewhere, a selection's or labels', are cut to them: `Region.fit`).  Tool results are
`Layer`s on the same (level) zone window, drawn into the view with the renderer's sampling and read back at a
lon/lat.
"""
from __future__ import annotations

import asyncio
from dataclasses import dataclass, replace

import numpy as np

from app import render
from builder.core.reader import StoreModel
from builder.core.zone import Zone
from app import budgets  # MAX_REGION, looked up at call time
from builder.core import convention as conv
from builder.core.quant import cosine_map


@dataclass
class Region:
    zone: Zone  # at the level read (Zone.at_level): rows, cols and exports in that level's pixels
    window: tuple[int, int, int, int]  # r0, r1, c0, c1 in the zone's (level) grid
    full: tuple[int, int, int, int]  # the view's whole window in the zone, before the cap
    dense: np.ndarray | None = None  # float32 (H, W, B) full vectors, NaN where there is no data
    coords: np.ndarray | None = None  # float32 (H, W, C): the compact code's coordinates (NaN in [..., 0]: no data)
    code: object | None = None  # the compact code (builder/core/codes.py) whose coordinates `coords` are
    overview: bool = False  # read by overview level (read_level), not by the capped 10 m path
    depth: int = 0  # read from the nested-depth array of this depth (the vectors' first `depth` values); 0: not

    @property
    def coded(self) -> bool:
        return self.coords is not None

    @property
    def vectors(self) -> np.ndarray:
        """float32 (H, W, B): the full vectors, or the code's reconstructions (formed on first use)."""
        if self.dense is None:
            self.dense = self.code.vectors(self.coords)
        return self.dense

    @property
    def valid(self) -> np.ndarray:
        return np.isfinite((self.coords if self.coded else self.dense)[..., 0])

    @property
    def capped(self) -> bool:
        return self.window != self.full

    @property
    def bands(self) -> int:
        """B, the vectors' length (the code's reconstructions' too)."""
        return self.dense.shape[-1] if self.dense is not None else self.code.bands

    def at(self, rows, cols) -> np.ndarray:
        """(N, B) float32 vectors of window pixels (rows, cols), without forming the whole window's vectors."""
        if self.dense is None:
            return self.code.vectors(self.coords[rows, cols])
        return self.dense[rows, cols]

    async def label_vectors(self, model: StoreModel, rows, cols, progress=None):
        """(rows, cols, (n, B) vectors) for labels of window pixels (rows, cols) with data: `at` (no read), except
        for a region read at a nested depth, whose pixels' full vectors are read from `model`, the store it was read
        from at its year (Regions.model), in batches (StoreModel.vectors_of, `progress` after each); labels keep full
        vectors, which every region `fit`s to its own.  A pixel without a full vector there is left out."""
        rows, cols = np.asarray(rows), np.asarray(cols)
        if not self.depth:
            return rows, cols, self.at(rows, cols)
        got = await model.vectors_of([self.zone], np.zeros(len(rows), np.int64), rows + self.window[0],
                                     cols + self.window[2], progress)
        ok = np.array([v is not None for v in got], bool)
        vectors = np.array([v for v in got if v is not None], np.float32).reshape(int(ok.sum()), self.zone.n_bands)
        return rows[ok], cols[ok], vectors

    def fit(self, vectors: np.ndarray) -> np.ndarray:
        """Full vectors (..., B) from elsewhere (a selection, labels) as this region holds them: their first
        `depth` values when it was read at a nested depth (each such array holds exactly those), else unchanged."""
        return np.asarray(vectors)[..., :self.depth] if self.depth else np.asarray(vectors)

    def cosines(self, target: np.ndarray) -> np.ndarray:
        """(H, W) cosine of every pixel with `target` (NaN where no data); on the code itself when coded."""
        if self.coded:
            return self.code.cosine(self.coords, target)
        return cosine_map(self.vectors, self.fit(target))

    @property
    def read_as(self) -> str:
        """What the region was read as, in words (read_words)."""
        if self.coded:
            return read_words("code", self.zone.n_bands, self.code.dims, type(self.code))
        return read_words("depth" if self.depth else "vectors", self.zone.n_bands, self.depth)

    def spread(self, values: np.ndarray, fill=np.nan, dtype=np.float32) -> np.ndarray:
        """Per-valid-pixel values (N,) laid back on the window (H, W), `fill` elsewhere."""
        out = np.full(self.valid.shape, fill, dtype=dtype)
        out[self.valid] = values
        return out


class Pixels:
    """The (N, B) float32 vectors of regions' valid pixels (part by part, each in row-major order), formed only for
    the rows a slice or an index array asks for.  A coded view's vectors would otherwise be formed whole: a screen
    of 1600 x 1000 pixels is 0.8 GB as float32, more than Pyodide's heap gives, so the tools go through this in
    blocks (lazy.chunked) or by sample.  numpy has no lazy matrix product, hence this small class."""

    def __init__(self, parts: list[Region]):
        self.parts = parts
        self.valid = [np.flatnonzero(p.valid) for p in parts]  # flat indices of each part's valid pixels
        self.starts = np.cumsum([0] + [len(v) for v in self.valid])
        self.shape = (int(self.starts[-1]), parts[0].bands if parts else 0)

    def __len__(self) -> int:
        return self.shape[0]

    def _rows(self, part: int, index: np.ndarray) -> np.ndarray:
        p, flat = self.parts[part], self.valid[part][index]
        if p.dense is not None:
            return p.dense.reshape(-1, p.dense.shape[-1])[flat]
        return p.code.vectors(p.coords.reshape(-1, p.coords.shape[-1])[flat])

    def __array__(self, dtype=None, copy=None) -> np.ndarray:
        """All of them at once (np.asarray): for a tool that wants them whole, at its memory's cost."""
        out = self[:]
        return out if dtype is None else out.astype(dtype)

    def __getitem__(self, key) -> np.ndarray:
        if np.ndim(key) == 0 and not isinstance(key, slice):  # one row
            return self[np.array([key])][0]
        index = np.arange(len(self))[key] if isinstance(key, slice) else np.asarray(key, dtype=np.int64)
        out = np.empty((len(index), self.shape[1]), np.float32)
        for i in range(len(self.parts)):
            mine = (index >= self.starts[i]) & (index < self.starts[i + 1])
            if mine.any():
                out[mine] = self._rows(i, index[mine] - self.starts[i])
        return out


@dataclass
class Regions:
    """The view's region in each zone it shows: parts[0] is the primary zone's (the view's centre)."""

    parts: list[Region]
    model: StoreModel | None = None  # the store, at the year, the parts were read from (labels read full vectors there)

    @property
    def primary(self) -> Region:
        return self.parts[0]

    @property
    def n_valid(self) -> int:
        return sum(int(p.valid.sum()) for p in self.parts)

    def fit(self, vectors: np.ndarray) -> np.ndarray:
        """Full vectors from elsewhere (labels) as every part holds them (Region.fit; the parts agree: `agreed`)."""
        return self.primary.fit(vectors)

    def pixels(self) -> "Pixels":
        """(N, B) vectors of every part's valid pixels: part by part, each in row-major order (formed per slice)."""
        return Pixels(self.parts)

    def split(self, values: np.ndarray) -> list[np.ndarray]:
        """Per-valid-pixel values (N,) in pixels() order, cut into the parts' pieces."""
        return np.split(np.asarray(values), np.cumsum([int(p.valid.sum()) for p in self.parts])[:-1])

    def spread(self, values: np.ndarray, fill=np.nan, dtype=np.float32) -> list[np.ndarray]:
        """Per-valid-pixel values (N,) in pixels() order laid back on each part's window."""
        return [p.spread(v, fill, dtype) for p, v in zip(self.parts, self.split(values))]

    def layer(self, name: str, values: list[np.ndarray], colour=None) -> "Layer":
        """The Layer of per-part values (H, W) coloured by `colour(values)` (None: coloured when drawn)."""
        return joined([Layer(name, p.zone, p.window, v, None if colour is None else colour(v), read=p.read_as)
                       for p, v in zip(self.parts, values)])


def joined(zones: list["Layer"]) -> "Layer":
    """One Layer of per-zone Layers (each without parts of its own): the first is the primary."""
    return replace(zones[0], parts=tuple(zones[1:]))


@dataclass
class Layer:
    """A tool's result on a zone window: values (H, W) (NaN where none) and their RGBA colouring (None: coloured
    when drawn, by the caller's colouring); `parts`: the same layer on the view's other zones (Layers
    without parts of their own).  zone, window and values are the primary zone's (what a GeoTIFF holds)."""

    name: str
    zone: Zone
    window: tuple[int, int, int, int]
    values: np.ndarray
    rgba: np.ndarray | None
    parts: tuple["Layer", ...] = ()
    read: str = ""  # what its values were computed from (Region.read_as): "depth 16 of 128", "full 128-d vectors"..

    @property
    def all(self) -> tuple["Layer", ...]:
        """This layer's zones: the primary one, then the others."""
        return (replace(self, parts=()), *self.parts)

    def values_all(self) -> np.ndarray:
        """Every zone's values, flattened together (counts and histograms over the whole layer)."""
        return np.concatenate([p.values.ravel() for p in self.all])

    def recoloured(self, colour) -> "Layer":
        """The same values, each zone's coloured by `colour(values)`."""
        return joined([replace(p, rgba=colour(p.values)) for p in self.all])

    def value_at(self, lon: float, lat: float) -> float | None:
        """The value under lon/lat in whichever zone's window has one (zones do not overlap on the ground)."""
        for p in self.all:
            x = value_at(p.zone, p.window, p.values, lon, lat)
            if x is not None:
                return x
        return None

    def image(self, v: render.View, colour=None) -> np.ndarray:
        """An RGBA image of every zone's window sampled into the view (`colour(values)` when given, else rgba);
        each zone's pixels drawn only where they are not transparent, so zones never hide each other; the primary
        zone last, on top where grids overlap on the ground (as value_at reads it first)."""
        out = np.zeros((v.height, v.width, 4), np.uint8)
        for p in reversed(self.all):
            img = window_image(p.zone, p.window, p.rgba if colour is None else colour(p.values), v)
            seen = img[..., 3] > 0
            out[seen] = img[seen]
        return out


def zones_in_view(model: StoreModel, v: render.View) -> list[tuple[Zone, tuple]]:
    """(zone, window) of every zone the view shows (render.edge_window): the one holding its centre first (else
    the one with the largest window), then the others by window area."""
    lon, lat = v.lonlat_grid()
    hit = model.locate(float(lon[v.height // 2, v.width // 2]), float(lat[v.height // 2, v.width // 2]))
    wins = {z.name: render.edge_window(z, v) for z in model.zones.values()}
    wins = {k: w for k, w in wins.items() if w is not None}
    order = sorted(wins, key=lambda k: -(wins[k][1] - wins[k][0]) * (wins[k][3] - wins[k][2]))
    if hit is not None and hit[0].name in wins:
        order.remove(hit[0].name)
        order.insert(0, hit[0].name)
    return [(model.zones[k], wins[k]) for k in order]


def cap(window: tuple[int, int, int, int], centre: tuple[int, int], size: int):
    """`window` cut to at most `size` per side, around `centre` (row, col) as far as the window allows."""
    out = []
    for (a, b), c in zip((window[:2], window[2:]), centre):
        if b - a > size:
            a = min(max(a, c - size // 2), b - size)
            b = a + size
        out += [a, b]
    return tuple(out)


async def read_window(model: StoreModel, zone: Zone, window, year: int | None = None,
                      depth: int = 0) -> np.ndarray:
    """Dequantised (H, W, B) over `window` of `zone` in `model`; NaN outside the zone's grid.

    `year`: one the store holds (a multi-year index's, a geoemb: store's); None: the year it shows. `depth`:
    (H, W, depth) from the zone's nested-depth array of that depth."""
    r0, r1, c0, c1 = window
    out = np.full((r1 - r0, c1 - c0, depth or zone.n_bands), np.nan, np.float32)
    a0, a1, b0, b1 = max(r0, 0), min(r1, zone.height), max(c0, 0), min(c1, zone.width)
    if a0 >= a1 or b0 >= b1:
        return out
    emb, scl = await model.window(zone, model.year if year is None else year, a0, a1, b0, b1,
                                  depth_array(zone, depth))
    shape = (a1 - a0, b1 - b0)
    out[a0 - r0:a1 - r0, b0 - c0:b1 - c0] = conv.dequantise(emb.reshape(*shape, -1).astype(np.int8),
                                                            scl.reshape(shape))
    return out


def view_window(model: StoreModel, v: render.View):
    """(zone, capped window, full window) of the view's primary zone, or None when the view shows no zone."""
    got = view_windows(model, v)
    return got[0] if got else None


def view_windows(model: StoreModel, v: render.View) -> list:
    """(zone, capped window, full window) of every zone the view shows (zones_in_view's order): the primary zone's
    capped at budgets.MAX_REGION per side around the view's centre; each other zone without overviews (read by these
    10 m windows) cut to the ground of the primary's capped window (its map box), so a capped view is one patch
    of ground, not the primary's square and a strip of the next zone far from it, and left out when that box
    misses it.  Zones with overviews are read by level windows over the whole view (zone_plan) instead."""
    got = zones_in_view(model, v)
    if not got:
        return []
    zone, full = got[0]
    first = cap(full, centre(zone, v), budgets.MAX_REGION)
    out = [(zone, first, full)]
    box = render.window_view(zone, first) if first != tuple(full) else v
    for other, full in got[1:]:
        if overviews(other):
            out.append((other, cap(full, centre(other, v), budgets.MAX_REGION), full))
            continue
        w = render.edge_window(other, box)
        w = None if w is None else (max(w[0], full[0]), min(w[1], full[1]), max(w[2], full[2]), min(w[3], full[3]))
        if w is not None and w[0] < w[1] and w[2] < w[3]:
            out.append((other, cap(w, centre(other, v), budgets.MAX_REGION), full))
    return out


def centre(zone: Zone, v: render.View) -> tuple[int, int]:
    """The (level) zone pixel (row, col) under the view's centre."""
    lon, lat = v.lonlat_grid()
    cr, cc = zone.to_rowcol(float(lon[v.height // 2, v.width // 2]), float(lat[v.height // 2, v.width // 2]))
    return int(cr), int(cc)


FULL_BYTES = 4  # bytes per pixel of a read besides its B (vectors) or depth int8 values: the scale (a code: its bytes_per_pixel)


def level_for(zone: Zone, v: render.View) -> int:
    """The finest overview level of `zone` whose pixel is at least the view's metres per screen pixel (the
    coarsest level when none is); 0 for a zone without overviews."""
    m = v.metres_per_pixel() * (1 - 1e-6)
    k = 0
    while k + 1 < len(zone.levels) and zone.levels[k].pixel < m:
        k += 1
    return k


def full_bytes(zone: Zone, window) -> int:
    """What the full vectors of a (level) zone window cost to read, about: B int8 values and a scale per pixel."""
    r0, r1, c0, c1 = window
    return (r1 - r0) * (c1 - c0) * (zone.n_bands + FULL_BYTES)


def use_for(zone: Zone, window, exact: bool = False) -> str:
    """What a (level) zone window is read as: "vectors" (its level's full B-d vectors) when they fit
    budgets.REGION_BYTES (and, at level 0, budgets.MAX_REGION per side), or when the exact result is asked for
    (`exact`; the caller keeps the window within budgets.EXACT_PIXELS); else "code" (the level's compact code, a
    first, approximate answer: benchmarks/accuracy.py measures how approximate on data like real embeddings)."""
    r0, r1, c0, c1 = window
    if exact:
        return "vectors"
    fits = (zone.level > 0 or max(r1 - r0, c1 - c0) <= budgets.MAX_REGION) \
        and full_bytes(zone, window) <= budgets.REGION_BYTES
    return "vectors" if fits else "code"


def overviews(zone: Zone) -> bool:
    return bool(zone.levels) and budgets.OVERVIEWS


TOOL_DEPTH = 16  # the nested depth tools read first: 1/8 of the bytes, 39 % of real top-100 neighbours (depth 4: 3 %)


def depth_of(zone: Zone) -> int:
    """The nested depth a zone's 10 m windows are read at first: the smallest of its depths (Zone.depths) at least
    TOOL_DEPTH; 0 when it has none."""
    return next((d for d, _ in zone.depths if d >= TOOL_DEPTH), 0)


def depth_array(zone: Zone, depth: int) -> str:
    """The array of a zone's nested depth, by the name the store gives it (Zone.depths); 0: `embeddings`."""
    return dict(zone.depths)[depth] if depth else "embeddings"


def tenm_use(zone: Zone, exact: bool = False) -> str:
    """What a 10 m window of a zone without overviews is read as: "depth" (depth_of's array) when the zone has one
    and the exact result is not asked for, else "vectors" (its full `embeddings`)."""
    return "depth" if depth_of(zone) and not exact else "vectors"


def plan_depth(zone: Zone, use: str) -> int:
    """The nested depth a 10 m window of `zone` planned as `use` ("depth" | "vectors" | "code") is read at: depth_of
    for "depth", else 0 (the full vectors)."""
    return depth_of(zone) if use == "depth" else 0


def read_words(use: str, bands: int, dims: int = 0, kind=None) -> str:
    """What a read as `use` is, in words, for the tools' layers, status and cost lines: "full 128-d vectors" (B
    `bands`), "depth 16 of 128" (`dims`: the depth), the code's own words (`kind`: its class, builder/core/codes.py;
    `dims`: its dimensions), e.g. "the 8-d compact code"."""
    if use == "code":
        return kind.words(dims)
    if use == "depth":
        return f"depth {dims} of {bands}"
    return f"full {bands}-d vectors"


def agreed(ps: list) -> list:
    """Plans whose zones hold vectors of one length: a zone read at a depth among others read otherwise, or at
    another depth, is read whole (the tools put every zone's pixels together)."""
    depths = {plan_depth(p[0], p[3]) for p in ps}
    if len(depths) > 1 and any(p[3] == "depth" for p in ps):
        return [p[:3] + ("vectors",) if p[3] == "depth" else p for p in ps]
    return ps


def zone_plan(model: StoreModel, v: render.View, zone: Zone, capped, full, exact: bool = False):
    """(zone at its level, window, full window, "vectors" | "code" | "depth") of the view in `zone`: without
    overviews the capped 10 m window, read as tenm_use says; with them the whole view on the grid of the level
    level_for picks, as full vectors when they fit the budget or `exact` asks for them, else as the level's compact
    code."""
    if not overviews(zone):
        return zone, capped, full, tenm_use(zone, exact)
    lz = zone.at_level(level_for(zone, v))
    window = render.edge_window(lz, v)
    if window is None:
        return zone, capped, full, "vectors"
    return lz, window, window, use_for(lz, window, exact)


def plans(model: StoreModel, v: render.View, exact: bool = False) -> list:
    """zone_plan of every zone the view shows, the primary zone first ([] when it shows none)."""
    return agreed([zone_plan(model, v, *w, exact=exact) for w in view_windows(model, v)])


class TooLarge(ValueError):
    """The exact result of a view holding more pixels than budgets.EXACT_PIXELS in one zone."""


def check_exact(ps: list) -> None:
    """Refuse (TooLarge, one line) plans whose full vectors exceed budgets.EXACT_PIXELS in a zone."""
    for zone, window, _, use in ps:
        r0, r1, c0, c1 = window
        if use == "vectors" and (r1 - r0) * (c1 - c0) > budgets.EXACT_PIXELS:
            raise TooLarge(f"the exact result of this view needs {(r1 - r0) * (c1 - c0):,} {zone.pixel:g} m pixels of "
                           f"{zone.name}, more than {budgets.EXACT_PIXELS:,}: zoom in, or use the compact code")


def cost(ps: list) -> tuple[int, int]:
    """(bytes of the plans as they are, bytes of the same windows' full vectors), about: what a tool reads now, and
    what its exact result would read."""
    now = exact = 0
    for zone, window, _, use in ps:
        full = full_bytes(zone, window)
        exact += full
        if use == "vectors":
            now += full
        else:
            r0, r1, c0, c1 = window
            per_pixel = zone.code_kind.bytes_per_pixel(zone.code_dims) if use == "code" else depth_of(zone) + FULL_BYTES
            now += (r1 - r0) * (c1 - c0) * per_pixel
    return now, exact


def plan(model: StoreModel, v: render.View):
    """The primary zone's plan (plans' first: what a one-CRS export holds), or None when the view shows no zone."""
    got = plans(model, v)
    return got[0] if got else None


def tool_windows(app, model: StoreModel | None = None) -> list:
    """(zone, window, full window) of every zone a tool reads at 10 m without overviews: a link's windows (its
    order, `app.tool_window`) while its layer is re-run, else the view's capped ones (view_windows)."""
    model = model or app.model
    if app.tool_window is None:
        return view_windows(model, app.render_view())
    out = []
    for name, _level, window in app.tool_window:
        zone = model.zones.get(name)
        if zone is not None:
            out.append((zone, tuple(window), tuple(window)))
    return out


def tool_plans(app, model: StoreModel | None = None) -> list:
    """plans() of the region a tool runs on: a link's windows while its tool layer is re-run (`app.tool_window`:
    [(zone name, overview level, window), ...], the primary first; set by app/tools/share.py), else the view's."""
    model = model or app.model
    exact = bool(getattr(app, "exact", False))
    if app.tool_window is None:
        out = plans(model, app.render_view(), exact)
    else:
        out = []
        for name, level, window in app.tool_window:
            zone = model.zones.get(name)
            if zone is None:
                continue
            if not overviews(zone):
                out.append((zone, tuple(window), tuple(window), tenm_use(zone, exact)))
            else:
                lz = zone.at_level(level)
                out.append((lz, tuple(window), tuple(window), use_for(lz, window, exact)))
        out = agreed(out)
    if exact:
        check_exact(out)
    return out


async def read_level(model: StoreModel, zone: Zone, window, use: str) -> Region:
    """The region of a (level) zone window: full vectors (level 0: the zone's own arrays) or the compact code;
    NaN where the window leaves the level's grid (another year's store, app/tools/change.py)."""
    r0, r1, c0, c1 = window
    if use == "vectors" and zone.level == 0:
        return Region(zone, window, window, await read_window(model, zone, window), overview=True)
    a0, a1, b0, b1 = max(r0, 0), min(r1, zone.height), max(c0, 0), min(c1, zone.width)
    inside = (slice(a0 - r0, a1 - r0), slice(b0 - c0, b1 - c0))

    async def padded(values, scales, depth: int, decode) -> np.ndarray:
        out = np.full((r1 - r0, c1 - c0, depth), np.nan, np.float32)
        if a0 < a1 and b0 < b1:
            q, s = await asyncio.gather(model.overview(zone, values, a0, a1, b0, b1),
                                        model.overview(zone, scales, a0, a1, b0, b1))
            out[inside] = decode(q, s)
        return out

    if use == "vectors":
        return Region(zone, window, window, await padded("embeddings", "scales", zone.n_bands,
                                                         lambda q, s: conv.dequantise(q.astype(np.int8), s)),
                      overview=True)
    code = await model.code_model(zone)
    return Region(zone, window, window, coords=await padded("code", "code_scales", code.width, code.coords), code=code,
                  overview=True)


async def read_plan(model: StoreModel, p) -> Region | None:
    """The Region of one zone's plan (None: no zone)."""
    if p is None:
        return None
    zone, window, full, use = p
    if overviews(zone):
        return await read_level(model, zone, window, use)
    depth = plan_depth(zone, use)
    return Region(zone, window, full, await read_window(model, zone, window, depth=depth), depth=depth)


async def read_plans(model: StoreModel, ps: list) -> Regions | None:
    """The Regions of plans() (the zones read together); None when there is none."""
    if not ps:
        return None
    return Regions(list(await asyncio.gather(*(read_plan(model, p) for p in ps))), model)


async def read(model: StoreModel, v: render.View, exact: bool = False) -> Regions | None:
    """The view's region in every zone (plans), as full vectors everywhere when `exact` (TooLarge past
    budgets.EXACT_PIXELS in a zone)."""
    ps = plans(model, v, exact)
    if exact:
        check_exact(ps)
    return await read_plans(model, ps)


async def read_tool(app) -> Regions | None:
    """The region a tool runs on (tool_plans), in every zone."""
    return await read_plans(app.model, tool_plans(app))


def describe_one(region: Region) -> str:
    """Where a tool ran in one zone, as plain text (the caller escapes it): the zone window, the overview level
    and what was read (full vectors, a nested depth or the compact code), and the cap when it cut the view."""
    r0, r1, c0, c1 = region.window
    z = region.zone
    text = f"{z.name} rows {r0}-{r1}, cols {c0}-{c1} ({int(region.valid.sum()):,} valid pixels)"
    if region.overview:
        text += f"; overview level {z.level} ({z.pixel:g} m pixels), {region.read_as}"
    elif region.depth:
        text += f"; {region.read_as} (the exact result reads the full vectors)"
    elif z.depths:  # a zone with nested depths read whole: the exact result
        text += f"; {region.read_as}"
    if region.capped:
        f = region.full
        text += (f"; the view covers {f[1] - f[0]} x {f[3] - f[2]} px of {z.name}, capped at "
                 f"{budgets.MAX_REGION} px per side around its centre")
    return text


def describe(region) -> str:
    """Where a tool ran (describe_one of each zone of a Regions, or of one Region; plain text)."""
    parts = region.parts if isinstance(region, Regions) else [region]
    if len(parts) == 1:
        return describe_one(parts[0])
    return f"{len(parts)} zones: " + " + ".join(describe_one(p) for p in parts)


def value_at(zone: Zone, window, values: np.ndarray, lon: float, lat: float) -> float | None:
    """values[row, col] under lon/lat (None outside the window or where there is no value)."""
    r0, r1, c0, c1 = window
    row, col = zone.to_rowcol(float(lon), float(lat))
    if not (r0 <= row < r1 and c0 <= col < c1):
        return None
    x = values[int(row) - r0, int(col) - c0]
    return float(x) if np.isfinite(x) else None


def window_image(zone: Zone, window, rgba: np.ndarray, v: render.View) -> np.ndarray:
    """An RGBA image of a zone window sampled into the view (transparent elsewhere); only the screen pixels the
    window covers are projected (render.screen_box)."""
    out = np.zeros((v.height, v.width, 4), np.uint8)
    box = render.screen_box(zone, window, v)
    if box is None:
        return out
    i0, i1, j0, j1 = box
    lon, lat = v.lonlat_grid()
    row, col = zone.to_rowcol(lon[i0:i1, j0:j1], lat[i0:i1, j0:j1])
    render.sample_window(rgba, window[0], window[2], row, col, np.ones(row.shape, bool), out[i0:i1, j0:j1])
    return out
