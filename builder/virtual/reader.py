"""Opening a JSON or Parquet reference index as a zarr-python group (references checked first)."""
from __future__ import annotations

import base64
import os

import fsspec

from builder.core.bounds import INDEX_JSON_MAX, INDEX_VALUES_MAX, parse_json
from builder.virtual.contain import TEMPLATE, check_references


def _store(fs):
    import zarr

    class RootFsspecStore(zarr.storage.FsspecStore):
        """FsspecStore at the filesystem's root.  zarr-python 3.1 lists "/<prefix>" when path is
        empty, which a ReferenceFileSystem does not know, so xarray saw empty groups."""

        async def list_dir(self, prefix: str):
            if self.path:
                async for x in super().list_dir(prefix):
                    yield x
                return
            prefix = prefix.rstrip("/")
            try:
                allfiles = await self.fs._ls(prefix, detail=False)
            except FileNotFoundError:
                return
            for f in allfiles:
                yield f[len(prefix) + 1:] if prefix and f.startswith(prefix + "/") else f

        async def list_prefix(self, prefix: str):
            """Every key below `prefix`, from the references themselves (what validate --deep reads)."""
            for key in self.fs.references:
                if key.startswith(prefix):
                    yield key

    return RootFsspecStore(fs, read_only=True, path="")


def is_parquet_index(path: str) -> bool:
    """A Kerchunk Parquet directory: named *.parquet, or holding .zmetadata but no .zgroup (a consolidated
    Zarr v2 store has both)."""
    p = str(path).rstrip("/")
    return p.endswith(".parquet") or (os.path.isfile(os.path.join(p, ".zmetadata"))
                                      and not os.path.exists(os.path.join(p, ".zgroup")))


def read_index_json(path: str, options: dict):
    """A JSON reference index, local or at any fsspec URL, read within builder/core/bounds.py's limits for an
    index (what the explorer reads too): at most INDEX_JSON_MAX bytes, INDEX_VALUES_MAX values, the usual depth."""
    try:
        with fsspec.open(path, "rb", **options) as f:
            raw = f.read(INDEX_JSON_MAX + 1)
    except OSError as e:
        raise ValueError(f"{path}: cannot read the index ({type(e).__name__}: {e})") from None
    return parse_json(raw, path, INDEX_JSON_MAX, values_max=INDEX_VALUES_MAX)


def open_index(path: str, *, base: str | None = None, remote_options: dict | None = None, allow=None):
    """zarr-python group over a JSON or Parquet index; `base` resolves a {{base}}-templated index.

    Every reference must lie below `base` (a templated index, or any index when `base` is given) or
    else below the index's own directory, unless a prefix of it is listed in `allow` (URL or path
    prefixes: "https://host/data/", "/data/tiles", "file:///mnt/x/").  References are compared after
    resolving `..`, `.`, %-escapes and, for local files, symlinks; any other reference raises
    ValueError naming the key and the URL before anything is read."""
    import zarr
    path = str(path)
    opts = dict(remote_options or {})
    if is_parquet_index(path):
        from builder.virtual.parquet import ParquetReferences
        fs, root = fsspec.core.url_to_fs(path, **opts)  # local, or a URL with its storage options
        refs = ParquetReferences(root, fs=fs, template_base=base)
        stored = list(refs.iter_refs())
        fo, fmt = refs, 3 if "zarr.json" in refs.zmetadata else 2
    else:
        doc = read_index_json(path, opts)
        if not isinstance(doc.get("refs"), dict):
            raise ValueError(f"{path}: not a Kerchunk v1 reference index (no 'refs' object)")
        if "gen" in doc:
            raise ValueError(f"{path}: generated references ('gen') are not supported: they cannot be checked "
                             "against the index's base before they are read")
        stored = [(k, str(v[0])) for k, v in doc["refs"].items() if isinstance(v, list) and v]
        fo, fmt = doc, 3 if "zarr.json" in doc["refs"] else 2
    templated = any(TEMPLATE in url for _, url in stored)
    if templated and base is None:
        raise ValueError(f"{path} was written with template_base; pass base=... (the directory the "
                         "references are relative to) to read it")
    protocol = check_references(path, stored, base, allow)
    if isinstance(fo, dict):  # JSON: fsspec substitutes the templates; Parquet: ParquetReferences does
        fo["templates"] = {"base": base} if templated else {}
    if protocol not in (None, "file"):
        opts.setdefault("asynchronous", True)  # the reference fs is async; its target must be too
    fs = fsspec.filesystem("reference", fo=fo, remote_protocol=protocol or "file", remote_options=opts,
                           asynchronous=True)
    if isinstance(fo, dict):
        # fsspec (2026.9) keeps inline "base64:..." text undecoded (its decode is overwritten on the next
        # line) and decodes at read time, so info()/getsize report the encoded length: decode here once.
        for k, v in fs.references.items():
            if isinstance(v, str) and v.startswith("base64:"):
                fs.references[k] = base64.b64decode(v[7:])
    return zarr.open_group(_store(fs), mode="r", zarr_format=fmt, use_consolidated=False if fmt == 2 else None)
