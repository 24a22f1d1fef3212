"""The store layouts a reader meets, and the rules that differ between them (pure core: stdlib + numpy).

* `tessera:` v1 (builder/core/convention.py; what this project builds): one store per year; zone arrays
  embeddings (H, W, B) and scales (H, W); NaN scale = no data.  v1 records water and missing coverage
  alike as NaN (the land mask is applied at build time and not stored), so a v1 NaN is "nodata".
* `geoemb:` (the TESSERA maintainers' multi-year layout, the geo-embeddings
  `embeddings-zarr-convention` v1): years on a
  `time` axis; embeddings (T, B, H, W), scales (T, H, W); finite scale = valid, NaN = water, +inf = no data
  (also the fill of unwritten shards); zone grids always in the northern CRS EPSG:326NN, southern data at
  negative northings; inner chunks 32 x 32 (all bands, 128 KiB), shards 4096 x 4096.

Which layout a store follows is read from its root's `zarr_conventions` uuids (`root_kind`).  The Python
reader (builder/reader/) and the explorer's (builder/core/reader.py, shipped to the browser with this module) both
take these rules from here.
"""
from __future__ import annotations

import numpy as np

from builder.core import convention as conv
from builder.core import extensions as ext
from builder.core.grid import ZoneGrid

GEOEMB_UUID = "61c12cc5-0e28-4056-999a-480cf3fb7e4c"
TIME = "time"  # geoemb: the coordinate array (calendar years) of each zone's time axis
VALID, WATER, NODATA, OUTSIDE = "valid", "water", "nodata", "outside"


def root_kind(attrs: dict) -> str | None:
    """"tessera:", "tessera-stack:" or "geoemb:" from the uuids a store root registers; None for none of them."""
    convs = attrs.get("zarr_conventions") if isinstance(attrs, dict) else None
    uuids = {c.get("uuid") for c in convs if isinstance(c, dict)} if isinstance(convs, list) else set()
    for kind, uuid in (("tessera-stack:", ext.STACK["uuid"]), ("tessera:", conv.TESSERA["uuid"]),
                       ("geoemb:", GEOEMB_UUID)):
        if uuid in uuids:
            return kind
    return None


def neither(attrs: dict) -> str:
    """The one-line reason a store root is of no layout this project reads."""
    convs = attrs.get("zarr_conventions") if isinstance(attrs, dict) else None
    convs = [c for c in convs if isinstance(c, dict)] if isinstance(convs, list) else []
    shown = [f"{str(c.get('name'))[:80]} ({str(c.get('uuid'))[:80]})" for c in convs[:5]]  # one short line
    found = ", ".join(shown + ([f"and {len(convs) - 5} more"] if len(convs) > 5 else [])) or "none"
    return f"neither a tessera: v1 nor a geoemb: store (its zarr_conventions: {found})"


class Layout:
    name = ""
    time_axis = False  # one store holds its years on a time axis and shows any of them (geoemb:)
    yx = (0, 1)  # axes of y and x in the embeddings array
    band_axis = 2
    # Region reads fetch whole shards (one GET each) when inner chunks are tiny (v1: 4x4, 2 KiB) and a shard
    # is small (8 MiB); geoemb: inner chunks are 128 KiB and a shard 2 GiB, so its regions are ranged
    # inner-chunk reads.
    whole_shard_regions = True

    def valid(self, scales) -> np.ndarray:
        raise NotImplementedError

    def classify(self, scales) -> np.ndarray:
        raise NotImplementedError

    def dequantise(self, q: np.ndarray, scales) -> np.ndarray:
        """float32 (..., B) by the convention's formula, NaN wherever the scale is not valid."""
        with np.errstate(invalid="ignore", over="ignore"):  # inf * 0 on geoemb: no-data pixels, masked below
            v = conv.dequantise(q, scales)
        return np.where(self.valid(scales)[..., None], v, np.float32(np.nan))

    def nan_nodata(self, scales) -> np.ndarray:
        """float32 scales with NaN wherever there is no data (the v1 rule, one test for callers)."""
        s = np.asarray(scales, dtype=np.float32)
        return np.where(self.valid(s), s, np.float32(np.nan))

    def zone_grid(self, attrs: dict, shard_shape, where: str = "") -> ZoneGrid:
        """A zone group's grid from its proj:/spatial: attributes and the embeddings' shard shape."""
        grid = ZoneGrid.from_attrs(attrs, int(shard_shape[self.yx[0]]))  # ValueError for attributes of no grid
        t = attrs["spatial:transform"]
        if (t[0], -t[4]) != (conv.PIXEL_SIZE, conv.PIXEL_SIZE):
            raise ValueError(f"{where}: pixel size {t[0]} x {-t[4]} m; only {conv.PIXEL_SIZE} m grids are read")
        return grid

    def pixel_sel(self, rows: tuple[int, int], cols: tuple[int, int], t: tuple[int, int] | None,
                  bands: tuple[int, int] | None = None) -> tuple[list, list]:
        """Selections ([start, stop) or None per axis) of (embeddings, scales) for a box of rows x cols at
        time indexes t (geoemb:) or of the one year (v1).  `to_yxb` puts what they read in (T?, h, w, B)."""
        raise NotImplementedError

    def to_yxb(self, q: np.ndarray) -> np.ndarray:
        return q

    def times_sel(self, n: int) -> tuple[int, int] | None:
        """The time selection of every one of a zone's `n` time indexes (None: its arrays have no time axis)."""
        return None

    def time_sel(self, times, year: int | None) -> tuple[int, int] | None:
        """The time selection of `year` among a zone's `times` (None: its arrays have no time axis)."""
        return None

    def time_of(self, times, year: int | None) -> int:
        """Which of the time indexes a `times_sel` read holds is `year`'s (0: the one year of a year store)."""
        return 0


class TimeAxis:
    """The rules of arrays with a time axis (geoemb:, a multi-year index): selections by time index."""

    def times_sel(self, n):
        return (0, int(n))

    def time_sel(self, times, year):
        t = time_index(times, year)
        return (t, t + 1)

    def time_of(self, times, year):
        return time_index(times, year)


class TesseraV1(Layout):
    name = "tessera:v1"

    def valid(self, scales):
        return conv.valid_mask(scales)

    def classify(self, scales):
        return np.where(self.valid(scales), VALID, NODATA).astype(object)

    def pixel_sel(self, rows, cols, t, bands=None):
        return [rows, cols, bands], [rows, cols]


class TesseraStack(TesseraV1):
    """A multi-year index of v1 year stores (tessera-stack:, builder/virtual/): the v1 arrays with a leading year
    axis, embeddings (T, H, W, B) and scales (T, H, W).  A model of it reads every year of a pixel (`times_sel`);
    it shows no year of its own (the year stores do), so `time_sel` and `time_of` stay v1's."""

    name = "tessera-stack:"
    yx = (1, 2)
    band_axis = 3

    times_sel = TimeAxis.times_sel

    def pixel_sel(self, rows, cols, t, bands=None):
        return [t, rows, cols, bands], [t, rows, cols]


class Geoemb(TimeAxis, Layout):
    name = "geoemb:"
    time_axis = True
    yx = (2, 3)
    band_axis = 1
    whole_shard_regions = False

    def valid(self, scales):
        return np.isfinite(scales)

    def classify(self, scales):
        s = np.asarray(scales)
        return np.where(np.isfinite(s), VALID, np.where(np.isnan(s), WATER, NODATA)).astype(object)

    def pixel_sel(self, rows, cols, t, bands=None):
        return [t, bands, rows, cols], [t, rows, cols]

    def to_yxb(self, q):
        return np.moveaxis(q, 1, -1)  # (T, B, h, w) -> (T, h, w, B)


V1, STACK, GEOEMB = TesseraV1(), TesseraStack(), Geoemb()


def time_index(years, year: int) -> int:
    """The index of `year` on a zone's time axis (ValueError when the zone has no such year)."""
    ys = [int(y) for y in years]
    if int(year) not in ys:
        raise ValueError(f"year {year} is not on the time axis {ys}")
    return ys.index(int(year))


DEPTH_PREFIX = "embeddings_d"  # a nested-depth array's name: the prefix and D in ASCII decimal digits
DEPTH_DIGITS = 4  # the most digits of D parsed (no model has 10,000 dimensions): store text bounded before int()


def depth_name(depth: int) -> str:
    """The convention's name of the nested-depth array of `depth`, for a reader that cannot list a zone's arrays
    (static HTTP without consolidated metadata) and asks for it by name; names found are parsed by depth_arrays."""
    return f"{DEPTH_PREFIX}{int(depth)}"


def depth_arrays(names) -> list[tuple[int, str]]:
    """(D, name) of the arrays named as nested-depth arrays `embeddings_d{D}` among array names (D as written:
    `embeddings_d016` is 16), smallest D first; their shapes are depth_fault's to check."""
    out = []
    for n in names:
        digits = n[len(DEPTH_PREFIX):] if isinstance(n, str) and n.startswith(DEPTH_PREFIX) else ""
        if 0 < len(digits) <= DEPTH_DIGITS and digits.isascii() and digits.isdigit():
            out.append((int(digits), n))
    return sorted(out)


def depth_fault(depth: int, shape, emb_shape, band_axis: int) -> str | None:
    """Why an array of `shape` named as depth `depth` is no nested-depth array of embeddings of `emb_shape` (a
    phrase for one line), None when it is one.  A nested depth is a lower-dimensional prefix of the vectors
    (geoemb:depths): the embeddings' shape with D bands, 1 <= D < B."""
    emb = list(emb_shape)
    bands = int(emb[band_axis])
    if not 1 <= depth < bands:
        return f"{depth} bands; a nested depth has 1 to {bands - 1} of the embeddings' {bands}"
    want = emb[:band_axis] + [depth] + emb[band_axis + 1:]
    got = list(shape) if isinstance(shape, (list, tuple)) else shape
    if got != want:
        return f"shape {str(shape)[:80]}, the embeddings' {tuple(emb)} with {depth} bands needs {tuple(want)}"
    return None


def nested_depths(shapes: dict, emb_shape, band_axis: int) -> tuple[tuple[int, str], ...]:
    """(D, name) of a zone's nested-depth arrays among `shapes` (array name -> shape): those depth_arrays names and
    depth_fault finds none in, smallest D first, the first name of each D; the others are no depth of the zone."""
    out: dict[int, str] = {}
    for d, name in depth_arrays(shapes):
        if d not in out and depth_fault(d, shapes[name], emb_shape, band_axis) is None:
            out[d] = name
    return tuple(out.items())
