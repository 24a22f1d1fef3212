"""What the files of a served or published tree are, for `serve` and `publish` alike.

Hidden: a dotfile, or anything inside a dot-directory, except the metadata files Zarr v2 and a Kerchunk
Parquet index name with a dot (`.zarray`, `.zgroup`, `.zattrs`, `.zmetadata`), which are data the builder
writes (`index --zarr-format 2`, `index ... -o years.parquet`).  Metadata: those files and every `*.json`,
revalidated on each use by a server and published after the data they describe.
"""
from __future__ import annotations

ZARR_DOTFILES = frozenset({".zarray", ".zgroup", ".zattrs", ".zmetadata"})


def hidden_segments(parts: list[str]) -> bool:
    """Whether a path given as its segments is hidden (never served, never published)."""
    last = len(parts) - 1
    return any(p.startswith(".") and not (k == last and p in ZARR_DOTFILES) for k, p in enumerate(parts))


def hidden(rel: str) -> bool:
    """`hidden_segments` of a '/'-separated path relative to the tree's root."""
    return hidden_segments([p for p in rel.split("/") if p])


def is_metadata(rel: str) -> bool:
    name = rel.rsplit("/", 1)[-1]
    return name.endswith(".json") or name in ZARR_DOTFILES
