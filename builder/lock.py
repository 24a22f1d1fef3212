"""One writer at a time: an exclusive lock on what a command writes (a store, an index, a publish destination),
held for the whole command, so that a second command on the same target is refused in one line instead of
interleaving its writes with the first's.

A local lock is an advisory `flock(2)` on a file beside the target.  The kernel drops it when the process that
holds it ends, however it ends (SIGKILL, out of memory), so a lock left by a killed command never blocks the
next one: the file may stay, but nobody holds it.  The file says who holds it (pid, host, command, start), for
the refusal's line.  A released lock's file is removed while it is still held; whoever opened it meanwhile
finds, once it holds it, that the path no longer names that file, and starts again (so two processes never
both hold "the" lock through two different files).

Within one process the lock is re-entrant (a build inside `cmd_build`, which also validates the store under
it): flock would refuse a second descriptor of the same process.
"""
from __future__ import annotations

import errno
import fcntl
import json
import os
import socket
import sys
import threading
import time
from pathlib import Path

from builder.errors import BuildError

_held: dict[str, list] = {}  # lock path -> [descriptor, depth]: this process's locks
_guard = threading.Lock()


HOLDER_WAIT_S = 2.0  # how long a refused command waits for the holder to say who it is


def _holder(fd: int) -> str:
    """Who holds the lock, from its file.  A holder writes it just after taking the lock, so a command refused in
    that moment waits for it (a little), and says "another process" if it never comes."""
    end = time.monotonic() + HOLDER_WAIT_S
    while True:
        try:
            doc = json.loads(os.pread(fd, 4096, 0))
            since = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(float(doc["since"])))
            return f"pid {int(doc['pid'])} on {str(doc['host'])[:64]}, since {since}"
        except (ValueError, KeyError, TypeError, OSError):
            if time.monotonic() > end:
                return "another process"
            time.sleep(0.005)


class FileLock:
    """`with FileLock(path, target, what):` holds the lock at `path` or raises BuildError naming `target`.
    Directories missing on the way to `path` are made, and removed again on release when they are left empty
    (a refused first build leaves no record directory behind)."""

    def __init__(self, path: Path, target: str, what: str = "in use by another command", cannot: str = "its lock"):
        self.path = Path(path).absolute()
        self.target, self.what, self.cannot = target, what, cannot
        self._made: list[Path] = []

    def __enter__(self) -> "FileLock":
        key = str(self.path)
        with _guard:
            if key in _held:
                _held[key][1] += 1
                return self
        parent = self.path.parent
        while not parent.exists():
            self._made.append(parent)
            parent = parent.parent
        while True:
            try:
                self.path.parent.mkdir(parents=True, exist_ok=True)
                fd = os.open(self.path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)
            except OSError as e:  # a file where a directory must be, no permission, a read-only file system
                self._tidy()
                raise BuildError(f"cannot create {self.cannot} ({e.filename}: {e.strerror})", self.target) from None
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except OSError as e:
                who = _holder(fd)
                os.close(fd)
                self._tidy()
                if e.errno not in (errno.EWOULDBLOCK, errno.EAGAIN, errno.EACCES):
                    raise BuildError(f"cannot lock {self.path}: {e.strerror}", self.target) from None
                raise BuildError(f"{self.what} ({who}); wait for it to finish "
                                 f"(a lock left by a killed command is free)", self.target) from None
            st = os.fstat(fd)
            try:
                now = os.stat(self.path)
            except FileNotFoundError:
                now = None
            if now is not None and (now.st_dev, now.st_ino) == (st.st_dev, st.st_ino):
                break
            os.close(fd)  # the holder released and removed this file between our open and our flock
        doc = {"pid": os.getpid(), "host": socket.gethostname(), "since": time.time(), "argv": sys.argv[:8]}
        os.ftruncate(fd, 0)
        os.pwrite(fd, json.dumps(doc).encode(), 0)
        with _guard:
            _held[key] = [fd, 1]
        return self

    def __exit__(self, *exc) -> None:
        key = str(self.path)
        with _guard:
            entry = _held[key]
            entry[1] -= 1
            if entry[1]:
                return
            del _held[key]
        try:
            self.path.unlink()  # while held: see the module's docstring
        finally:
            os.close(entry[0])
        self._tidy()

    def _tidy(self) -> None:
        for d in self._made:
            try:
                d.rmdir()
            except OSError:  # not empty (a build wrote its record there), or gone
                break


def store_lock(record_dir: Path, store: Path) -> FileLock:
    """The lock of a year store's builds, in its build record directory (`<store>.build/` by default)."""
    return FileLock(Path(record_dir) / "build.lock", str(store), "another build is writing this store",
                    "the store's build record and lock")


def output_lock(output: Path, what: str) -> FileLock:
    """The lock of a command writing `output` (a file or a directory), a dotfile beside it."""
    output = Path(output).absolute()
    return FileLock(output.parent / f".{output.name}.lock", str(output), what)
