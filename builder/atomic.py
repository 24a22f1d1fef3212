"""The one way the builder writes a file or a directory that a reader, a resumed build or publish may see:
whole or not at all.

A file (`write_bytes`): the bytes go to `<name>.<pid>.partial` beside the target (so concurrent workers
never share a temporary file), then os.replace renames it into place, which is atomic on a local file
system.  A write that fails (a full disk, a file size limit) removes its temporary file and leaves the
target as it was; the error is a BuildError naming the target (one line).

A directory (`write_dir`, a Parquet index): `fill(tmp)` writes the new directory at `.<name>.<pid>.partial`
beside the target, which is then swapped in, in this order:

  1. no directory at the target yet: one rename, tmp -> target.
  2. a directory there: one system call exchanges the two (Linux renameat2 RENAME_EXCHANGE, macOS
     renamex_np RENAME_SWAP), so the target holds the whole old or the whole new directory at every
     moment, and a kill leaves one of them; then the old one, now at the temporary name, is removed.
  3. a system or file system without that exchange: target -> `.<name>.old.partial`, then tmp -> target.
     Between the two renames there is no directory at the target (a reader is told "not found", never
     given a mix); a kill there leaves the old directory at `.<name>.old.partial`, and the next
     write_dir of the same target puts it back first.

Writes that do not come through here are whole too: zarr-python's LocalStore (zarr 3.1, the version
pyproject pins) writes every key, zarr.json included, to a temporary file renamed into place and removes
it when the write fails (the store's groups, arrays and consolidated metadata, builder/store.py);
publish renames its own temporary dotfiles into place (builder/publish.py); a mirror's tiles stream to
a temporary file renamed into place (builder/mirror/fetch.py).  The build writes through builder/sink.py,
whose local sink writes every object (shards, documents, each journal entry) here.

A reader that read the old directory's entry document (a Parquet index's `.zmetadata`) before the swap
and opens its other files after it gets new files: reopen what was rewritten.  A `.partial` file or
directory left by a killed process is never read as data: builder/store.py removes them on resume,
write_dir removes those of processes that are gone, and builder/publish.py never uploads them.
"""
from __future__ import annotations

import ctypes
import ctypes.util
import errno
import os
import re
import shutil
import sys
from pathlib import Path
from typing import Callable

from builder.errors import BuildError

PARTIAL = ".partial"


def _failed(path: Path, e: OSError) -> BuildError:
    why = os.strerror(e.errno) if isinstance(e.errno, int) and e.errno > 0 else (e.strerror or str(e))
    return BuildError(f"cannot write ({why}); left as it was", str(path))


def write_bytes(path: Path, data: bytes) -> None:
    """Write `data` to `path` atomically, making its directory when it is missing."""
    path = Path(path)
    tmp = path.with_name(f"{path.name}.{os.getpid()}{PARTIAL}")
    try:
        try:
            tmp.write_bytes(data)
        except FileNotFoundError:  # the directory is new (a mkdir before every write cost more than the write)
            path.parent.mkdir(parents=True, exist_ok=True)
            tmp.write_bytes(data)
        os.replace(tmp, path)
    except OSError as e:
        tmp.unlink(missing_ok=True)
        raise _failed(path, e) from None
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise


# ------------------------------------------------------------------ directories --
def _exchange_call():
    """The system call that swaps two paths, as f(a: bytes, b: bytes) -> errno (0: done), or None."""
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or None, use_errno=True)
    except OSError:
        return None
    if sys.platform.startswith("linux") and hasattr(libc, "renameat2"):
        at_fdcwd, rename_exchange = -100, 2

        def call(a: bytes, b: bytes) -> int:
            return 0 if libc.renameat2(at_fdcwd, a, at_fdcwd, b, rename_exchange) == 0 else ctypes.get_errno()
        return call
    if sys.platform == "darwin" and hasattr(libc, "renamex_np"):
        rename_swap = 2

        def call(a: bytes, b: bytes) -> int:
            return 0 if libc.renamex_np(a, b, rename_swap) == 0 else ctypes.get_errno()
        return call
    return None


_EXCHANGE = _exchange_call()


def _exchange(a: Path, b: Path) -> bool:
    """Swap the directories at `a` and `b` in one step; False when this system or file system cannot."""
    if _EXCHANGE is None:
        return False
    err = _EXCHANGE(os.fsencode(a), os.fsencode(b))
    if err in (errno.ENOSYS, errno.EINVAL, errno.ENOTSUP, errno.EOPNOTSUPP):
        return False
    if err:
        raise OSError(err, os.strerror(err), str(b))
    return True


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _recover(path: Path) -> None:
    """Put back what a killed write_dir left: the old directory (case 3) when the target is missing, and
    remove the temporary directories of processes that are gone."""
    aside = path.with_name(f".{path.name}.old{PARTIAL}")
    if aside.is_dir() and not path.exists():
        os.replace(aside, path)
    elif aside.is_dir():
        shutil.rmtree(aside, ignore_errors=True)
    pattern = re.compile(rf"\.{re.escape(path.name)}\.(\d+){re.escape(PARTIAL)}")
    for p in path.parent.iterdir() if path.parent.is_dir() else ():
        m = pattern.fullmatch(p.name)
        if m and int(m.group(1)) != os.getpid() and not _alive(int(m.group(1))):
            shutil.rmtree(p, ignore_errors=True)


def write_dir(path: Path, fill: Callable[[Path], None]) -> None:
    """Write the directory `path` whole or not at all: `fill(tmp)` writes it at a temporary path beside it,
    which is swapped in as the module docstring says.  A failing `fill` leaves `path` as it was."""
    path = Path(path)
    tmp = path.with_name(f".{path.name}.{os.getpid()}{PARTIAL}")
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        _recover(path)
        shutil.rmtree(tmp, ignore_errors=True)
        tmp.mkdir()
        fill(tmp)
        if not path.exists():
            os.replace(tmp, path)  # 1
        elif _exchange(tmp, path):  # 2
            shutil.rmtree(tmp, ignore_errors=True)
        else:  # 3
            aside = path.with_name(f".{path.name}.old{PARTIAL}")
            os.replace(path, aside)
            os.replace(tmp, path)
            shutil.rmtree(aside, ignore_errors=True)
    except OSError as e:
        shutil.rmtree(tmp, ignore_errors=True)
        raise _failed(path, e) from None
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
