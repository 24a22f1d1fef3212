"""VirtualiZarr parsers: existing files -> ManifestStore (chunk references, no bytes copied).

Each parser is a callable `parser(url, registry=None) -> ManifestStore`, the
VirtualiZarr parser protocol.  Only headers are read (range reads through
fsspec: local paths, file://, http(s)://, s3://).

* `TileParser`: one TESSERA source tile (the geotessera layout builder.tiles
  reads).  `url` is the tile's embeddings .npy; scales and landmask are its
  siblings.  The result is a zone-like group: `embeddings` and `scales` whose
  single chunk is the raw .npy payload (uncompressed, C order), tessera:,
  proj: and spatial: attributes.
* `YearsParser`: several year stores of one dataset -> per zone
  `embeddings(year, northing, easting, band)` and `scales(year, northing,
  easting)`, whose chunks are the existing shard files, referenced whole.
  Grids of one zone differ between years only by whole shards (builder.core.grid),
  so the index spans their union and remaps each year's shard keys; stores of
  other shard/chunk sizes, codecs, CRS or model versions are refused.
* `PyramidParser`: a store's `global_rgb` levels as a hierarchical store with
  its `multiscales` metadata.

Coordinate arrays exist in no source file; the writer derives them from the
groups' spatial:transform (and tessera-stack:years) when it serialises an index.

The multi-year index is not a tessera: v1 year store: its root and zone groups
register the tessera-stack: extension (builder.core.convention.STACK) instead.
"""
from __future__ import annotations

import os
from pathlib import PurePosixPath

import fsspec
import jsonschema
import numpy as np
from virtualizarr.manifests import ChunkManifest, ManifestArray, ManifestGroup, ManifestStore
from virtualizarr.manifests.utils import create_v3_array_metadata

from builder.core import convention as conv
from builder.core import extensions as ext
from builder.core.bounds import NODE_JSON_MAX, ROOT_JSON_MAX, read_json_file
from builder.core.describe import TESSERA, StoreError, describe
from builder.errors import BuildError
from builder.geotiff import read_geoinfo
from builder.core.grid import ZoneGrid
from builder.tiles import read_npy_header


class SparseChunkManifest(ChunkManifest):
    """A ChunkManifest that keeps only the chunks that exist.

    virtualizarr's ChunkManifest holds dense numpy arrays over the whole chunk
    grid; global_rgb level 0 has 98 million chunk slots of which a handful
    exist, which costs minutes and gigabytes densely.  This keeps the same
    interface (entries by key, grid shape) over a dict.
    """

    def __init__(self, entries: dict, shape: tuple[int, ...]):
        self._entries = dict(entries)
        self._shape = tuple(shape)

    @property
    def ndim_chunk_grid(self) -> int:
        return len(self._shape)

    @property
    def shape_chunk_grid(self) -> tuple[int, ...]:
        return self._shape

    def __getitem__(self, key):
        return self._entries[key]

    def __iter__(self):
        return iter(self._entries)

    def __len__(self) -> int:
        return len(self._entries)

    def dict(self) -> dict:
        return dict(self._entries)

    @property
    def nbytes(self) -> int:
        return sum(len(e["path"]) + 16 for e in self._entries.values())

    def __repr__(self) -> str:
        return f"SparseChunkManifest<shape={self._shape}, {len(self._entries)} chunks>"


def _abs(url: str) -> str:
    if "://" in url:
        return url
    return "file://" + os.path.abspath(url)


def _sibling(url: str, name: str) -> str:
    return url.rsplit("/", 1)[0] + "/" + name


class TileParser:
    """parser(url_of_embeddings_npy) -> ManifestStore of one tile."""

    def __call__(self, url: str, registry=None) -> ManifestStore:
        url = _abs(url)
        name = PurePosixPath(url).name
        if not name.endswith(".npy") or name.endswith("_scales.npy"):
            raise BuildError("expected a tile's embeddings file grid_<lon>_<lat>.npy", url)
        stem = name[:-4]
        emb = read_npy_header(url)
        scl = read_npy_header(_sibling(url, f"{stem}_scales.npy"))
        if emb.dtype != np.int8 or len(emb.shape) != 3:
            raise BuildError(f"embeddings must be int8 (H, W, B), got {emb.dtype} {emb.shape}", url)
        if scl.dtype != np.float32 or scl.shape[:2] != emb.shape[:2]:
            raise BuildError(f"scales {scl.dtype} {scl.shape} do not match embeddings {emb.shape}", scl.url)
        # .../global_0.1_degree_representation/{year}/grid_x/grid_x.npy -> .../global_0.1_degree_tiff_all/grid_x.tiff
        root = url.rsplit("/", 4)[0]
        year = int(url.rsplit("/", 3)[1])
        lm_url = f"{root}/global_0.1_degree_tiff_all/{stem}.tiff"
        try:
            with fsspec.open(lm_url, "rb") as f:
                geo = read_geoinfo(f)
        except FileNotFoundError:
            raise BuildError("landmask GeoTIFF not found (it carries the tile's CRS)", lm_url) from None
        if geo.shape != emb.shape[:2]:
            raise BuildError(f"landmask shape {geo.shape} disagrees with embeddings {emb.shape[:2]}", lm_url)
        zone, south = conv.zone_from_epsg(geo.epsg)
        h, w, b = emb.shape
        attrs = conv.zone_attrs(year=year, zone=zone, south=south, n_bands=b, n_tiles=1,
                                model_version="unknown (source tile)", build_version="virtual index",
                                has_rgb=False, origin_e=geo.origin_x, origin_n=geo.origin_y, height=h, width=w)
        attrs["tessera:source_tile"] = stem
        arrays = {}
        for aname, hdr, shape, dims, fill in (("embeddings", emb, (h, w, b), ["northing", "easting", "band"], 0),
                                              ("scales", scl, scl.shape, ["northing", "easting"] + (["one"] if len(scl.shape) == 3 else []), float("nan"))):
            meta = create_v3_array_metadata(shape=shape, data_type=hdr.dtype, chunk_shape=shape, fill_value=fill,
                                            codecs=[{"name": "bytes", "configuration": {"endian": "little"}}],
                                            dimension_names=dims)
            key = ".".join(["0"] * len(shape))
            arrays[aname] = ManifestArray(meta, ChunkManifest({key: {"path": hdr.url, "offset": hdr.offset,
                                                                     "length": hdr.nbytes}}))
        return ManifestStore(ManifestGroup(arrays=arrays, attributes=attrs), registry=registry)


def _read_json(fs, path: str, limit: int = NODE_JSON_MAX) -> dict:
    """A store's zarr.json, read within builder/core/bounds.py's limits (a store may be hostile)."""
    try:
        with fs.open(path, "rb") as f:
            return read_json_file(f, path, limit)
    except FileNotFoundError:
        raise BuildError("not found", path) from None


def _open_store(url: str):
    """(fs, root, StoreInfo) of a tessera v1 year store; its nodes listed when not consolidated."""
    fs, root = fsspec.core.url_to_fs(url)
    doc = _read_json(fs, f"{root}/zarr.json", ROOT_JSON_MAX)
    try:
        info = describe(doc, url, jsonschema=jsonschema)
    except StoreError:
        info = None
    if info is None or info.kind != TESSERA:
        raise BuildError("not a tessera v1 year store", url)
    if not info.consolidated:  # fall back to listing the store
        nodes = {}
        for p in fs.ls(root, detail=False):
            name = p.rstrip("/").rsplit("/", 1)[-1]
            if conv.parse_zone_group_name(name) is not None or name == conv.GLOBAL_GROUP:
                nodes[name] = _read_json(fs, f"{root}/{name}/zarr.json")
                for a in fs.ls(f"{root}/{name}", detail=False):
                    an = a.rstrip("/").rsplit("/", 1)[-1]
                    if fs.exists(f"{root}/{name}/{an}/zarr.json"):
                        nodes[f"{name}/{an}"] = _read_json(fs, f"{root}/{name}/{an}/zarr.json")
        info = describe({**doc, "consolidated_metadata": {"metadata": nodes}}, url, jsonschema=jsonschema)
    return fs, root, info


def _shard_files(fs, array_root: str, ndim: int) -> dict[tuple[int, int], tuple[str, int]]:
    """{(sr, sc): (path, size)} of the shard files of a sharded 2- or 3-D array."""
    out = {}
    base = f"{array_root}/c"
    if not fs.exists(base):
        return out
    for path, info in fs.find(base, detail=True).items():
        rel = path[len(fs._strip_protocol(base)):].strip("/").split("/")
        if len(rel) != ndim or ".partial" in rel[-1]:
            continue
        out[(int(rel[0]), int(rel[1]))] = (path, int(info["size"]))
    return out


class YearsParser:
    """parser([store urls]) -> ManifestStore with a year dimension per zone."""

    def __call__(self, urls, registry=None) -> ManifestStore:
        if isinstance(urls, str):
            urls = [urls]
        opened = []
        for u in urls:
            fs, root, info = _open_store(u)
            opened.append((info.year, u, fs, root, info))
        years = [o[0] for o in opened]
        if len(set(years)) != len(years):
            raise BuildError(f"year {next(y for y in years if years.count(y) > 1)} is given twice")
        opened.sort(key=lambda o: o[0])
        years = sorted(years)
        zone_names = sorted({k for o in opened for k in o[4].zones})
        groups = {}
        for zname in zone_names:
            groups[zname] = self._zone(zname, opened)
        attrs = {"zarr_conventions": [dict(c) for c in ext.STACK_ROOT_CONVENTIONS],
                 "tessera:dataset_version": conv.DATASET_VERSION, ext.STACK_YEARS: years}
        return ManifestStore(ManifestGroup(groups=groups, attributes=attrs), registry=registry)

    def _zone(self, zname: str, opened) -> ManifestGroup:
        per_year = []
        for year, url, fs, root, info in opened:
            if zname not in info.zones:
                continue
            z = info.zones[zname]
            per_year.append((year, url, fs, root, z.attrs, z.arrays, ZoneGrid.from_attrs(z.attrs, z.shard[0])))
        first = per_year[0]
        for year, url, fs, root, za, arrays, grid in per_year[1:]:
            for key, what in (("tessera:model_version", "model_version"), ("proj:code", "CRS"),
                              ("tessera:n_bands", "band count")):
                if za.get(key) != first[4].get(key):
                    raise BuildError(f"{zname}: {what} {za.get(key)!r} differs from {first[0]}'s "
                                     f"{first[4].get(key)!r}; years cannot be stacked", url)
            for arr in ("embeddings", "scales"):
                a, b = dict(arrays[arr]), dict(first[5][arr])
                for k in ("shape", "attributes"):
                    a.pop(k, None)
                    b.pop(k, None)
                if a != b:
                    raise BuildError(f"{zname}/{arr}: shard layout or codecs differ from year {first[0]}; "
                                     "years cannot be stacked without rewriting", url)
        union = first[6]
        for *_, grid in per_year[1:]:
            try:
                union = union.union(grid)
            except ValueError as e:
                raise BuildError(f"{zname}: {e}") from None
        n_years = len(opened)
        year_index = {o[0]: i for i, o in enumerate(opened)}
        arrays = {}
        for arr in ("embeddings", "scales"):
            src = first[5][arr]
            tail = src["shape"][2:]
            shape = (n_years, union.height, union.width, *tail)
            shard_cfg = src["codecs"][0]["configuration"]
            codecs = [{"name": "sharding_indexed", "configuration": {
                "chunk_shape": [1, *shard_cfg["chunk_shape"]], "codecs": shard_cfg["codecs"],
                "index_codecs": shard_cfg["index_codecs"], "index_location": shard_cfg.get("index_location", "end")}}]
            meta = create_v3_array_metadata(
                shape=shape, data_type=np.dtype(src["data_type"]), chunk_shape=(1, union.shard, union.shard, *tail),
                chunk_key_encoding={"name": "default", "configuration": {"separator": "/"}},
                fill_value=src["fill_value"] if src["fill_value"] != "NaN" else float("nan"), codecs=codecs,
                dimension_names=[ext.STACK_DIM, *src["dimension_names"]])
            entries = {}
            for year, url, fs, root, _za, _arrays, grid in per_year:
                dr, dc = union.offset_of(grid)
                for (sr, sc), (path, size) in _shard_files(fs, f"{root}/{zname}/{arr}", len(src["shape"])).items():
                    key = ".".join(map(str, [year_index[year], sr + dr, sc + dc] + [0] * len(tail)))
                    entries[key] = {"path": fs.unstrip_protocol(path), "offset": 0, "length": size}
            arrays[arr] = ManifestArray(meta, SparseChunkManifest(entries, tuple(
                [n_years, union.height // union.shard, union.width // union.shard] + [1] * len(tail))))
        za = dict(first[4])
        za.update(conv.spatial_attrs(union.origin_e, union.origin_n, union.height, union.width))
        za["zarr_conventions"] = [dict(c) for c in ext.STACK_ZONE_CONVENTIONS]
        za.pop("tessera:year", None)
        za.pop("tessera:has_rgb_preview", None)
        for key in [k for k in za if k.startswith(ext.OVR["name"])]:
            za.pop(key)  # the stack holds no overviews (tessera-ovr: is per year store)
        za[ext.STACK_YEARS] = [o[0] for o in opened]
        za["tessera:n_tiles"] = sum(p[4].get("tessera:n_tiles", 0) for p in per_year)
        return ManifestGroup(arrays=arrays, attributes=za)


class PyramidParser:
    """parser(store url) -> ManifestStore of its global_rgb levels (hierarchical, multiscales metadata)."""

    def __call__(self, url: str, registry=None) -> ManifestStore:
        fs, root, info = _open_store(url)
        cons = info.nodes
        g = cons.get(conv.GLOBAL_GROUP)
        if g is None:
            raise BuildError("store has no global_rgb pyramid", url)
        levels = {}
        for item in g["attributes"]["multiscales"]["layout"]:
            asset = item["asset"]
            src = cons[f"{conv.GLOBAL_GROUP}/{asset}/rgb"]
            chunk = src["chunk_grid"]["configuration"]["chunk_shape"]
            meta = create_v3_array_metadata(
                shape=tuple(src["shape"]), data_type=np.dtype(src["data_type"]), chunk_shape=tuple(chunk),
                chunk_key_encoding={"name": "default", "configuration": {"separator": "/"}},
                fill_value=src["fill_value"], codecs=src["codecs"], dimension_names=src["dimension_names"])
            base = f"{root}/{conv.GLOBAL_GROUP}/{asset}/rgb/c"
            entries = {}
            if fs.exists(base):
                for path, info in fs.find(base, detail=True).items():
                    rel = path[len(fs._strip_protocol(base)):].strip("/").split("/")
                    entries[".".join(rel)] = {"path": fs.unstrip_protocol(path), "offset": 0, "length": int(info["size"])}
            grid = tuple(-(-s // c) for s, c in zip(src["shape"], chunk))
            levels[asset] = ManifestGroup(arrays={"rgb": ManifestArray(meta, SparseChunkManifest(entries, grid))})
        return ManifestStore(ManifestGroup(groups=levels, attributes=dict(g["attributes"])), registry=registry)
