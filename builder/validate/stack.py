"""The multi-year index (tessera-stack:): its own rule, and opening a local JSON or Parquet index as a store."""
from __future__ import annotations

from builder.core import convention as conv


def stack_problems(attrs: dict, where: str) -> list[str]:
    """A multi-year index is not a tessera: v1 year store and must not claim to be one."""
    if conv.registered(attrs, [conv.TESSERA]):
        return []
    return [f"{where}: registers tessera: v1, but a multi-year index (tessera-stack:) is not a v1 year store"]


def index_store(url: str, options: dict | None):
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
