"""TESSERA source tiles, in the layout the geotessera library distributes them.

    ROOT/
      global_0.1_degree_representation/{year}/grid_{lon:.2f}_{lat:.2f}/
          grid_{lon:.2f}_{lat:.2f}.npy          int8    (H, W, B)   quantised embeddings
          grid_{lon:.2f}_{lat:.2f}_scales.npy   float32 (H, W)      per-pixel scales
      global_0.1_degree_tiff_all/
          grid_{lon:.2f}_{lat:.2f}.tiff         uint8   (H, W)      landmask, 0 = water,
                                                                     carries the tile's UTM CRS
                                                                     and transform

Tiles are 0.1 degree cells named by their centre.  A tile's CRS is the UTM
zone of its own landmask GeoTIFF, and it lands in that zone's group even when
it straddles a zone boundary.

Everything here reads through fsspec, so ROOT may be a local directory or a
URL (s3://, http://).  Headers are parsed from the first bytes of each file
(range reads); pixel data is read only when a shard needs it.

A tile's fingerprint (what the build record compares to decide whether a tile
changed) is a BLAKE2b digest of the bytes of its three files, read in bounded
blocks.  Sizes and mtimes are not trusted: a file rewritten in place keeps its
size, its mtime can be restored, and http/s3 may give no mtime at all.
"""
from __future__ import annotations

import dataclasses
import hashlib
import math
import re
from dataclasses import dataclass
from functools import cached_property, lru_cache

import fsspec
import numpy as np
from numpy.lib import format as npy_format
from pyproj import Transformer

from builder.core import convention as conv
from builder.errors import BuildError
from builder.geotiff import read_band, read_geoinfo

EMBEDDINGS_DIR = "global_0.1_degree_representation"
LANDMASKS_DIR = "global_0.1_degree_tiff_all"
_GRID_RE = re.compile(r"grid_(-?\d+\.\d+)_(-?\d+\.\d+)")  # a tile's whole name (fullmatch: no "\n" after it)
TILE_DEG = 0.1  # tiles are 0.1 degree cells, named by their centre
HASH_BLOCK = 4 << 20  # bytes read at a time while fingerprinting (bounded memory; ranged reads on URLs)


def grid_name(lon: float, lat: float) -> str:
    return f"grid_{lon:.2f}_{lat:.2f}"


def _join(root: str, *parts: str) -> str:
    return "/".join([root.rstrip("/"), *parts])


@dataclass(frozen=True)
class TileRef:
    """Where one tile's three files are."""

    root: str
    year: int
    name: str

    @property
    def embeddings_url(self) -> str:
        return _join(self.root, EMBEDDINGS_DIR, str(self.year), self.name, f"{self.name}.npy")

    @property
    def scales_url(self) -> str:
        return _join(self.root, EMBEDDINGS_DIR, str(self.year), self.name, f"{self.name}_scales.npy")

    @property
    def landmask_url(self) -> str:
        return _join(self.root, LANDMASKS_DIR, f"{self.name}.tiff")

    @property
    def lonlat(self) -> tuple[float, float]:
        m = _GRID_RE.fullmatch(self.name)
        return float(m.group(1)), float(m.group(2))


@dataclass(frozen=True)
class NpyHeader:
    url: str
    shape: tuple[int, ...]
    dtype: np.dtype
    fortran: bool
    offset: int  # byte offset of the data
    size: int  # size of the whole file

    @property
    def nbytes(self) -> int:
        return int(np.prod(self.shape)) * self.dtype.itemsize


class PickledNpy(ValueError):
    """A .npy file of Python objects: its data is a pickle (which runs code when loaded), not array bytes."""


def npy_header(f) -> tuple[tuple[int, ...], bool, np.dtype]:
    """(shape, fortran_order, dtype) of the .npy file `f` is open at the start of, leaving `f` at its data.
    Raises ValueError or EOFError when it is not a .npy file, PickledNpy for an object array."""
    version = npy_format.read_magic(f)
    read = npy_format.read_array_header_1_0 if version == (1, 0) else npy_format.read_array_header_2_0
    shape, fortran, dtype = read(f)
    if np.dtype(dtype).hasobject:
        raise PickledNpy(f"pickled object arrays are refused (dtype {np.dtype(dtype)})")
    return shape, fortran, np.dtype(dtype)


def read_npy_header(url: str) -> NpyHeader:
    """Parse a .npy header with one small range read and check the file is complete."""
    fs, path = fsspec.core.url_to_fs(url)
    try:
        size = fs.size(path)
        with fs.open(path, "rb", block_size=4096) as f:
            shape, fortran, dtype = npy_header(f)
            offset = f.tell()
    except FileNotFoundError:
        raise BuildError("file not found", url) from None
    except PickledNpy as e:
        raise BuildError(str(e), url) from None
    except (ValueError, EOFError) as e:
        raise BuildError(f"not a valid .npy file ({e})", url) from None
    h = NpyHeader(url, tuple(int(s) for s in shape), np.dtype(dtype), bool(fortran), offset, int(size))
    if h.fortran:
        raise BuildError("Fortran-ordered .npy arrays are not supported", url)
    if size < offset + h.nbytes:
        raise BuildError(f"truncated: header promises {h.nbytes} data bytes, file has {size - offset}", url)
    return h


@dataclass(frozen=True)
class Tile:
    """A tile whose headers were read and checked; its pixels are read lazily."""

    ref: TileRef
    emb: NpyHeader
    scales: NpyHeader
    epsg: int
    origin_e: float  # top-left corner in the tile's UTM CRS
    origin_n: float
    digest: str | None = None  # BLAKE2b of the three files' bytes, set by hashed()

    @property
    def name(self) -> str:
        return self.ref.name

    @property
    def zone(self) -> int:
        return conv.zone_from_epsg(self.epsg)[0]

    @property
    def south(self) -> bool:
        return conv.zone_from_epsg(self.epsg)[1]

    @property
    def shape(self) -> tuple[int, int]:
        return self.emb.shape[0], self.emb.shape[1]

    @property
    def n_bands(self) -> int:
        return self.emb.shape[2]

    @property
    def urls(self) -> tuple[str, str, str]:
        return self.emb.url, self.scales.url, self.ref.landmask_url

    def hashed(self) -> "Tile":
        """This tile with its content digest (reads every byte of its three files); a land mask read already
        comes along."""
        tile = dataclasses.replace(self, digest=content_digest(self.urls))
        if "land" in self.__dict__:
            tile.__dict__["land"] = self.__dict__["land"]
        return tile

    def fingerprint(self) -> str:
        """Identity of the tile's content: the digest of its files' bytes (see the module docstring)."""
        if self.digest is None:
            raise RuntimeError(f"{self.name}: fingerprint of a tile that was not hashed")
        return f"blake2b-128:{self.digest}"

    def _read_rows(self, h: NpyHeader, r0: int, r1: int) -> np.ndarray:
        """Rows r0:r1 of a C-ordered .npy through one ranged read (bounded memory, any fsspec URL)."""
        row = int(np.prod(h.shape[1:])) * h.dtype.itemsize
        with fsspec.open(h.url, "rb") as f:
            f.seek(h.offset + r0 * row)
            raw = f.read((r1 - r0) * row)
        if len(raw) != (r1 - r0) * row:
            raise BuildError("truncated while reading", h.url)
        return np.frombuffer(raw, dtype=h.dtype).reshape((r1 - r0, *h.shape[1:]))

    def embedding_rows(self, r0: int, r1: int) -> np.ndarray:
        return self._read_rows(self.emb, r0, r1)

    def scale_values(self) -> np.ndarray:
        s = self._read_rows(self.scales, 0, self.scales.shape[0])
        return s[..., 0] if s.ndim == 3 else s

    @cached_property
    def land(self) -> np.ndarray:
        with fsspec.open(self.ref.landmask_url, "rb") as f:
            mask = read_band(f)
        return np.asarray(mask) != 0

    def window(self, r0: int, r1: int, c0: int, c1: int) -> tuple[np.ndarray, np.ndarray]:
        """(int8 (h, w, B), float32 (h, w)) of tile rows r0:r1, cols c0:c1; water and bad scales as NaN.

        Raises BuildError when the pixel values break the convention's contract.
        """
        e = self.embedding_rows(r0, r1)[:, c0:c1, :]
        s = np.array(self._read_rows(self.scales, r0, r1)[:, c0:c1], dtype=np.float32).reshape(r1 - r0, c1 - c0)
        check_scales(s, self.scales.url, r0, c0)
        # NaN on land is kept: it marks land pixels without satellite coverage.
        s[~self.land[r0:r1, c0:c1]] = np.nan
        e = np.where(np.isnan(s)[..., None], np.int8(0), e)
        return e, s


def check_scales(s: np.ndarray, url: str, r0: int = 0, c0: int = 0) -> None:
    """Refuse scales the convention cannot hold: inf or negative.  NaN is allowed: it means no data."""
    with np.errstate(invalid="ignore"):
        for bad, what in ((np.isinf(s), "inf"), (s < 0, "a negative value")):
            if bad.any():
                r, c = np.argwhere(bad)[0][:2]
                raise BuildError(f"scales contain {what} (pixel row {r0 + r}, col {c0 + c})", url)


def content_digest(urls: tuple[str, ...]) -> str:
    """BLAKE2b (128 bit) of the files' bytes, each followed by its length, read HASH_BLOCK at a time."""
    h = hashlib.blake2b(digest_size=16)
    for url in urls:
        n = 0
        fs, path = fsspec.core.url_to_fs(url)
        with fs.open(path, "rb", block_size=HASH_BLOCK) as f:  # not fsspec.open(url, block_size=...): that makes it a
            # storage option, which s3fs passes on to its aiobotocore session (a TypeError)
            while block := f.read(HASH_BLOCK):
                h.update(block)
                n += len(block)
        h.update(n.to_bytes(8, "little"))
    return h.hexdigest()


@lru_cache(maxsize=None)
def _to_lonlat(epsg: int) -> Transformer:
    return Transformer.from_crs(epsg, 4326, always_xy=True)


def check_position(ref: TileRef, epsg: int, origin: tuple[float, float], shape: tuple[int, int]) -> None:
    """Refuse georeferencing that does not put the tile where its name says (within one tile)."""
    if not all(math.isfinite(v) for v in origin):
        raise BuildError(f"origin ({origin[0]}, {origin[1]}) is not finite", ref.landmask_url)
    h, w = shape
    lon, lat = _to_lonlat(epsg).transform(origin[0] + w * conv.PIXEL_SIZE / 2, origin[1] - h * conv.PIXEL_SIZE / 2)
    lon0, lat0 = ref.lonlat
    dlon = (lon - lon0 + 180) % 360 - 180
    if not (abs(dlon) <= TILE_DEG and abs(lat - lat0) <= TILE_DEG):
        raise BuildError(f"EPSG:{epsg} and the transform put the tile centre at lon {lon:.4f}, lat {lat:.4f}, "
                         f"more than {TILE_DEG} degree from the centre its name gives ({lon0}, {lat0})",
                         ref.landmask_url)


def discover(root: str, year: int) -> list[TileRef]:
    """All tiles of `year` under `root`, sorted by name (the overlap order: later wins)."""
    base = _join(root, EMBEDDINGS_DIR, str(year))
    fs, path = fsspec.core.url_to_fs(base)
    if not fs.exists(path):
        raise BuildError(f"no tiles for year {year} (expected directory {EMBEDDINGS_DIR}/{year}/)", root)
    names = sorted(p.rstrip("/").rsplit("/", 1)[-1] for p in fs.ls(path, detail=False))
    refs = [TileRef(root, year, n) for n in names if _GRID_RE.fullmatch(n)]
    if not refs:
        raise BuildError(f"no grid_<lon>_<lat> tile directories for year {year}", base)
    return refs


def open_tile(ref: TileRef) -> Tile:
    """Read and cross-check the headers of one tile's three files."""
    emb = read_npy_header(ref.embeddings_url)
    if emb.dtype != np.int8:
        raise BuildError(f"embeddings must be int8, got {emb.dtype}", ref.embeddings_url)
    if len(emb.shape) != 3:
        raise BuildError(f"embeddings must be (H, W, B), got shape {emb.shape}", ref.embeddings_url)
    scales = read_npy_header(ref.scales_url)
    if scales.dtype != np.float32:
        raise BuildError(f"scales must be float32, got {scales.dtype}", ref.scales_url)
    if scales.shape not in (emb.shape[:2], emb.shape[:2] + (1,)):
        raise BuildError(f"scales shape {scales.shape} does not match embeddings {emb.shape[:2]}", ref.scales_url)
    try:
        with fsspec.open(ref.landmask_url, "rb") as f:
            geo = read_geoinfo(f)
    except FileNotFoundError:
        raise BuildError("landmask GeoTIFF not found (it carries the tile's CRS)", ref.landmask_url) from None
    except Exception as e:  # tifffile raises several types for broken files
        raise BuildError(f"unreadable landmask GeoTIFF ({e})", ref.landmask_url) from None
    if geo.epsg is None:
        raise BuildError("landmask has no projected CRS", ref.landmask_url)
    try:
        conv.zone_from_epsg(geo.epsg)
    except ValueError as e:
        raise BuildError(f"unknown CRS: {e}", ref.landmask_url) from None
    if not (math.isclose(geo.pixel_x, conv.PIXEL_SIZE) and math.isclose(geo.pixel_y, conv.PIXEL_SIZE)):
        raise BuildError(f"pixel size {geo.pixel_x}x{geo.pixel_y} m, v1 requires 10 m", ref.landmask_url)
    if geo.shape != emb.shape[:2]:
        raise BuildError(f"landmask shape {geo.shape} does not match embeddings {emb.shape[:2]}", ref.landmask_url)
    check_position(ref, geo.epsg, (geo.origin_x, geo.origin_y), geo.shape)
    return Tile(ref, emb, scales, geo.epsg, geo.origin_x, geo.origin_y)
