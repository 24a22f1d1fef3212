"""Check a year store against the `tessera:` convention v1.

Every rule comes from builder.convention; this module only walks the store
(local path or any fsspec URL) and reports each violation as one line
"where: what".

The store may be hostile: its metadata is read with the bounds below, never
followed outside the store, and never trusted for an allocation.  A bound that
stops a check is itself reported ("... too large to check"), so a store the
validator could not fully check never passes.

`deep=True` also reads every chunk file of the zone arrays and the global_rgb
levels: each inner chunk of a shard is checked against its crc32c (written at
build time, the Zarr v3 `crc32c` codec after Blosc) and decoded; chunks
without a crc32c (global_rgb levels, stores built before checksums) can only
be decoded, which catches most but not all corruption.
"""
from __future__ import annotations

import json
import math
import struct
from typing import Any

import jsonschema
import numpy as np
import zarr
from zarr.abc.store import RangeByteRequest
from zarr.core.buffer import default_buffer_prototype
from zarr.core.sync import sync

from builder import convention as conv
from builder.shardio import EMPTY, has_chunk_crc, open_chunk, read_index

# Bounds on what the validator reads (documented in README.md, "Validating untrusted stores").
ROOT_JSON_MAX = 16 * 2**20       # the root zarr.json, which holds the consolidated metadata
NODE_JSON_MAX = 1 * 2**20        # any other zarr.json
METADATA_TOTAL_MAX = 64 * 2**20  # all zarr.json documents of a store together
JSON_VALUES_MAX = 1_000_000      # values in one zarr.json (counted as its , [ { bytes)
JSON_DEPTH_MAX = 64              # nesting levels of one zarr.json
NODES_MAX = 10_000               # consolidated entries, and children listed per group
LEVELS_MAX = 64                  # global_rgb multiscales levels
COORD_VALUES_MAX = 4_000_000     # values read from one coordinate array (32 MB of float64)
COORD_CHUNKS_MAX = 1024          # chunks read from one coordinate array
SHARD_BYTES_MAX = 1 * 2**30      # one shard or chunk file read by --deep
CHUNK_BYTES_MAX = 64 * 2**20     # one decoded inner chunk in --deep

_MISSING = object()
_PROTO = default_buffer_prototype()


def _mib(n: int) -> str:
    return f"{n // 2**20} MiB"


def plain_key(key: Any) -> bool:
    """A store key that stays inside the store: relative, '/'-separated, no '', '.' or '..' part."""
    if not isinstance(key, str) or not key or "\\" in key or "\0" in key:
        return False
    return all(part not in ("", ".", "..") for part in key.split("/"))


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


class _Reader:
    """Bounded, cached reads of one store's zarr.json documents.  A document that cannot be used is
    reported once (naming its key) and read as None; an absent one as _MISSING."""

    def __init__(self, store, probs: list[str]):
        self.store = store
        self.probs = probs
        self.cache: dict[str, Any] = {}
        self.total = 0
        self.over_total = False

    def node(self, path: str) -> Any:
        key = f"{path}/zarr.json" if path else "zarr.json"
        if key not in self.cache:
            doc, problem = self._load(key, NODE_JSON_MAX if path else ROOT_JSON_MAX)
            self.cache[key] = doc
            if problem:
                self.probs.append(problem)
        return self.cache[key]

    def _load(self, key: str, limit: int):
        try:
            size = sync(self.store.getsize(key))
        except FileNotFoundError:
            return _MISSING, None
        except Exception:  # a store that cannot tell sizes: the ranged read below still bounds it
            size = None
        if size is not None and size > limit:
            return None, f"{key}: {size} bytes, larger than the {_mib(limit)} the validator reads (not read)"
        if self.total + (size or limit) > METADATA_TOTAL_MAX:
            if not self.over_total:
                self.over_total = True
                return None, (f"{key}: the store's metadata exceeds {_mib(METADATA_TOTAL_MAX)} in total; "
                              "this and further documents are not checked")
            return None, None
        try:
            buf = sync(self.store.get(key, _PROTO, byte_range=RangeByteRequest(0, limit + 1)))
        except Exception as e:
            return None, f"{key}: cannot be read ({type(e).__name__}: {e})"
        if buf is None:
            return _MISSING, None
        raw = buf.to_bytes()
        self.total += len(raw)
        if len(raw) > limit:
            return None, f"{key}: more than {limit} bytes, larger than the {_mib(limit)} the validator reads (not read)"
        values = raw.count(b",") + raw.count(b"[") + raw.count(b"{")
        if values > JSON_VALUES_MAX:
            return None, f"{key}: about {values} JSON values, more than the {JSON_VALUES_MAX} the validator parses"
        try:
            doc = json.loads(raw.decode("utf-8"))
        except RecursionError:
            return None, f"{key}: nested deeper than {JSON_DEPTH_MAX} levels (not checked)"
        except (ValueError, UnicodeDecodeError) as e:
            return None, f"{key}: not valid JSON ({e})"
        if _depth_over(doc, JSON_DEPTH_MAX):
            return None, f"{key}: nested deeper than {JSON_DEPTH_MAX} levels (not checked)"
        if not isinstance(doc, dict):
            return None, f"{key}: not a JSON object"
        return doc, None

    def children(self, path: str) -> list[str]:
        async def ls():
            out = []
            async for name in self.store.list_dir(path):
                out.append(name)
                if len(out) > NODES_MAX:
                    break
            return out
        try:
            names = sync(ls())
        except Exception:
            return []
        if len(names) > NODES_MAX:
            self.probs.append(f"{path or 'root'}: more than {NODES_MAX} entries; only the first {NODES_MAX} are checked")
        return sorted(n for n in names[:NODES_MAX] if plain_key(n) and n != "zarr.json")


def _schema_problems(attrs: dict, schema: dict, where: str) -> list[str]:
    v = jsonschema.Draft202012Validator(schema)
    out = []
    for err in sorted(v.iter_errors(attrs), key=lambda e: [str(p) for p in e.path]):
        key = "/".join(str(p) for p in err.path) or "attributes"
        out.append(f"{where}: {key}: {err.message}")
    return out


def _registration_problems(attrs: dict, required, where: str) -> list[str]:
    return [f"{where}: convention {name!r} is not registered in zarr_conventions (uuid, schema_url, spec_url)"
            for name in conv.registered(attrs, required)]


def _fill_ok(actual: Any, expected: Any) -> bool:
    if expected is None:
        return True
    if isinstance(expected, float) and math.isnan(expected):
        return actual is not None and isinstance(actual, (float, np.floating)) and math.isnan(actual)
    return actual == expected


def _attrs(doc: dict, where: str, probs: list[str]) -> dict:
    attrs = doc.get("attributes", {})
    if not isinstance(attrs, dict):
        probs.append(f"{where}: attributes is not a JSON object")
        return {}
    return attrs


class _Array:
    """What the checks need of one array's zarr.json (parsed by zarr-python, which validates it)."""

    def __init__(self, path: str, doc: dict):
        from zarr.codecs import ShardingCodec
        from zarr.core.metadata.v3 import ArrayV3Metadata
        self.path, self.doc = path, doc
        self.meta = ArrayV3Metadata.from_dict(dict(doc))
        self.shape = tuple(int(s) for s in self.meta.shape)
        self.dtype = self.meta.dtype.to_native_dtype()
        self.fill_value = self.meta.fill_value
        self.dims = list(self.meta.dimension_names or [])
        grid = tuple(int(c) for c in self.meta.chunk_grid.chunk_shape)
        first = self.meta.codecs[0] if self.meta.codecs else None
        if isinstance(first, ShardingCodec):
            self.shards, self.chunks = grid, tuple(int(c) for c in first.chunk_shape)
            self.sharding = doc["codecs"][0].get("configuration", {})
        else:
            self.shards, self.chunks, self.sharding = None, grid, None
        self.codec_names = [c.get("name") for c in doc.get("codecs", []) if isinstance(c, dict)]


def _open_array(reader: _Reader, path: str, probs: list[str]):
    doc = reader.node(path)
    if doc is _MISSING or doc is None:
        return doc
    if doc.get("node_type") != "array":
        return _MISSING
    try:
        return _Array(path, doc)
    except Exception as e:  # zarr-python's own validation of the document
        probs.append(f"{path}/zarr.json: invalid Zarr v3 array metadata ({type(e).__name__}: {e})")
        return None


def _coord_values(reader: _Reader, a: _Array, probs: list[str]):
    """The values of a 1-D coordinate array, or None (with the reason reported) when they are not read:
    more values or chunks than the bounds, compressed, or unreadable."""
    n = a.shape[0] if len(a.shape) == 1 else None
    if n is None:
        return None
    if n > COORD_VALUES_MAX:
        probs.append(f"{a.path}: shape ({n},) too large to check (the validator reads at most "
                     f"{COORD_VALUES_MAX} coordinate values)")
        return None
    chunk = a.shards[0] if a.shards else a.chunks[0]
    nchunks = -(-n // max(chunk, 1))
    if nchunks > COORD_CHUNKS_MAX:
        probs.append(f"{a.path}: {nchunks} chunks of {chunk} values, too many to check (the validator reads "
                     f"at most {COORD_CHUNKS_MAX} chunks of a coordinate array)")
        return None
    if a.codec_names != ["bytes"]:
        return None  # compressed or sharded: reported as such; a compressed chunk's size says nothing
    limit = chunk * a.dtype.itemsize
    try:
        arr = zarr.open_array(reader.store, path=a.path, mode="r", zarr_format=3)
        for i in range(nchunks):
            key = "/".join([a.path, *arr.metadata.encode_chunk_key((i,)).split("/")])
            try:
                size = sync(reader.store.getsize(key))
            except FileNotFoundError:
                continue
            if size > limit:
                probs.append(f"{key}: {size} bytes, more than the {limit} bytes of an uncompressed chunk (not read)")
                return None
        return arr[:]
    except Exception as e:  # a chunk that does not match its codec
        probs.append(f"{a.path}: cannot read values ({type(e).__name__}: {e})")
        return None


def _close(values: np.ndarray, expected_fn) -> bool:
    """np.allclose(values, expected) in blocks, so that memory stays at the two arrays themselves."""
    expected = expected_fn()
    step = 2**20
    return all(np.allclose(values[i:i + step], expected[i:i + step], rtol=0, atol=1e-6)
               for i in range(0, len(values), step))


def _check_zone(reader: _Reader, doc: dict, name: str, root_attrs: dict, stack: bool = False) -> list[str]:
    """A zone group of a year store, or (stack=True) of a multi-year index: there the sharded arrays have a
    leading year dimension (conv.STACK_ARRAYS) and tessera-stack:years stands for tessera:year."""
    where = name
    probs: list[str] = []
    attrs = _attrs(doc, where, probs)
    schema, convs, specs = ((conv.STACK_ZONE_SCHEMA, conv.STACK_ZONE_CONVENTIONS, conv.STACK_ARRAYS) if stack
                            else (conv.ZONE_SCHEMA, conv.ZONE_CONVENTIONS, conv.ZONE_ARRAYS))
    probs += _schema_problems(attrs, schema, where) + _registration_problems(attrs, convs, where)
    if stack:
        probs += _stack_problems(attrs, where)
    zone_num = conv.parse_zone_group_name(name)
    if attrs.get("tessera:utm_zone") != zone_num:
        probs.append(f"{where}: tessera:utm_zone={attrs.get('tessera:utm_zone')!r} does not match the group name")
    year_key = conv.STACK_YEARS if stack else "tessera:year"
    if attrs.get(year_key) != root_attrs.get(year_key):
        probs.append(f"{where}: {year_key}={attrs.get(year_key)!r} differs from the root's "
                     f"{root_attrs.get(year_key)!r}")
    south = None
    try:
        pz, south = conv.parse_proj_code(attrs.get("proj:code", ""))
        if pz != zone_num:
            probs.append(f"{where}: proj:code {attrs['proj:code']} is for zone {pz}, not {zone_num}")
    except ValueError as e:
        probs.append(f"{where}: {e}")
    shape = attrs.get("spatial:shape")
    transform = attrs.get("spatial:transform")
    h = w = None
    if (isinstance(shape, list) and len(shape) == 2 and all(type(x) is int and x >= 0 for x in shape)
            and isinstance(transform, list) and len(transform) == 6
            and all(isinstance(x, (int, float)) and not isinstance(x, bool) and math.isfinite(x) for x in transform)):
        h, w = shape
        p = conv.PIXEL_SIZE
        if transform[0] != p or transform[4] != -p or transform[1] != 0 or transform[3] != 0:
            probs.append(f"{where}: spatial:transform {transform} is not a north-up {p} m grid")
        e0, n0 = transform[2], transform[5]
        bbox = [e0, n0 - h * p, e0 + w * p, n0]
        have = attrs.get("spatial:bbox")
        if have is not None and not (isinstance(have, list) and len(have) == 4
                                     and all(isinstance(x, (int, float)) for x in have) and np.allclose(have, bbox)):
            probs.append(f"{where}: spatial:bbox {have} disagrees with transform and shape ({bbox})")
        if south is not None:
            lo, hi = (0.0, conv.SOUTH_FALSE_NORTHING) if south else (-conv.SOUTH_FALSE_NORTHING, 9_400_000.0)
            if bbox[1] < lo - 1e-6 or bbox[3] > hi + 1e-6:
                probs.append(f"{where}: northings {bbox[1]}..{bbox[3]} are impossible for "
                             f"{'southern' if south else 'northern'} {attrs['proj:code']}")
    nb = attrs.get("tessera:n_bands")
    if type(nb) is not int:
        nb = None
    arrays: dict[str, _Array] = {}
    unreadable = set()
    for aname in specs:
        a = _open_array(reader, f"{where}/{aname}", probs)
        if a is None:
            unreadable.add(aname)
        elif a is not _MISSING:
            arrays[aname] = a
    for aname in [k for k, v in specs.items() if not v.get("optional")]:
        if aname not in arrays and aname not in unreadable:
            probs.append(f"{where}/{aname}: required array is missing")
    has_rgb = attrs.get("tessera:has_rgb_preview", False)
    if has_rgb and "rgb" not in arrays and "rgb" not in unreadable:
        probs.append(f"{where}: tessera:has_rgb_preview is true but there is no rgb array")
    if "rgb" in arrays and not has_rgb:
        probs.append(f"{where}: rgb array present but tessera:has_rgb_preview is not true")
    years = root_attrs.get(conv.STACK_YEARS) if stack else None
    lead = (len(years),) if isinstance(years, list) else (None,) if stack else ()
    expected_shapes = {"embeddings": (*lead, h, w, nb), "scales": (*lead, h, w), "rgb": (h, w, 4),
                       "easting": (w,), "northing": (h,), "band": (nb,), conv.STACK_DIM: lead}
    for aname, spec in specs.items():
        if aname not in arrays:
            continue
        a = arrays[aname]
        aw = a.path
        if str(a.dtype) != spec["dtype"]:
            probs.append(f"{aw}: dtype {a.dtype}, expected {spec['dtype']}")
        if not _fill_ok(a.fill_value if spec["fill"] is not None else None, spec["fill"]):
            fv = a.fill_value.item() if hasattr(a.fill_value, "item") else a.fill_value
            probs.append(f"{aw}: fill_value {fv!r}, expected {spec['fill']!r}")
        if a.dims != spec["dims"]:
            probs.append(f"{aw}: dimension_names {a.dims}, expected {spec['dims']}")
        exp = expected_shapes[aname]
        if None not in exp and a.shape != exp:
            probs.append(f"{aw}: shape {a.shape}, expected {exp}")
        if spec["sharded"]:
            if a.shards is None:
                probs.append(f"{aw}: must be sharded")
            else:
                sh, ch = a.shards[len(lead):], a.chunks[len(lead):]
                if stack and (a.shards[0], a.chunks[0]) != (1, 1):
                    probs.append(f"{aw}: shards and inner chunks must hold one year, got {a.shards} / {a.chunks}")
                if h is not None and (h % sh[0] or w % sh[1]):
                    probs.append(f"{aw}: grid {h}x{w} is not snapped to the {sh[0]}x{sh[1]} shard size")
                if len(sh) == 3 and len(a.shape) == 3 + len(lead) and sh[2] != a.shape[-1]:
                    probs.append(f"{aw}: shards must hold the whole last dimension ({a.shape[-1]}), got {sh[2]}")
                if any(s % c for s, c in zip(sh, ch)):
                    probs.append(f"{aw}: inner chunks {ch} do not divide shards {sh}")
        else:
            if a.shards is not None:
                probs.append(f"{aw}: coordinate arrays must not be sharded")
            if any(n not in ("bytes",) for n in a.codec_names):
                probs.append(f"{aw}: coordinate arrays must be uncompressed")
    if stack and conv.STACK_DIM in arrays and isinstance(years, list):
        v = _coord_values(reader, arrays[conv.STACK_DIM], probs)
        if v is not None and list(v) != years:
            probs.append(f"{where}/{conv.STACK_DIM}: values {list(map(int, v))} are not the root's "
                         f"{conv.STACK_YEARS} {years}")
    if nb is not None and "embeddings" in arrays and arrays["embeddings"].shape[-1] != nb:
        probs.append(f"{where}: tessera:n_bands={nb} but embeddings has {arrays['embeddings'].shape[-1]} bands")
    if "band" in arrays and nb is not None:
        band = _coord_values(reader, arrays["band"], probs)
        if band is not None and (len(band) != nb or not np.array_equal(band, np.arange(len(band)))):
            probs.append(f"{where}/band: must be [0, 1, ..., {nb - 1}]")
    if h is not None:
        if "easting" in arrays and arrays["easting"].shape == (w,):
            v = _coord_values(reader, arrays["easting"], probs)
            if v is not None and not _close(v, lambda: conv.easting_coords(transform[2], w)):
                probs.append(f"{where}/easting: values are not origin + (i + 0.5) * 10 for spatial:transform")
        if "northing" in arrays and arrays["northing"].shape == (h,):
            v = _coord_values(reader, arrays["northing"], probs)
            if v is not None and not _close(v, lambda: conv.northing_coords(transform[5], h)):
                probs.append(f"{where}/northing: values are not origin - (j + 0.5) * 10 (descending)")
    return probs


def _num(x) -> bool:
    return isinstance(x, (int, float)) and not isinstance(x, bool)


def _check_global(reader: _Reader, doc: dict) -> list[str]:
    where = conv.GLOBAL_GROUP
    probs: list[str] = []
    attrs = _attrs(doc, where, probs)
    probs += _schema_problems(attrs, conv.GLOBAL_SCHEMA, where) + _registration_problems(attrs, conv.GLOBAL_CONVENTIONS, where)
    ms = attrs.get("multiscales")
    layout = ms.get("layout", []) if isinstance(ms, dict) else []
    layout = layout if isinstance(layout, list) else []
    if len(layout) > LEVELS_MAX:
        probs.append(f"{where}: multiscales lists {len(layout)} levels; the validator checks the first {LEVELS_MAX}")
    prev = None
    for k, item in enumerate(layout[:LEVELS_MAX]):
        if not isinstance(item, dict):
            continue  # reported by the schema
        asset = item.get("asset")
        aw = f"{where}/{asset}"
        if not plain_key(asset):
            probs.append(f"{where}: multiscales asset {asset!r} is not a relative path inside the group (not followed)")
            continue
        if k and isinstance(layout[k - 1], dict) and item.get("derived_from") != layout[k - 1].get("asset"):
            probs.append(f"{aw}: derived_from {item.get('derived_from')!r}, expected {layout[k - 1].get('asset')!r}")
        arr = _open_array(reader, f"{aw}/rgb", probs)
        if arr is _MISSING:
            probs.append(f"{aw}/rgb: level array is missing")
            continue
        if arr is not None:
            if str(arr.dtype) != "uint8" or len(arr.shape) != 3 or arr.shape[2] != 4:
                probs.append(f"{aw}/rgb: must be uint8 (H, W, 4), got {arr.dtype} {arr.shape}")
            if list(arr.shape[:2]) != item.get("spatial:shape"):
                probs.append(f"{aw}/rgb: shape {arr.shape[:2]} differs from spatial:shape {item.get('spatial:shape')}")
        t = item.get("spatial:transform")
        if not (isinstance(t, list) and len(t) == 6 and all(_num(x) for x in t)):
            prev = None
            continue  # reported by the schema
        if prev is not None and not math.isclose(t[0], 2 * prev[0]):
            probs.append(f"{aw}: resolution {t[0]} is not twice level {k - 1}'s {prev[0]}")
        tr = item.get("transform")
        if prev is not None and (tr.get("scale") if isinstance(tr, dict) else None) != [2.0, 2.0]:
            probs.append(f"{aw}: transform.scale must be [2.0, 2.0]")
        if t[2] != -180.0 or t[5] != 90.0:
            probs.append(f"{aw}: spatial:transform must start at (-180, 90)")
        shape = item.get("spatial:shape")
        if isinstance(shape, list) and len(shape) == 2 and all(_num(x) for x in shape):
            if not math.isclose(shape[1] * t[0], 360.0, rel_tol=0, abs_tol=abs(t[0]) + 1e-9):
                probs.append(f"{aw}: spatial:shape {shape} x resolution {t[0]} does not span 360 degrees")
        prev = t
    return probs


def _check_consolidated(reader: _Reader, doc: dict) -> list[str]:
    """Consolidated metadata, when present, must equal what every node's own zarr.json says; its keys
    must name nodes inside the store (others are reported and never followed)."""
    cm = doc.get("consolidated_metadata")
    if cm is None:
        return []
    cons = cm.get("metadata") if isinstance(cm, dict) else None
    if not isinstance(cons, dict):
        return ["root: consolidated_metadata.metadata is not a JSON object"]
    probs: list[str] = []
    keys = sorted(cons, key=str)
    if len(keys) > NODES_MAX:
        probs.append(f"root: consolidated metadata lists {len(keys)} nodes; the validator checks the first {NODES_MAX}")
    for key in keys[:NODES_MAX]:
        if not plain_key(key):
            probs.append(f"root: consolidated metadata key {key!r} is not a relative path inside the store (not followed)")
            continue
        own = reader.node(key)
        if own is _MISSING:
            probs.append(f"root: consolidated metadata lists {key}, which does not exist")
            continue
        if own is None:
            continue  # its file's problem is reported once, naming it
        own = dict(own)
        own.pop("consolidated_metadata", None)
        meta = dict(cons[key]) if isinstance(cons[key], dict) else cons[key]
        if isinstance(meta, dict):
            meta.pop("consolidated_metadata", None)
        if own != meta:
            probs.append(f"root: consolidated metadata for {key} is stale (differs from {key}/zarr.json)")
    return probs


# ------------------------------------------------------------------ --deep --
def _blosc_nbytes(raw: bytes) -> int | None:
    """Decoded size declared by a Blosc frame's header (bytes 4..8, little endian), None if no header."""
    return struct.unpack_from("<I", raw, 4)[0] if len(raw) >= 16 else None


def _decode_inner(raw: bytes, crc: bool, blosc: bool, nbytes: int, crc32c, decompress) -> str | None:
    """None when an inner chunk's bytes check out, else what is wrong with them."""
    if crc:
        try:
            raw = open_chunk(raw, crc32c)
        except ValueError as e:
            return str(e)
    if blosc:
        declared = _blosc_nbytes(raw)
        if declared != nbytes:
            return f"Blosc header declares {declared} decoded bytes, expected {nbytes} (corrupt data)"
        try:
            raw = decompress(raw)
        except Exception as e:
            return f"does not decode ({type(e).__name__}: {e})"
    if len(raw) != nbytes:
        return f"decodes to {len(raw)} bytes, expected {nbytes} (corrupt data)"
    return None


def _chain(names: list) -> tuple[bool, bool] | None:
    """(blosc?, crc32c?) for the inner codec chains the builder writes: bytes [, blosc] [, crc32c]."""
    names = list(names)
    crc = has_chunk_crc({"codecs": [{"name": n} for n in names]})
    if crc:
        names = names[:-1]
    blosc = bool(names) and names[-1] == "blosc"
    if blosc:
        names = names[:-1]
    return (blosc, crc) if names == ["bytes"] else None


def _deep_array(reader: _Reader, a: _Array, stats: dict) -> list[str]:
    import google_crc32c
    import numcodecs
    decompress = numcodecs.Blosc().decode
    crc32c = google_crc32c.value
    sharded = a.sharding is not None
    inner = a.sharding.get("codecs", []) if sharded else a.doc.get("codecs", [])
    chain = _chain([c.get("name") for c in inner if isinstance(c, dict)])
    if chain is None:
        return [f"{a.path}: codecs {[c.get('name') for c in inner if isinstance(c, dict)]} are not "
                "checked by --deep (it reads bytes [, blosc] [, crc32c])"]
    blosc, crc = chain
    nbytes = int(np.prod(a.chunks, dtype=object)) * a.dtype.itemsize
    if nbytes > CHUNK_BYTES_MAX:
        return [f"{a.path}: inner chunks {a.chunks} of {nbytes} bytes, too large to check "
                f"(--deep decodes at most {_mib(CHUNK_BYTES_MAX)} per chunk)"]
    grid = tuple(s // c for s, c in zip(a.shards, a.chunks)) if sharded else None
    n = int(np.prod(grid, dtype=object)) if sharded else 1
    probs: list[str] = []

    async def keys():
        return sorted([k async for k in reader.store.list_prefix(f"{a.path}/c/")])
    files = sync(keys())
    for key in files:
        try:
            size = sync(reader.store.getsize(key))
        except FileNotFoundError:
            continue
        if size > SHARD_BYTES_MAX:
            probs.append(f"{key}: {size} bytes, too large to check (--deep reads at most {_mib(SHARD_BYTES_MAX)})")
            continue
        if sharded and size < 16 * n + 4:
            probs.append(f"{key}: {size} bytes is shorter than its shard index ({16 * n + 4} bytes)")
            continue
        buf = sync(reader.store.get(key, _PROTO)).to_bytes()
        stats["files"] = stats.get("files", 0) + 1
        if not sharded:
            stats["chunks"] = stats.get("chunks", 0) + 1
            bad = _decode_inner(buf, crc, blosc, nbytes, crc32c, decompress)
            if bad:
                probs.append(f"{key}: {bad}")
            continue
        try:
            index = read_index(buf, n, crc32c)
        except ValueError as e:
            probs.append(f"{key}: {e}")
            continue
        end = len(buf) - 16 * n - 4
        bad_chunks = []
        view = memoryview(buf)
        for i, (off, ln) in enumerate(index.tolist()):
            if off == EMPTY:
                continue
            stats["chunks"] = stats.get("chunks", 0) + 1
            if off + ln > end:
                bad_chunks.append((i, f"bytes {off}..{off + ln} run past the chunk data ({end} bytes)"))
                continue
            bad = _decode_inner(bytes(view[off:off + ln]), crc, blosc, nbytes, crc32c, decompress)
            if bad:
                bad_chunks.append((i, bad))
        if bad_chunks:
            i, what = bad_chunks[0]
            coord = tuple(int(x) for x in np.unravel_index(i, grid))
            more = f"; {len(bad_chunks) - 1} more corrupt inner chunks in this shard" if len(bad_chunks) > 1 else ""
            probs.append(f"{key}: inner chunk {coord}: {what}{more}")
    if sharded and not crc and files:
        probs.append(f"{a.path}: inner chunks carry no crc32c checksum; --deep decoded them "
                     f"({len(files)} shards) but cannot verify them")
    return probs


def _deep(reader: _Reader, zones: list[str], stats: dict) -> list[str]:
    """Every chunk file of the zones' sharded arrays and of the global_rgb levels."""
    paths = [f"{zone}/{aname}" for zone in zones for aname, spec in conv.ZONE_ARRAYS.items() if spec["sharded"]]
    g = reader.node(conv.GLOBAL_GROUP)
    ms = g.get("attributes", {}).get("multiscales") if isinstance(g, dict) and isinstance(g.get("attributes"), dict) else None
    layout = ms.get("layout") if isinstance(ms, dict) else None
    for item in (layout if isinstance(layout, list) else [])[:LEVELS_MAX]:
        if isinstance(item, dict) and plain_key(item.get("asset")):
            paths.append(f"{conv.GLOBAL_GROUP}/{item['asset']}/rgb")
    probs: list[str] = []
    for path in paths:
        a = _open_array(reader, path, probs)
        if isinstance(a, _Array):
            probs += _deep_array(reader, a, stats)
    return probs


# ---------------------------------------- multi-year index (tessera-stack:) --
def _stack_problems(attrs: dict, where: str) -> list[str]:
    """A multi-year index is not a tessera: v1 year store and must not claim to be one."""
    if conv.registered(attrs, [conv.TESSERA]):
        return []
    return [f"{where}: registers tessera: v1, but a multi-year index (tessera-stack:) is not a v1 year store"]


def _index_store(url: str, options: dict | None):
    """A local JSON or Parquet reference index as a zarr store, or None for anything else.  References
    are checked by open_index; a templated index resolves against `-o base=URL` (default: the index's
    own directory); `-o allow=PREFIX` admits references elsewhere."""
    import os
    from builder.virtual.reader import is_parquet_index, open_index
    path = url[len("file://"):] if url.startswith("file://") else url
    if "://" in path or not ((path.endswith(".json") and os.path.isfile(path)) or is_parquet_index(path)):
        return None
    opts = dict(options or {})
    base = opts.pop("base", None) or os.path.dirname(os.path.abspath(path.rstrip("/"))) + "/"
    return open_index(path, base=base, allow=opts.pop("allow", None), remote_options=opts or None).store


# ------------------------------------------------------------------ entry --
def _open_store(url: str, storage_options: dict | None):
    from pathlib import Path
    index = _index_store(url, storage_options)
    if index is not None:
        return index
    if "://" in url and not url.startswith("file://"):
        return zarr.storage.FsspecStore.from_url(url, storage_options=storage_options, read_only=True)
    path = Path(url[len("file://"):] if url.startswith("file://") else url)
    if not path.is_dir():
        raise FileNotFoundError(f"{path} is not a directory")
    return zarr.storage.LocalStore(path, read_only=True)


def validate(url: str, storage_options: dict | None = None, *, deep: bool = False,
             stats: dict | None = None) -> list[str]:
    """Every violation of the convention found in the store at `url` (empty list: valid).

    deep=True also checks every chunk of the zone arrays against its crc32c and decodes it; `stats`
    (a dict) receives the counts read ("files", "chunks")."""
    stats = {} if stats is None else stats
    try:
        store = _open_store(url, storage_options)
    except Exception as e:
        return [f"{url}: cannot open as a Zarr group ({type(e).__name__}: {e})"]
    probs: list[str] = []
    reader = _Reader(store, probs)
    root = reader.node("")
    if root is _MISSING:
        try:  # a Zarr v2 store has .zgroup and no zarr.json
            has_v2 = sync(store.exists(".zgroup"))
        except Exception:
            has_v2 = False
        if has_v2:
            return [f"{url}: Zarr format 2, the convention requires 3"]
        return [f"{url}: cannot open as a Zarr group (no zarr.json)"]
    if root is None:
        return probs
    if root.get("zarr_format") != 3:
        return [f"{url}: Zarr format {root.get('zarr_format')!r}, the convention requires 3"]
    if root.get("node_type") != "group":
        return [f"{url}: cannot open as a Zarr group (zarr.json is a {root.get('node_type')!r} node)"]
    attrs = _attrs(root, "root", probs)
    stack = not conv.registered(attrs, conv.STACK_ROOT_CONVENTIONS)  # a multi-year index (tessera-stack:)
    if stack:
        probs += (_schema_problems(attrs, conv.STACK_ROOT_SCHEMA, "root")
                  + _registration_problems(attrs, conv.STACK_ROOT_CONVENTIONS, "root") + _stack_problems(attrs, "root"))
    else:
        probs += (_schema_problems(attrs, conv.ROOT_SCHEMA, "root")
                  + _registration_problems(attrs, conv.ROOT_CONVENTIONS, "root"))
    probs += _check_consolidated(reader, root)
    zones, unreadable_zones = [], 0
    for name in reader.children(""):
        is_zone = conv.parse_zone_group_name(name) is not None
        if not (is_zone or name == conv.GLOBAL_GROUP or name.startswith("utm")):
            continue
        doc = reader.node(name)
        if doc is None:  # reported, naming its zarr.json
            unreadable_zones += is_zone
            continue
        if doc is _MISSING:
            continue
        if doc.get("node_type") != "group":
            continue
        try:
            if is_zone:
                zones.append(name)
                probs += _check_zone(reader, doc, name, attrs, stack=stack)
            elif name == conv.GLOBAL_GROUP:
                probs += _check_global(reader, doc)
            else:
                probs.append(f"{name}: zone groups must be named utm01..utm60")
        except RecursionError:
            probs.append(f"{name}: metadata nested too deeply to check")
    if not zones and not unreadable_zones:
        probs.append("root: no zone group (utmNN)")
    if deep:
        probs += _deep(reader, zones, stats)
    return probs
