"""Publish stores to static hosting: a local directory or any fsspec URL (s3://, memory://, ...).

Order matters for readers that look while an upload runs: shard and chunk
files go first, then the `zarr.json` documents deepest first, the root's
last.  A store therefore only becomes visible when everything it points to
is already there.  Every tessera store under the source is validated first;
an invalid one is not published.
"""
from __future__ import annotations

import json
from pathlib import Path

import fsspec

from builder.errors import BuildError
from builder.parallel import progress_bar
from builder.validate import validate


def find_stores(src: Path) -> list[Path]:
    """Year stores (root groups with tessera:dataset_version) at or below `src`."""
    out = []
    for meta in sorted(src.rglob("zarr.json"), key=lambda m: len(m.parts)) if src.is_dir() else []:
        try:
            doc = json.loads(meta.read_text())
        except ValueError:
            continue
        attrs = doc.get("attributes", {})
        if doc.get("node_type") == "group" and "tessera:dataset_version" in attrs and "tessera:utm_zone" not in attrs:
            if not any(p in out for p in meta.parents):
                out.append(meta.parent)
    return out


def _order(files: list[Path]) -> list[Path]:
    data = [f for f in files if f.name != "zarr.json"]
    meta = sorted((f for f in files if f.name == "zarr.json"), key=lambda f: -len(f.parts))
    return data + meta


def publish(src: Path, dest: str, storage_options: dict | None = None, quiet: bool = False) -> int:
    src = Path(src)
    if not src.exists():
        raise BuildError("source does not exist", str(src))
    stores = find_stores(src)
    if not stores:
        raise BuildError("no tessera store (root zarr.json with tessera:dataset_version) found", str(src))
    for s in stores:
        probs = validate(str(s))
        if probs:
            raise BuildError(f"store is invalid, not publishing: {probs[0]} (+{len(probs) - 1} more)", str(s))
    try:
        fs, root = fsspec.core.url_to_fs(dest, **(storage_options or {}))
    except (ValueError, ImportError) as e:
        raise BuildError(f"cannot use destination ({e})", dest) from None
    files = _order([p for p in src.rglob("*") if p.is_file() and ".partial" not in p.name])
    root = root.rstrip("/")
    prog = progress_bar()
    prog.disable = quiet
    try:
        fs.makedirs(root, exist_ok=True)
    except OSError as e:
        raise BuildError(f"destination is not writable ({e.strerror or e})", dest) from None
    with prog:
        task = prog.add_task(f"publishing to {dest}", total=len(files))
        for f in files:
            target = f"{root}/{f.relative_to(src).as_posix()}"
            try:
                fs.makedirs(target.rsplit("/", 1)[0], exist_ok=True)
                fs.put_file(str(f), target)
            except (OSError, PermissionError) as e:
                raise BuildError(f"upload failed ({e.strerror or e})", target) from None
            prog.advance(task)
    return len(files)


def parse_options(pairs: list[str]) -> dict:
    """`-o key=value` pairs for fsspec (true/false/integers converted); S3 endpoints go in client_kwargs."""
    out: dict = {}
    for pair in pairs or []:
        if "=" not in pair:
            raise BuildError(f"storage option {pair!r} is not key=value")
        k, v = pair.split("=", 1)
        val: object = {"true": True, "false": False}.get(v.lower(), v)
        if isinstance(val, str) and val.isdigit():
            val = int(val)
        if k == "endpoint_url":
            out.setdefault("client_kwargs", {})["endpoint_url"] = val
        else:
            out[k] = val
    return out
