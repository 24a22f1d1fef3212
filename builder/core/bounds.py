"""How far this project trusts metadata it did not write: a store's zarr.json documents and catalogs.

The one rule for reading such a JSON document, shared by `validate` (builder/validate/documents.py) and
the Python reader and `sample` (builder/reader/): at most `limit` bytes are read (the root zarr.json
and catalogs ROOT_JSON_MAX, any other zarr.json NODE_JSON_MAX), at most JSON_VALUES_MAX values parsed,
at most JSON_DEPTH_MAX levels of nesting, and the document must be an object.  `parse_json` checks a
document read that way and raises MetadataError (a ValueError, one line naming the document) otherwise.

The sizes a store's metadata may claim before anything is allocated from them (the reader checks them,
validate reports them): COORD_VALUES_MAX values of one coordinate array (a zone grid's rows or columns,
whose coordinates a reader materialises), CHUNK_BYTES_MAX bytes of one decoded inner chunk, BANDS_MAX
bands.  docs/guarantees.md states them.
"""
from __future__ import annotations

import json
from typing import Any

ROOT_JSON_MAX = 16 * 2**20       # the root zarr.json, which holds the consolidated metadata; a catalog
NODE_JSON_MAX = 1 * 2**20        # any other zarr.json
INDEX_JSON_MAX = 64 * 2**20      # a multi-year index's references (JSON), as the explorer's (app/js/fetching.js)
JSON_VALUES_MAX = 1_000_000      # values in one document (counted as its , [ { bytes)
INDEX_VALUES_MAX = 8_000_000     # values in a multi-year index (about 2 M references of [url, offset, length])
INDEX_RECORD_MAX = 64 * 2**20    # one record file of a Parquet index (builder/virtual/parquet.py), read and decoded
INDEX_RECORD_ROWS_MAX = 1_000_000  # rows of one record of a Parquet index (its record_size; fsspec's is 10 000)
JSON_DEPTH_MAX = 64              # nesting levels of one document
COORD_VALUES_MAX = 4_000_000     # values of one coordinate array (32 MB of float64); rows or columns of a zone
CHUNK_BYTES_MAX = 64 * 2**20     # one decoded inner chunk
BANDS_MAX = 4096                 # bands of a zone's embeddings (TESSERA has 128)


class MetadataError(ValueError):
    """A document or a claim in it that is not read or believed: one line naming it."""


def mib(n: int) -> str:
    return f"{n // 2**20} MiB"


def _depth_over(doc: Any, limit: int) -> bool:
    stack = [(doc, 1)]
    while stack:
        v, d = stack.pop()
        if d > limit:
            return True
        if isinstance(v, dict):
            stack.extend((x, d + 1) for x in v.values())
        elif isinstance(v, list):
            stack.extend((x, d + 1) for x in v)
    return False


def parse_json(raw: bytes, where: str, limit: int, values_max: int = JSON_VALUES_MAX) -> dict:
    """The JSON object in `raw` (read as at most limit + 1 bytes), within the bounds above; MetadataError
    (naming `where`) for a document that is too large, has too many values, is nested too deeply, is not
    JSON or is not an object."""
    if len(raw) > limit:
        raise MetadataError(f"{where}: more than {limit} bytes, larger than the {mib(limit)} read of such a "
                            "document (not read)")
    values = raw.count(b",") + raw.count(b"[") + raw.count(b"{")
    if values > values_max:
        raise MetadataError(f"{where}: about {values} JSON values, more than the {values_max} parsed")
    try:
        doc = json.loads(raw.decode("utf-8"))
    except RecursionError:
        raise MetadataError(f"{where}: nested deeper than {JSON_DEPTH_MAX} levels (not read)") from None
    except (ValueError, UnicodeDecodeError) as e:
        raise MetadataError(f"{where}: not valid JSON ({e})") from None
    if _depth_over(doc, JSON_DEPTH_MAX):
        raise MetadataError(f"{where}: nested deeper than {JSON_DEPTH_MAX} levels (not read)")
    if not isinstance(doc, dict):
        raise MetadataError(f"{where}: not a JSON object")
    return doc


def read_json_file(f, where: str, limit: int) -> dict:
    """parse_json of an open binary file (local or fsspec), reading at most limit + 1 bytes of it."""
    return parse_json(f.read(limit + 1), where, limit)
