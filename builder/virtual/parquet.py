"""Kerchunk Parquet reference indexes: writing the sparse record layout, reading it and fsspec's positional one.

Container (a directory, `.parquet` by convention):

    .zmetadata             {"metadata": {key: document, ...}, "layout": "sparse", "sparse_record_size": R,
                            "records": {array path: [record numbers that have rows], ...}}
    <array path>/refs.<r>.parq
                           one row per chunk that exists, sorted: chunk (int64, the chunk number in C order
                           over the array's chunk grid, which lies in record chunk // R), path (string; null
                           for inline data), offset, size (int64; 0, 0 = the whole file), raw (binary; null
                           for a reference)

fsspec/kerchunk's own layout (`record_size` instead of `layout`) is positional: record r holds rows for chunk
numbers r*R .. r*R+R-1, existing or not, so a sparse array costs R rows per touched record: the global_rgb
level 0 has 98 M chunk slots, and references spread over it cost up to 98 M rows.  The sparse layout costs
one row per chunk; its `.zmetadata` has no `record_size`, so a stock fsspec reader refuses it (every key is
"not found") instead of misreading rows.  Both layouts are read here, for Zarr v2 and v3 (builder.virtual.keys).

Why a hand-written reader (a LazyReferenceMapper subclass, so that fsspec's ReferenceFileSystem keeps
delegating listings to it) rather than fsspec's own: LazyReferenceMapper derives chunk counts from
`.zarray` only and parses only `i.j.k` keys (no v3), lists a level's `.zgroup` as an array field and then
fails looking for its `.zarray`, enumerates every chunk slot of an array to list it (98 M keys for level
0), and loads records through pandas, whose engines decode null paths differently (None or NaN; NaN is
then handed to the target filesystem as a URL).  Records are read with pyarrow here and nulls normalised,
whichever engine wrote them.  `{{base}}` in a path is replaced by `template_base` at read time: a Parquet
index has nowhere to keep Kerchunk's `templates`.
"""
from __future__ import annotations

import base64
import io
import json
import math
from functools import lru_cache
from pathlib import Path

import fsspec
from fsspec.implementations.reference import LazyReferenceMapper

from builder.atomic import write_dir
from builder.core.bounds import (INDEX_JSON_MAX, INDEX_RECORD_MAX, INDEX_RECORD_ROWS_MAX, INDEX_VALUES_MAX,
                                 MetadataError, mib, parse_json)
from builder.virtual.keys import Arrays, ArrayKeys, is_meta, parent

TEMPLATE = "{{base}}"
RECORD_SIZE = 100_000
ENGINES = ("pyarrow", "fastparquet")
COLUMNS = ("chunk", "path", "offset", "size", "raw")
TEXT = ("path", "raw")  # the variable-length columns: the only ones whose decoded size the row count does not bound


# ----------------------------------------------------------------- write --
def _row(key: str, value) -> tuple[str | None, int, int, bytes | None]:
    if isinstance(value, list):
        if len(value) == 1:
            return str(value[0]), 0, 0, None
        return str(value[0]), int(value[1]), int(value[2]), None
    raw = value.encode() if isinstance(value, str) else bytes(value)
    return None, 0, 0, base64.b64decode(raw[7:]) if raw.startswith(b"base64:") else raw


def _write_record(fn: Path, rows: list, engine: str) -> None:
    cols = dict(zip(COLUMNS, map(list, zip(*rows))))
    if engine == "pyarrow":
        import pyarrow as pa
        import pyarrow.parquet as pq
        types = {"chunk": pa.int64(), "path": pa.string(), "offset": pa.int64(), "size": pa.int64(), "raw": pa.binary()}
        table = pa.table({c: pa.array(cols[c], types[c]) for c in COLUMNS})
        pq.write_table(table, fn, compression="zstd", write_statistics=False)
    else:
        import fastparquet
        import pandas as pd
        fastparquet.write(str(fn), pd.DataFrame(cols), compression="ZSTD", write_index=False, stats=False,
                          object_encoding={"path": "utf8", "raw": "bytes"}, has_nulls=["path", "raw"])


def check_engine(engine: str) -> None:
    if engine not in ENGINES:
        raise ValueError(f"parquet_engine must be 'pyarrow' or 'fastparquet', not {engine!r}")


def write_parquet(refs: dict, output: str, engine: str = "pyarrow", record_size: int = RECORD_SIZE) -> None:
    """Write Kerchunk references {key: str | [url, offset, size]} as a sparse-layout Parquet directory."""
    check_engine(engine)
    metadata = {k: json.loads(v) for k, v in refs.items() if is_meta(k)}
    arrays = Arrays(metadata)
    records: dict[str, dict[int, list]] = {}
    for key, value in refs.items():
        if is_meta(key):
            continue
        hit = arrays.split(key)
        if hit is None:
            raise ValueError(f"{key}: neither metadata nor a chunk key of an array in the index")
        a, n = hit
        records.setdefault(a.path, {}).setdefault(n // record_size, []).append((n, *_row(key, value)))

    def fill(tmp: Path) -> None:
        for path, recs in records.items():
            d = tmp / path if path else tmp
            d.mkdir(parents=True, exist_ok=True)
            for r, rows in recs.items():
                _write_record(d / f"refs.{r}.parq", sorted(rows), engine)
        (tmp / ".zmetadata").write_text(json.dumps({
            "metadata": metadata, "layout": "sparse", "sparse_record_size": record_size,
            "records": {p: sorted(recs) for p, recs in sorted(records.items())}}))

    write_dir(Path(output), fill)  # the old index or the new one at the path at every moment (builder/atomic.py)


# ------------------------------------------------------------------ read --
def _null(v):
    """One null, whichever engine wrote the file: None, NaN and "" all mean "no value"."""
    if v is None or v == "" or (isinstance(v, float) and math.isnan(v)):
        return None
    return v


def _refuse_decoded(url: str, decoded: int, what: str) -> None:
    if decoded > INDEX_RECORD_MAX:
        raise MetadataError(f"{url}: {decoded} bytes {what}, more than the {mib(INDEX_RECORD_MAX)} of a record "
                            "file (not read)")


def _is_text(typ) -> bool:
    import pyarrow as pa
    return pa.types.is_binary(typ) or pa.types.is_string(typ) or pa.types.is_large_binary(typ) or \
        pa.types.is_large_string(typ)


def _expand_text(t, url: str):
    """`t` (its path and raw columns read as dictionaries) with those columns expanded, once their values are
    counted, each row's value as often as rows take it, and found within INDEX_RECORD_MAX bytes; a column
    of null type (every row null, as pandas writes it) has none."""
    import pyarrow as pa
    import pyarrow.compute as pc
    text = [c for c in TEXT if c in t.column_names and not pa.types.is_null(t.schema.field(c).type)]
    for c in text:
        if not pa.types.is_dictionary(t.schema.field(c).type):
            raise MetadataError(f"{url}: its {c} column holds {str(t.schema.field(c).type)[:80]}, not text")
    _refuse_decoded(url, sum(pc.sum(pc.take(pc.binary_length(chunk.dictionary), chunk.indices)).as_py() or 0
                             for c in text for chunk in t.column(c).chunks), "of path and raw values decoded")
    for c in text:
        t = t.set_column(t.column_names.index(c), c, t.column(c).cast(t.schema.field(c).type.value_type))
    return t


def _read_record(data: bytes, url: str, rows_max: int):
    """The table of the record file `url` (its bytes `data`, read as at most INDEX_RECORD_MAX + 1): refused in one
    line (MetadataError) when larger than that, when its footer claims more rows than a record holds or more than
    INDEX_RECORD_MAX bytes decoded (checked before any column is decoded), when its path and raw values come to
    more than that once decoded (counted on their dictionaries, before they are expanded), or when it is not
    Parquet.

    The footer's sizes are those of the encoded pages: a dictionary page holds a value once however many rows
    take it, and DELTA_BYTE_ARRAY shares prefixes, so 1 MiB on disk can decode to 100 GB.  The text columns are
    therefore read as dictionaries (unique values plus one index a row), measured, and only then expanded;
    pyarrow reads delta-encoded text only in full, so it refuses those as dictionaries (one line, "not a
    Parquet record file")."""
    import pyarrow as pa
    import pyarrow.parquet as pq
    if len(data) > INDEX_RECORD_MAX:
        raise MetadataError(f"{url}: more than {INDEX_RECORD_MAX} bytes, larger than the {mib(INDEX_RECORD_MAX)} "
                            "read of a record file (not read)")
    try:
        f = pq.ParquetFile(io.BytesIO(data))
        meta = f.metadata
        if meta.num_rows > rows_max:
            raise MetadataError(f"{url}: {meta.num_rows} rows, more than the {rows_max} of a record (not read)")
        _refuse_decoded(url, sum(meta.row_group(i).total_byte_size for i in range(meta.num_row_groups)),
                        "decoded, as its footer claims")
        text = [c for c in TEXT if c in f.schema_arrow.names and _is_text(f.schema_arrow.field(c).type)]
        return _expand_text(pq.ParquetFile(io.BytesIO(data), metadata=meta, read_dictionary=text).read(), url)
    except (pa.ArrowException, OSError) as e:
        first = (str(e).splitlines() or [type(e).__name__])[0][:200]
        raise MetadataError(f"{url}: not a Parquet record file ({first})") from None


def _record_size(met: dict, key: str, where: str) -> int:
    """`.zmetadata`'s record size (`key`): rows a record holds, which bounds a record file's rows."""
    v = met[key]
    if isinstance(v, bool) or not isinstance(v, int) or not 1 <= v <= INDEX_RECORD_ROWS_MAX:
        raise MetadataError(f"{where}: {key} {json.dumps(v)[:40]} is not a whole number from 1 to "
                            f"{INDEX_RECORD_ROWS_MAX}")
    return v


class ParquetReferences(LazyReferenceMapper):
    """Read-only references of a Kerchunk Parquet index (sparse or positional layout, Zarr v2 or v3)."""

    def __init__(self, root: str, fs=None, template_base: str | None = None, cache_size: int = 128):
        if fs is None:
            fs, root = fsspec.core.url_to_fs(str(root))
        self.fs, self.root, self.base = fs, root.rstrip("/"), template_base
        try:
            with fs.open(f"{self.root}/.zmetadata", "rb") as f:  # bounded: the index is data we did not write
                met = parse_json(f.read(INDEX_JSON_MAX + 1), f"{root}/.zmetadata", INDEX_JSON_MAX,
                                 values_max=INDEX_VALUES_MAX)
            self.zmetadata = dict(met["metadata"])
            self.sparse = met.get("layout") == "sparse"
            self.record_size = _record_size(met, "sparse_record_size" if self.sparse else "record_size",
                                            f"{root}/.zmetadata")
            self.written = {p: set(map(int, r)) for p, r in met.get("records", {}).items()} if self.sparse else None
        except MetadataError:  # already one line naming the document
            raise
        except FileNotFoundError:
            raise ValueError(f"{root}: not a Kerchunk Parquet index (no .zmetadata)") from None
        except (ValueError, KeyError, TypeError) as e:
            raise ValueError(f"{root}/.zmetadata: not a Kerchunk Parquet index ({type(e).__name__}: {e})") from None
        self._items = {}
        self.arrays = Arrays(self.zmetadata)
        self.dirs = {""}
        for k in [*self.zmetadata, *(f"{p}/x" for p in self.arrays.by_path)]:
            while (k := parent(k)) and k not in self.dirs:
                self.dirs.add(k)
        self._record = lru_cache(maxsize=cache_size)(self._load_record)

    # -- records
    def _load_record(self, path: str, record: int) -> dict[int, tuple] | None:
        url = f"{self.root}/{path}/refs.{record}.parq" if path else f"{self.root}/refs.{record}.parq"
        try:
            with self.fs.open(url, "rb") as f:  # bounded, as .zmetadata: the file is data we did not write
                data = f.read(INDEX_RECORD_MAX + 1)
        except FileNotFoundError:
            if self.sparse:  # listed in .zmetadata: a missing file is an error, not "no chunks"
                raise ValueError(f"{url}: record file listed in .zmetadata is missing") from None
            return None
        t = _read_record(data, url, self.record_size)
        cols = {c: t.column(c).to_pylist() if c in t.column_names else [None] * t.num_rows
                for c in ("path", "offset", "size", "raw")}
        numbers = t.column("chunk").to_pylist() if self.sparse else range(record * self.record_size,
                                                                           record * self.record_size + t.num_rows)
        out = {}
        for i, n in enumerate(numbers):
            p, raw = _null(cols["path"][i]), _null(cols["raw"][i])
            if p is not None or raw is not None:
                out[int(n)] = (p, int(_null(cols["offset"][i]) or 0), int(_null(cols["size"][i]) or 0), raw)
        return out

    def _records(self, a: ArrayKeys):
        if self.sparse:
            return sorted(self.written.get(a.path, ()))
        return range(math.ceil(a.slots / self.record_size))

    def _ref(self, row: tuple):
        path, offset, size, raw = row
        if raw is not None:
            return bytes(raw)
        if self.base is not None:
            path = path.replace(TEMPLATE, self.base)
        return [path] if (offset, size) == (0, 0) else [path, offset, size]

    def iter_refs(self):
        """(key, path as stored) of every reference to a file (inline chunks have none)."""
        for a in self.arrays.by_path.values():
            for r in self._records(a):
                for n, (path, *_) in sorted((self._record(a.path, r) or {}).items()):
                    if path is not None:
                        yield a.key(n), path

    # -- the mapping fsspec's ReferenceFileSystem reads
    def __getitem__(self, key: str):
        if is_meta(key):
            if key not in self.zmetadata:
                raise KeyError(key)
            return json.dumps(self.zmetadata[key]).encode()
        hit = self.arrays.split(key)
        if hit is None:
            raise KeyError(key)
        a, n = hit
        r = n // self.record_size
        if self.sparse and r not in self.written.get(a.path, ()):
            raise KeyError(key)  # a record without rows has no file: absent chunk, no request
        row = (self._record(a.path, r) or {}).get(n)
        if row is None:
            raise KeyError(key)
        return self._ref(row)

    def __contains__(self, key) -> bool:
        try:
            self[key]
            return True
        except KeyError:
            return False

    def __iter__(self):
        yield from self.zmetadata
        for a in self.arrays.by_path.values():
            for r in self._records(a):
                for n in sorted(self._record(a.path, r) or {}):
                    yield a.key(n)

    def __len__(self) -> int:
        return sum(1 for _ in self)

    def __setitem__(self, key, value):
        raise TypeError("a Parquet index is opened read-only")

    __delitem__ = __setitem__

    # -- listings: groups and arrays from their metadata, never one entry per chunk slot
    def listdir(self):
        return set(self.dirs)

    def ls(self, path="", detail=True):
        path = path.strip("/")
        if path in self.zmetadata:
            entries = [{"name": path, "type": "file", "size": len(self[path])}]
        elif path in self.dirs:
            entries = [{"name": k, "type": "file", "size": len(self[k])} for k in self.zmetadata if parent(k) == path]
            entries += [{"name": d, "type": "directory", "size": 0} for d in self.dirs if d and parent(d) == path]
        else:
            raise KeyError(path)
        entries.sort(key=lambda e: e["name"])
        return entries if detail else [e["name"] for e in entries]
