"""The entry: open the store, check the root group and its consolidated metadata, then every group."""
from __future__ import annotations

import zarr
from zarr.core.sync import sync

from builder.core import convention as conv
from builder.core import extensions as ext
from builder.core.describe import is_stack
from builder.validate.deep import check_chunks
from builder.validate.documents import MISSING, NODES_MAX, Reader, plain_key
from builder.validate.nodes import node_attrs, registration_problems, schema_problems
from builder.validate.pyramid import check_global
from builder.validate.stack import index_store, stack_problems
from builder.validate.zone import check_zone


def _check_consolidated(reader: Reader, doc: dict) -> list[str]:
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
        if own is MISSING:
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


def _open_store(url: str, storage_options: dict | None):
    from pathlib import Path
    index = index_store(url, storage_options)
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
    reader = Reader(store, probs)
    root = reader.node("")
    if root is MISSING:
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
    attrs = node_attrs(root, "root", probs)
    # Every problem is reported (jsonschema, nodes.py), so the root is not describe()d; its kind is describe's rule.
    stack = is_stack(attrs)  # a multi-year index (tessera-stack:)
    if stack:
        probs += (schema_problems(attrs, ext.STACK_ROOT_SCHEMA, "root")
                  + registration_problems(attrs, ext.STACK_ROOT_CONVENTIONS, "root") + stack_problems(attrs, "root"))
    else:
        probs += (schema_problems(attrs, conv.ROOT_SCHEMA, "root")
                  + registration_problems(attrs, conv.ROOT_CONVENTIONS, "root"))
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
        if doc is MISSING:
            continue
        if doc.get("node_type") != "group":
            continue
        try:
            if is_zone:
                zones.append(name)
                probs += check_zone(reader, doc, name, attrs, stack=stack)
            elif name == conv.GLOBAL_GROUP:
                probs += check_global(reader, doc)
            else:
                probs.append(f"{name}: zone groups must be named utm01..utm60")
        except RecursionError:
            probs.append(f"{name}: metadata nested too deeply to check")
    if not zones and not unreadable_zones:
        probs.append("root: no zone group (utmNN)")
    if deep:
        probs += check_chunks(reader, zones, stats)
    return probs
