"""Serialising a ManifestStore as a Kerchunk reference index.

`write_tile_index(store, output, segments=None, *, template_base=None,
url_overrides=None, zarr_format=3, parquet_engine="pyarrow")` writes the
references of `store` (a ManifestStore from builder.virtual.parsers) to `output`;
`segments` keeps only those top-level groups (tile names, zones, levels):
  * `.json` -> Kerchunk v1 JSON; `.parquet` -> a Kerchunk Parquet directory in the
    sparse record layout (builder.virtual.parquet: one row per existing chunk),
    for Zarr v2 and v3 alike, written with pyarrow or fastparquet;
  * zarr_format 2 writes `.zgroup/.zarray/.zattrs` and chunk keys `i.j.k`;
    3 writes `zarr.json` per node and `c/i/j/k` chunk keys.  A sharded source
    (the year stores) has no Zarr v2 form as whole shards, so for v2 every
    inner chunk is referenced on its own (read from each shard's index);
  * `template_base="{{base}}"` rewrites every reference to
    `{{base}}<path relative to the common source directory>`; JSON records the
    Kerchunk `templates`, Parquet cannot (the reader supplies `base`, see
    builder.virtual.reader.open_index);
  * `url_overrides={old: new}` replaces URL prefixes (index a local copy, point
    at where it will be served);
  * the two are mutually exclusive; a bad extension, an unknown segment, both
    options, zarr_format not in {2, 3} or an unknown engine raise ValueError.

Why the references are assembled here rather than by virtualizarr's own
kerchunk writer: that writer emits v2 layouts only, has no template or
URL-override support, and cannot express the sharded multi-year arrays;
fsspec's ReferenceFileSystem (reading) is used as it is.
"""
from __future__ import annotations

import base64
import json
import os
from pathlib import Path

import fsspec
import numpy as np
from virtualizarr.manifests import ManifestArray, ManifestGroup, ManifestStore
from zarr.core.buffer import default_buffer_prototype

from builder.core import convention as conv
from builder.core import extensions as ext
from builder.atomic import write_bytes
from builder.core.shardio import ShardIndex, chunk_grid
from builder.virtual.parquet import check_engine, write_parquet
from builder.virtual.reader import open_index  # noqa: F401  (the writer's counterpart, importable from here)


def _v3_array_json(arr: ManifestArray) -> dict:
    buf = arr.metadata.to_buffer_dict(default_buffer_prototype())["zarr.json"]
    return json.loads(buf.to_bytes())


def _v2_compressor(codecs: list[dict]) -> tuple[dict | None, int]:
    """The Zarr v2 compressor of a v3 codec chain, and how many trailing checksum bytes each chunk carries:
    a final crc32c (4 bytes) has no v2 codec, so v2 references stop before it (it is not verified)."""
    comp = None
    tail = 0
    if codecs and codecs[-1]["name"] == "crc32c":
        codecs, tail = codecs[:-1], 4
    for c in codecs:
        if c["name"] == "blosc":
            cfg = c["configuration"]
            comp = {"id": "blosc", "cname": cfg["cname"], "clevel": cfg["clevel"],
                    "shuffle": {"noshuffle": 0, "shuffle": 1, "bitshuffle": 2}[cfg["shuffle"]],
                    "blocksize": cfg.get("blocksize", 0)}
        elif c["name"] not in ("bytes",):
            raise ValueError(f"codec {c['name']!r} has no Zarr v2 equivalent here")
    return comp, tail


def _fill_json(v):
    if isinstance(v, float) and np.isnan(v):
        return "NaN"
    return v


def _inline(data: np.ndarray) -> str:
    return "base64:" + base64.b64encode(np.ascontiguousarray(data).astype(data.dtype.newbyteorder("<")).tobytes()).decode()


def _derived_arrays(attrs: dict) -> dict[str, tuple[np.ndarray, str]]:
    """Coordinate arrays of a zone-like group, computed from its attributes (no source file has them)."""
    out = {}
    if "spatial:transform" in attrs and "spatial:shape" in attrs:
        t = attrs["spatial:transform"]
        h, w = attrs["spatial:shape"]
        out["easting"] = (conv.easting_coords(t[2], w), "easting")
        out["northing"] = (conv.northing_coords(t[5], h), "northing")
        if "tessera:n_bands" in attrs:
            out["band"] = (np.arange(attrs["tessera:n_bands"], dtype=np.int32), "band")
    if ext.STACK_YEARS in attrs:
        out[ext.STACK_DIM] = (np.asarray(attrs[ext.STACK_YEARS], dtype=np.int32), ext.STACK_DIM)
    return out


class _Refs:
    def __init__(self, zarr_format: int):
        self.fmt = zarr_format
        self.refs: dict[str, object] = {}

    def group(self, prefix: str, attrs: dict) -> None:
        if self.fmt == 3:
            self.refs[f"{prefix}zarr.json"] = json.dumps({"zarr_format": 3, "node_type": "group", "attributes": attrs})
        else:
            self.refs[f"{prefix}.zgroup"] = json.dumps({"zarr_format": 2})
            self.refs[f"{prefix}.zattrs"] = json.dumps(attrs)

    def inline_array(self, path: str, data: np.ndarray, dim: str) -> None:
        if self.fmt == 3:
            self.refs[f"{path}/zarr.json"] = json.dumps({
                "zarr_format": 3, "node_type": "array", "shape": list(data.shape), "data_type": str(data.dtype),
                "chunk_grid": {"name": "regular", "configuration": {"chunk_shape": list(data.shape)}},
                "chunk_key_encoding": {"name": "default", "configuration": {"separator": "/"}},
                "fill_value": 0, "codecs": [{"name": "bytes", "configuration": {"endian": "little"}}],
                "attributes": {}, "dimension_names": [dim]})
            self.refs[f"{path}/c/0"] = _inline(data)
        else:
            self.refs[f"{path}/.zarray"] = json.dumps({
                "zarr_format": 2, "shape": list(data.shape), "chunks": list(data.shape), "dtype": data.dtype.str,
                "compressor": None, "fill_value": 0, "order": "C", "filters": None, "dimension_separator": "."})
            self.refs[f"{path}/.zattrs"] = json.dumps({"_ARRAY_DIMENSIONS": [dim]})
            self.refs[f"{path}/0"] = _inline(data)

    def array(self, path: str, arr: ManifestArray) -> None:
        meta = _v3_array_json(arr)
        entries = arr.manifest.dict()
        if self.fmt == 3:
            self.refs[f"{path}/zarr.json"] = json.dumps(meta)
            sep = meta["chunk_key_encoding"].get("configuration", {}).get("separator", "/")
            for key, e in entries.items():
                self.refs[f"{path}/c{sep}{sep.join(key.split('.'))}"] = [e["path"], e["offset"], e["length"]]
            return
        codecs = meta["codecs"]
        chunks = meta["chunk_grid"]["configuration"]["chunk_shape"]
        sharded = codecs[0]["name"] == "sharding_indexed"
        if sharded:
            inner = codecs[0]["configuration"]
            comp, tail = _v2_compressor(inner["codecs"])
            ichunks = inner["chunk_shape"]
        else:
            comp, tail = _v2_compressor(codecs)
            ichunks = chunks
        self.refs[f"{path}/.zarray"] = json.dumps({
            "zarr_format": 2, "shape": meta["shape"], "chunks": ichunks,
            "dtype": np.dtype(meta["data_type"]).newbyteorder("<").str, "compressor": comp,
            "fill_value": _fill_json(meta["fill_value"]),
            "order": "C", "filters": None, "dimension_separator": "."})
        self.refs[f"{path}/.zattrs"] = json.dumps({"_ARRAY_DIMENSIONS": meta.get("dimension_names") or []})
        if not sharded:
            for key, e in entries.items():
                self.refs[f"{path}/{key}"] = [e["path"], e["offset"], e["length"] - tail]
            return
        # Zarr v2 has no sharding: reference each inner chunk inside each shard (read its index, checksum checked).
        import google_crc32c
        per = chunk_grid(chunks, ichunks)
        size = ShardIndex.nbytes(per)
        for key, e in entries.items():
            sidx = [int(x) for x in key.split(".")]
            with fsspec.open(e["path"], "rb") as f:
                f.seek(e["offset"] + e["length"] - size)
                raw = f.read(size)
            try:
                index = ShardIndex.read(raw, per, google_crc32c.value)
            except ValueError as err:
                raise ValueError(f"{e['path']} (shard {key} of {path}): {err}") from None
            for lin, off, ln in index.chunks():
                coord = [s * p + lc for s, p, lc in zip(sidx, per, index.coord(lin))]
                self.refs[f"{path}/{'.'.join(map(str, coord))}"] = [e["path"], e["offset"] + off, ln - tail]


def _walk(group: ManifestGroup, refs: _Refs, prefix: str, segments: list[str] | None) -> None:
    attrs = dict(group.metadata.attributes)
    refs.group(prefix, attrs)
    for name, arr in group.arrays.items():
        refs.array(f"{prefix}{name}", arr)
    for name, (data, dim) in _derived_arrays(attrs).items():
        if name not in group.arrays:
            refs.inline_array(f"{prefix}{name}", data, dim)
    for name, sub in group.groups.items():
        if segments is not None and prefix == "" and name not in segments:
            continue
        _walk(sub, refs, f"{prefix}{name}/", None)


def _consolidate(refs: dict) -> None:
    """Inline every node's zarr.json into the root's (zarr-python's consolidated metadata format),
    so that a browser opens the whole index from its root document."""
    nodes = {k[: -len("/zarr.json")]: json.loads(v) for k, v in refs.items()
             if k.endswith("/zarr.json") and isinstance(v, str)}
    root = json.loads(refs["zarr.json"])
    root["consolidated_metadata"] = {"kind": "inline", "must_understand": False, "metadata": nodes}
    refs["zarr.json"] = json.dumps(root)


def _relocate(refs: dict, template_base: str | None, url_overrides: dict | None) -> dict:
    urls = sorted({v[0] for v in refs.values() if isinstance(v, list)})
    if template_base is not None and urls:
        common = os.path.commonpath([u.split("://", 1)[-1] for u in urls])
        if len(urls) == 1:
            common = os.path.dirname(common)
        scheme = urls[0].split("://", 1)[0] + "://" if "://" in urls[0] else ""
        root = scheme + common.rstrip("/") + "/"
        for k, v in refs.items():
            if isinstance(v, list):
                if not v[0].startswith(root):
                    raise ValueError(f"{v[0]} is not under {root}; cannot template references from several roots")
                refs[k] = [template_base + v[0][len(root):], *v[1:]]
    elif url_overrides:
        for k, v in refs.items():
            if isinstance(v, list):
                for old, new in url_overrides.items():
                    if v[0].startswith(old):
                        refs[k] = [new + v[0][len(old):], *v[1:]]
                        break
    return refs


def write_tile_index(store: ManifestStore, output: str, segments: list[str] | None = None, *,
                     template_base: str | None = None, url_overrides: dict | None = None,
                     zarr_format: int = 3, parquet_engine: str = "pyarrow") -> None:
    """Write `store` as a Kerchunk reference index (see the module docstring for the options)."""
    output = str(output)
    ext = Path(output).suffix
    if ext not in (".json", ".parquet"):
        raise ValueError(f"index output must end in .json or .parquet, not {ext or '(none)'!r}")
    if zarr_format not in (2, 3):
        raise ValueError(f"zarr_format must be 2 or 3, not {zarr_format!r}")
    if template_base is not None and url_overrides:
        raise ValueError("template_base and url_overrides are mutually exclusive")
    check_engine(parquet_engine)
    group = store._group
    if segments is not None:
        unknown = [s for s in segments if s not in group.groups]
        if unknown:
            raise ValueError(f"unknown segment(s) {unknown}; the store has {sorted(group.groups)}")
    refs = _Refs(zarr_format)
    _walk(group, refs, "", segments)
    if zarr_format == 3:
        _consolidate(refs.refs)
    out = _relocate(refs.refs, template_base, url_overrides)
    if ext == ".json":
        doc = {"version": 1, "refs": out}
        if template_base is not None:
            doc["templates"] = {"base": ""}
        write_bytes(Path(output), json.dumps(doc).encode())
    else:
        write_parquet(out, output, engine=parquet_engine)
