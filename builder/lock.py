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

A store's builds take `build.lock` in its build record (`store_lock`): a FileLock for a local record, an ObjectLock
for one on an object store (builder/sink.py decides).  An object store (s3://) has no flock and no process to
watch: its lock is an object created only if absent (a
conditional PUT, `If-None-Match: *`) holding a lease, which the holder renews while it works (a conditional PUT
on the object's own ETag, so a holder that lost its lease never overwrites another's).  A lock is stale, and is
taken over by one conditional PUT on its ETag, when its lease has run out, or at once when its holder was a
process on this machine that is gone (a killed command).
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

_held: dict[str, list] = {}  # lock path -> [descriptor (an ObjectLock: the one holding it), depth]: this process's locks
_guard = threading.Lock()


HOLDER_WAIT_S = 2.0  # how long a refused command waits for the holder to say who it is


def _identity() -> dict:
    return {"pid": os.getpid(), "host": socket.gethostname(), "start": _start_time(os.getpid()),
            "since": time.time(), "argv": sys.argv[:8]}


def _start_time(pid: int) -> str | None:
    """A process's start (clock ticks since boot, /proc/PID/stat field 22): with the pid, names one process even
    after its pid is reused.  None where /proc is not there."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            return f.read().rsplit(b")", 1)[1].split()[19].decode()
    except (OSError, IndexError):
        return None


def _describe(doc: dict) -> str:
    since = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(float(doc["since"])))
    return f"pid {int(doc['pid'])} on {str(doc['host'])[:64]}, since {since}"


def _holder(fd: int) -> str:
    """Who holds the lock, from its file.  A holder writes it just after taking the lock, so a command refused in
    that moment waits for it (a little), and says "another process" if it never comes."""
    end = time.monotonic() + HOLDER_WAIT_S
    while True:
        try:
            return _describe(json.loads(os.pread(fd, 4096, 0)))
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
        os.ftruncate(fd, 0)
        os.pwrite(fd, json.dumps(_identity()).encode(), 0)
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


def store_lock(record, store) -> FileLock | ObjectLock:
    """The lock of a year store's builds, `build.lock` in its build record (a builder.sink.Sink: `<store>.build/` by
    default): a FileLock on a local record, an ObjectLock on an object store's."""
    return record.lock("build.lock", str(store), "another build is writing this store",
                       "the store's build record and lock")


def output_lock(output: Path, what: str) -> FileLock:
    """The lock of a command writing `output` (a file or a directory), a dotfile beside it."""
    output = Path(output).absolute()
    return FileLock(output.parent / f".{output.name}.lock", str(output), what)


LEASE_S = float(os.environ.get("TESSERA_LOCK_LEASE", "120"))  # an object lock's lease, renewed every quarter of it


class ObjectLock:
    """`with ObjectLock(fs, key, target, what):` on an fsspec object store (s3fs: conditional PUTs).  See the module's
    docstring for the rule; the refusal is the same one line as FileLock's.  Re-entrant within a process, as
    FileLock is (the instance that took the lock renews and releases it)."""

    def __init__(self, fs, key: str, target: str, what: str = "in use by another command", cannot: str = "its lock"):
        self.fs, self.key, self.target, self.what, self.cannot = fs, key, target, what, cannot
        self._etag: str | None = None
        self._stop = threading.Event()
        self._renewer: threading.Thread | None = None
        self.lost = False  # set when a renewal found the lock taken over (this holder stalled past its lease)

    def _doc(self) -> bytes:
        return json.dumps({**_identity(), "expires": time.time() + LEASE_S}).encode()

    def _put(self, **cond) -> str:
        self.fs.pipe_file(self.key, self._doc(), **cond)
        return self.fs.info(self.key, refresh=True)["ETag"]

    @property
    def _held_key(self) -> str:
        return f"object:{type(self.fs).__name__}:{self.key}"

    def __enter__(self) -> "ObjectLock":
        with _guard:
            if self._held_key in _held:
                _held[self._held_key][1] += 1
                return self
        for _ in range(8):  # each pass either takes the lock or finds a live holder; races only repeat it
            try:
                self._etag = self._put(mode="create")
                break
            except FileExistsError:
                pass
            except OSError as e:  # no such bucket, no permission, the endpoint unreachable
                raise BuildError(f"cannot create {self.cannot} ({type(e).__name__}: {str(e)[:200]})",
                                 self.target) from None
            try:
                info = self.fs.info(self.key, refresh=True)
                doc = json.loads(self.fs.cat_file(self.key)[:4096])
            except FileNotFoundError:
                continue  # released meanwhile
            except (ValueError, OSError):
                doc, info = {}, self.fs.info(self.key, refresh=True)
            if not _stale(doc):
                raise BuildError(f"{self.what} ({_describe(doc) if _valid(doc) else 'another process'}); wait for it "
                                 "to finish (a lock whose holder is gone is taken over)", self.target)
            try:
                self._etag = self._put(IfMatch=info["ETag"])  # take over the stale lock: one taker wins
                break
            except OSError:
                continue
        else:
            raise BuildError(f"cannot take the lock {self.key}: it keeps changing", self.target)
        self._renewer = threading.Thread(target=self._renew, name="tessera-lock-lease", daemon=True)
        self._renewer.start()
        with _guard:
            _held[self._held_key] = [self, 1]
        return self

    def _renew(self) -> None:
        while not self._stop.wait(LEASE_S / 4):
            try:
                self._etag = self._put(IfMatch=self._etag)
            except OSError:
                self.lost = True
                return

    def __exit__(self, *exc) -> None:
        with _guard:
            entry = _held[self._held_key]
            entry[1] -= 1
            if entry[1]:
                return
            del _held[self._held_key]
        entry[0]._release()

    def _release(self) -> None:
        self._stop.set()
        if self._renewer is not None:
            self._renewer.join()
        if not self.lost:
            try:
                if self.fs.info(self.key, refresh=True)["ETag"] == self._etag:
                    self.fs.rm_file(self.key)
            except (FileNotFoundError, OSError):
                pass


def _valid(doc) -> bool:
    return isinstance(doc, dict) and all(k in doc for k in ("pid", "host", "since", "expires"))


def _stale(doc) -> bool:
    """An object lock nobody holds: its lease ran out, or its holder was a process of this machine that is gone."""
    if not _valid(doc):
        return True
    try:
        if float(doc["expires"]) < time.time():
            return True
        if doc["host"] == socket.gethostname() and doc.get("start") is not None:
            return _start_time(int(doc["pid"])) != doc["start"]
    except (TypeError, ValueError):
        return True
    return False


def destination_lock(fs, root: str, target: str, what: str):
    """The lock of a command writing below `root` of an fsspec filesystem: a FileLock on a local destination, an
    ObjectLock on an object store; a dotfile `.tessera.lock` at the root either way."""
    from fsspec.implementations.local import LocalFileSystem
    if isinstance(fs, LocalFileSystem):
        return FileLock(Path(root) / ".tessera.lock", target, what, "the destination's lock")
    return ObjectLock(fs, f"{root.rstrip('/')}/.tessera.lock", target, what)
