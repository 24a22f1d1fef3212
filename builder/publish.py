"""Publish stores to static hosting: a local directory or any fsspec URL (s3://, memory://, ...).

The destination becomes a mirror of the source.

* Published: every regular file under the source except dotfiles (any path segment starting with
  '.', but for Zarr v2's and Kerchunk's metadata files: builder/sitefiles.py) and build records (`*.build/` directories, `record.json`, `*.done`, `*.partial`).  A symbolic
  link or other non-regular file anywhere in the source is refused before anything is written:
  publish never follows a link.
* Order, for readers that look while a publish runs: data files (every file but metadata: `*.json`,
  `.zmetadata`, ...) first,
  new keys before keys replaced in place; then the `*.json` documents deepest first, so each store's
  root `zarr.json` (whose consolidated metadata is what readers open) is that store's last write, and
  `catalog.json` comes after the stores.  Files the source no longer has are deleted only after that
  switch.  Unchanged files are not rewritten.  A local file is written to a temporary dotfile and
  renamed, an object is one PUT, so every file is whole: the old version or the new one.
* Dotfiles at the destination are left alone (the mirror's temporary files excepted); everything
  else there that the source does not publish is deleted, build records included.
* A destination equal to, inside or containing the source is refused.
* Every tessera store under the source is validated first; an invalid one is not published.
* The destination is checked before anything is written there: a symbolic link (or device, pipe,
  socket) anywhere in it outside dotfiles is refused, naming it, so publish never writes through a
  link nor deletes one.  A destination that holds files (dotfiles aside) but no `.tessera-publish.json`
  is refused unless `force`: that marker, written by publish before its first file (a local dotfile,
  or an object for s3:// and other URLs), is what tells a published mirror from a directory of other
  files that the mirror would delete.
"""
from __future__ import annotations

import filecmp
import hashlib
import json
import os
import shutil
import signal
import stat
from pathlib import Path, PurePosixPath

import fsspec
from fsspec.implementations.local import LocalFileSystem

from builder.atomic import PARTIAL, write_bytes
from builder.core.describe import claims_tessera_root
from builder.errors import BuildError
from builder.hooks import kill_point
from builder.lock import destination_lock
from builder.parallel import progress_bar
from builder.sitefiles import hidden, is_metadata
from builder.validate import validate

TMP_SUFFIX = ".publishing"  # local temporary files: .{name}.{pid}.publishing, renamed into place
MARKER = ".tessera-publish.json"  # at a destination publish has written to (a dotfile: never published, never deleted)
MARKER_DOC = {"tessera-publish": 1, "note": "a mirror written by `python -m builder publish`, which may replace "
                                            "or delete every file here that is not a dotfile"}
STOP_AFTER = "TESSERA_PUBLISH_STOP_AFTER"  # tests only: SIGSTOP this process after that many destination changes


def find_stores(src: Path) -> list[Path]:
    """Year stores (root groups with tessera:dataset_version) at or below `src`."""
    out = []
    for meta in sorted(src.rglob("zarr.json"), key=lambda m: len(m.parts)) if src.is_dir() else []:
        try:
            doc = json.loads(meta.read_text())
        except ValueError:
            continue
        if claims_tessera_root(doc):
            if not any(p in out for p in meta.parents):
                out.append(meta.parent)
    return out


def excluded(rel: str) -> bool:
    """Never published: dotfiles and build records."""
    parts = rel.split("/")
    return (hidden(rel) or any(p.endswith(".build") for p in parts)
            or parts[-1] == "record.json" or parts[-1].endswith((".done", PARTIAL)))


def source_files(src: Path) -> dict[str, Path]:
    """The files to publish, by key relative to `src`.  Refuses links and special files (naming them)."""
    out: dict[str, Path] = {}
    for dirpath, dirnames, filenames in os.walk(src):
        here = Path(dirpath)
        base = here.relative_to(src).as_posix()
        descend = []
        for name in sorted(dirnames) + sorted(filenames):
            rel = name if base == "." else f"{base}/{name}"
            if excluded(rel):
                continue
            path = here / name
            mode = path.lstat().st_mode
            if stat.S_ISLNK(mode):
                raise BuildError(f"is a symbolic link to {os.readlink(path)}; publish never follows links "
                                 "(copy the file in or remove the link)", str(path))
            if stat.S_ISDIR(mode):
                descend.append(name)
            elif stat.S_ISREG(mode):
                out[rel] = path
            else:
                raise BuildError("is not a regular file (device, pipe or socket); refusing to publish it", str(path))
        dirnames[:] = descend
    return out


def _refuse_overlap(src: Path, fs, root: str) -> None:
    """A destination equal to, inside or containing the source would copy the source onto itself."""
    if not isinstance(fs, LocalFileSystem):
        return
    s, d = src.resolve(), Path(root).resolve()
    if d == s:
        raise BuildError(f"destination is the source {src}; publish needs a separate destination", root)
    if s in d.parents:
        raise BuildError(f"destination is inside the source {src}; every publish would nest another copy", root)
    if d in s.parents:
        raise BuildError(f"destination contains the source {src}; the mirror would delete the source", root)


def _listing(fs, root: str) -> dict[str, dict]:
    """What the destination holds now, by key relative to `root`."""
    try:
        found = fs.find(root, detail=True)
    except FileNotFoundError:
        return {}
    except OSError as e:
        raise BuildError(f"cannot list the destination ({e.strerror or e})", root) from None
    prefix = f"{root}/"
    return {p[len(prefix):]: info for p, info in found.items() if p.startswith(prefix)}


def _unchanged(fs, local: Path, target: str, info: dict) -> bool:
    """Whether the destination already holds exactly `local`'s bytes (local compare, or the S3 ETag = MD5)."""
    if info.get("size") != local.stat().st_size:
        return False
    if isinstance(fs, LocalFileSystem):
        return filecmp.cmp(local, target, shallow=False)
    etag = str(info.get("ETag") or info.get("etag") or "").strip('"')
    return "-" not in etag and etag == hashlib.md5(local.read_bytes(), usedforsecurity=False).hexdigest()


def _refuse_links(fs, listing: dict[str, dict], root: str) -> None:
    """A link (or a device, pipe, socket) where publish may write or delete: refused, naming it.  Dotfiles are
    left alone, links among them too.  fsspec's local listing reports a link itself and never descends it."""
    if not isinstance(fs, LocalFileSystem):
        return
    for rel, info in sorted(listing.items()):
        if hidden(rel):
            continue
        if info.get("islink"):
            raise BuildError(f"is a symbolic link to {info.get('destination')}; publish never writes through a link "
                             "in the destination (remove the link, or publish elsewhere)", f"{root}/{rel}")
        if info.get("type") not in ("file", "directory"):
            raise BuildError("is not a regular file (device, pipe or socket); refusing to publish over it",
                             f"{root}/{rel}")


def _refuse_foreign(listing: dict[str, dict], dest: str, force: bool) -> None:
    """A destination holding files (dotfiles aside) that publish did not write (no MARKER): refused unless forced."""
    theirs = [r for r in sorted(listing) if not hidden(r)]
    if theirs and MARKER not in listing and not force:
        raise BuildError(f"holds {len(theirs)} file{'s' * (len(theirs) != 1)} (e.g. {theirs[0]}) and no {MARKER}, "
                         "so publish did not write it; a mirror would replace or delete them: pass --force to "
                         "publish here anyway", dest)


def _mark(fs, root: str) -> None:
    """Write MARKER, whole: a local file through builder/atomic.py, an object in one PUT."""
    data = (json.dumps(MARKER_DOC, indent=1) + "\n").encode()
    if isinstance(fs, LocalFileSystem):
        write_bytes(Path(root) / MARKER, data)
    else:
        fs.pipe_file(f"{root}/{MARKER}", data)


def plan_uploads(files: dict[str, Path], listing: dict[str, dict], fs, root: str) -> list[str]:
    """Changed files in publishing order: new data keys, data replaced in place, metadata deepest first
    (each store's root zarr.json after its nodes, catalog.json last)."""
    todo = [r for r in sorted(files) if r not in listing or not _unchanged(fs, files[r], f"{root}/{r}", listing[r])]
    data = [r for r in todo if not is_metadata(r)]
    meta = [r for r in todo if is_metadata(r)]
    meta.sort(key=lambda r: (PurePosixPath(r).name == "catalog.json", -r.count("/"), r))
    return [r for r in data if r not in listing] + [r for r in data if r in listing] + meta


def _put(fs, local: Path, target: str) -> None:
    """Write one file so that a reader gets the old or the new version, never a part."""
    parent, name = target.rsplit("/", 1)
    fs.makedirs(parent, exist_ok=True)
    if not isinstance(fs, LocalFileSystem):
        fs.put_file(str(local), target)  # an object store replaces a key at once
        return
    tmp = f"{parent}/.{name}.{os.getpid()}{TMP_SUFFIX}"
    shutil.copyfile(local, tmp)
    os.replace(tmp, target)


def _prune_empty_dirs(root: str, removed: list[str]) -> None:
    """Local destinations: remove the directories that deletions left empty."""
    dirs = {p for r in removed for p in PurePosixPath(r).parents if p.name}
    for d in sorted(dirs, key=lambda p: -len(p.parts)):
        try:
            os.rmdir(f"{root}/{d}")
        except OSError:
            pass  # not empty


def publish(src: Path, dest: str, storage_options: dict | None = None, quiet: bool = False,
            force: bool = False) -> int:
    """Mirror `src` to `dest`; returns the number of files written.  `force`: publish into a destination that
    holds files but no MARKER (they are replaced or deleted)."""
    src = Path(src)
    if not src.exists():
        raise BuildError("source does not exist", str(src))
    try:
        fs, root = fsspec.core.url_to_fs(dest, **(storage_options or {}))
    except (ValueError, ImportError) as e:
        raise BuildError(f"cannot use destination ({e})", dest) from None
    root = root.rstrip("/")
    _refuse_overlap(src, fs, root)
    files = source_files(src) if src.is_dir() else {}
    stores = [s for s in find_stores(src) if s == src or not excluded(s.relative_to(src).as_posix())]
    if not stores:
        raise BuildError("no tessera store (root zarr.json with tessera:dataset_version) found", str(src))
    for s in stores:
        probs = validate(str(s))
        if probs:
            raise BuildError(f"store is invalid, not publishing: {probs[0]} (+{len(probs) - 1} more)", str(s))
    try:
        fs.makedirs(root, exist_ok=True)
    except OSError as e:
        raise BuildError(f"destination is not writable ({e.strerror or e})", dest) from None
    with destination_lock(fs, root, dest, "another publish is writing this destination"):
        kill_point("publish-locked")
        listing = _listing(fs, root)
        _refuse_links(fs, listing, root)
        _refuse_foreign(listing, dest, force)
        if MARKER not in listing:
            try:
                _mark(fs, root)
            except OSError as e:
                raise BuildError(f"destination is not writable ({e.strerror or e})", dest) from None
        uploads = plan_uploads(files, listing, fs, root)
        stale = [r for r in sorted(listing) if r not in files and (not hidden(r) or r.endswith(TMP_SUFFIX))]
        stop_after = int(os.environ.get(STOP_AFTER) or 0)
        prog = progress_bar()
        prog.disable = quiet
        with prog:
            task = prog.add_task(f"publishing to {dest}", total=len(uploads) + len(stale))
            for n, (rel, action) in enumerate([(r, "upload") for r in uploads] + [(r, "delete") for r in stale], 1):
                target = f"{root}/{rel}"
                try:
                    _put(fs, files[rel], target) if action == "upload" else fs.rm_file(target)
                except OSError as e:
                    raise BuildError(f"{action} failed ({e.strerror or e})", target) from None
                prog.advance(task)
                if n == stop_after:
                    os.kill(os.getpid(), signal.SIGSTOP)
        if isinstance(fs, LocalFileSystem):
            _prune_empty_dirs(root, stale)
        if stale:
            print(f"removed {len(stale)} files that {src} does not have from {dest}")
        return len(uploads)


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
