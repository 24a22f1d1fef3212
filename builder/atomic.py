"""The one way the builder writes a file that a reader, a resumed build or publish may see: whole or not at all.

The bytes go to `<name>.<pid>.partial` beside the target (so concurrent workers never share a temporary
file), then os.replace renames it into place, which is atomic on a local file system.  A `.partial` file
left by a killed process is never read as data: builder/store.py removes them on resume and
builder/publish.py never uploads them.
"""
from __future__ import annotations

import os
from pathlib import Path

PARTIAL = ".partial"


def write_bytes(path: Path, data: bytes) -> None:
    """Write `data` to `path` atomically, making its directory when it is missing."""
    path = Path(path)
    tmp = path.with_name(f"{path.name}.{os.getpid()}{PARTIAL}")
    try:
        tmp.write_bytes(data)
    except FileNotFoundError:  # the directory is new (a mkdir before every write cost more than the write)
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp.write_bytes(data)
    os.replace(tmp, path)
