"""The wheels the site assembles: rebuilt copies of PyPI wheels, the app's own wheel, bytecode added.

`wheel.wheelfile.WheelFile` does the bookkeeping: reading a wheel checks every member against its
RECORD, and writing one records each member's sha256 and size and writes RECORD on close.
"""
from __future__ import annotations

from pathlib import Path
from typing import Callable

from wheel.wheelfile import WheelFile

from builder.errors import BuildError

PURE_WHEEL_TAGS = ("Root-Is-Purelib: true", "Tag: py3-none-any")


def _members(whl: WheelFile) -> list[tuple[str, bytes]]:
    """Every member but the wheel's own RECORD (read checks each against it)."""
    return [(n, whl.read(n)) for n in whl.namelist() if n != whl.record_path]


def strip(src: Path, dest_dir: Path, drop: tuple[str, ...] = (), patches: dict | None = None) -> Path:
    """Rebuild a wheel as py3-none-any without compiled extension modules and without `drop` prefixes,
    applying `patches` ({member: (old, new) or a list of them}; each must apply exactly once)."""
    name, version = src.name.split("-")[:2]
    out = dest_dir / f"{name}-{version}-py3-none-any.whl"
    with WheelFile(src) as zin, WheelFile(out, "w") as zout:
        _same_dist_info(zin, zout)
        for n, data in _members(zin):
            if n.endswith((".so", ".pyd")) or n.startswith(drop):
                continue
            if patches and n in patches:
                edits = patches[n] if isinstance(patches[n], list) else [patches[n]]
                text = data.decode()
                for old, new in edits:
                    if text.count(old) != 1:
                        raise BuildError(f"cannot patch {n} in {src.name}: expected text not found once")
                    text = text.replace(old, new)
                data = text.encode()
            if n == f"{zin.dist_info_path}/WHEEL":
                lines = [ln for ln in data.decode().splitlines() if not ln.startswith(("Tag:", "Root-Is-Purelib:"))]
                data = ("\n".join(lines + list(PURE_WHEEL_TAGS)) + "\n").encode()
            zout.writestr(n, data)
    return out


def pack(out: Path, files: dict[str, bytes], name: str, version: str) -> None:
    """A pure wheel of `files` (archive name -> bytes) with minimal METADATA and WHEEL."""
    with WheelFile(out, "w") as z:
        for arc, data in files.items():
            z.writestr(arc, data)
        dist = z.dist_info_path
        z.writestr(f"{dist}/METADATA", f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n")
        z.writestr(f"{dist}/WHEEL", "Wheel-Version: 1.0\nGenerator: tessera-explorer\n" + "\n".join(PURE_WHEEL_TAGS) + "\n")


def _rewrite(path: Path, members: Callable[[list[tuple[str, bytes]]], list[tuple[str, bytes]]]) -> None:
    """Rewrite a wheel in place with `members(its members)` (RECORD regenerated); atomic by rename."""
    tmp = path.parent / ".partial" / path.name  # WheelFile needs the wheel's own file name
    tmp.parent.mkdir(exist_ok=True)
    with WheelFile(path) as zin, WheelFile(tmp, "w") as zout:
        _same_dist_info(zin, zout)
        for n, data in members(_members(zin)):
            zout.writestr(n, data)
    tmp.replace(path)
    tmp.parent.rmdir()


def add_members(path: Path, extra: dict[str, bytes]) -> None:
    """Rewrite a wheel in place with `extra` members added."""
    _rewrite(path, lambda members: members + sorted(extra.items()))


def sourceless(path: Path, pycs: dict[str, bytes]) -> None:
    """Rewrite a wheel in place with each compiled module's bytecode where its source was: `pkg/__pycache__/
    mod.cpython-312.pyc` becomes `pkg/mod.pyc` and `pkg/mod.py` goes (CPython imports a .pyc with no source
    beside it, as Pyodide's own standard library does). A module without bytecode keeps its source."""
    by_source = {}
    for arc, data in pycs.items():
        pkg, cache, name = arc.rpartition("__pycache__/")  # pkg keeps its trailing "/" ("" at the top)
        if not cache or name.count(".") != 2:
            raise BuildError(f"{path.name}: {arc} is not __pycache__/<module>.<tag>.pyc")
        by_source[pkg + name.split(".")[0] + ".py"] = data
    _rewrite(path, lambda members: [(n[:-3] + ".pyc", by_source[n]) if n in by_source else (n, data)
                                    for n, data in members])


def _same_dist_info(zin: WheelFile, zout: WheelFile) -> None:
    """WheelFile writes RECORD where the file name says; a wheel whose .dist-info is named otherwise
    (case, normalisation) is refused rather than given a second RECORD."""
    if zin.dist_info_path != zout.dist_info_path:
        raise BuildError(f"{zin.filename}: .dist-info is {zin.dist_info_path}, expected {zout.dist_info_path}")
