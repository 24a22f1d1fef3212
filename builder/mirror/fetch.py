"""HTTP fetching with retries into the tile cache: each file checked, then renamed into place.

A mirror may lie (builder/mirror/limits.py holds the limits and their flags):
- a file is read up to the size its manifest lists, plus one byte to see a longer body, which is an error;
  a file listed without a size is read up to `Limits.file_size` (manifests: `Limits.manifest_size`), and a
  Content-Length above it is refused before the body;
- every file has a total deadline, `Limits.file_timeout` seconds over all its attempts: a watchdog shuts the
  connection when it passes, whatever the server trickles (the socket timeout bounds one read only);
- a redirect to another host name is refused unless `Limits.other_hosts`, and to anything but http(s) always.
Each refusal is a BuildError (one line, exit 2) and leaves no partial file: a file being fetched is
`NAME.partial-<pid>-<thread>`, deleted whatever ends the attempt, and a manifest is held in an anonymous
temporary file.
"""
from __future__ import annotations

import functools
import hashlib
import http.client
import os
import socket
import tempfile
import threading
import time
import urllib.error
import urllib.parse
import urllib.request
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from builder.errors import BuildError
from builder.mirror.limits import FLAGS, Limits
from builder.tiles import PickledNpy, npy_header

MANIFEST = "manifest.parquet"
REGISTRY = "registry.parquet"
LANDMASKS = "landmasks.parquet"
RETRIES = 5  # attempts per file
BACKOFF = float(os.environ.get("TESSERA_MIRROR_BACKOFF", "0.5"))  # seconds, doubled per attempt, capped
BACKOFF_MAX = 8.0
TIMEOUT = float(os.environ.get("TESSERA_MIRROR_TIMEOUT", "60"))  # seconds per socket operation
BLOCK = 1 << 16  # small reads, so a slow body reaches the .partial file as it arrives
USER_AGENT = "tessera-explorer-builder"


class _Retry(Exception):
    """A transient failure: try again."""


class _NotFound(Exception):
    pass


class _Expired(Exception):
    """The file's deadline passed."""


@dataclass(frozen=True)
class Remote:
    url: str
    rel: str  # canonical path below the cache root
    size: int | None
    sha256: str | None
    kind: str  # "npy" or "tiff"


# ------------------------------------------------------------ deadline --
class _Watch:
    """Shuts the connection of one request when the file's deadline passes (a blocked read then returns)."""

    def __init__(self, end: float):
        self.lock = threading.Lock()
        self.sock: socket.socket | None = None
        self.expired = False
        self.timer = threading.Timer(max(0.0, end - time.monotonic()), self.expire)
        self.timer.daemon = True

    def expire(self) -> None:
        with self.lock:
            self.expired = True
            self._shut()

    def attach(self, sock: socket.socket) -> None:
        with self.lock:
            self.sock = sock
            if self.expired:
                self._shut()

    def _shut(self) -> None:
        if self.sock is not None:
            try:
                self.sock.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass


_current = threading.local()  # .watch: the _Watch of this thread's request


@functools.lru_cache(maxsize=None)
def _watched(conn_class):
    """`conn_class` (http.client's HTTP or HTTPS connection), its socket attached to the thread's _Watch."""
    class Watched(conn_class):
        def connect(self):
            super().connect()
            watch = getattr(_current, "watch", None)
            if watch is not None:
                watch.attach(self.sock)
    return Watched


class _Watching:
    def do_open(self, http_class, req, **kwargs):
        return super().do_open(_watched(http_class), req, **kwargs)


class _HTTPHandler(_Watching, urllib.request.HTTPHandler):
    pass


class _HTTPSHandler(_Watching, urllib.request.HTTPSHandler):
    pass


class _Redirects(urllib.request.HTTPRedirectHandler):
    """Redirects to http(s) on the same host name; to another host only when allowed."""

    def __init__(self, other_hosts: bool):
        self.other_hosts = other_hosts

    def redirect_request(self, req, fp, code, msg, headers, newurl):
        try:
            new, old = urllib.parse.urlsplit(newurl), urllib.parse.urlsplit(req.full_url)
        except ValueError:
            new = old = None
        if new is None or new.scheme not in ("http", "https"):
            fp.close()
            raise BuildError(f"redirected to {newurl[:200]!r}, not an http(s) URL", req.full_url)
        if new.hostname != old.hostname and not self.other_hosts:
            fp.close()
            raise BuildError(f"redirected to another host, {str(new.hostname)[:100]!r} ({newurl[:200]!r}); "
                             f"{FLAGS['other_hosts']} follows such redirects", req.full_url)
        return super().redirect_request(req, fp, code, msg, headers, newurl)


# ------------------------------------------------------------------ HTTP --
def _get(url: str, sink, expected: int | None, cap: int, cap_flag: str, end: float, limits: Limits) -> int:
    """One GET streamed into `sink`: of `expected` bytes (the manifest's size; a longer body is an error), or at
    most `cap` when no size is listed; cut off at `end` (time.monotonic()).  Returns the byte count.  Raises
    _Retry, _NotFound, _Expired or BuildError."""
    req = urllib.request.Request(url, headers={"User-Agent": USER_AGENT, "Accept-Encoding": "identity"})
    opener = urllib.request.build_opener(_HTTPHandler, _HTTPSHandler, _Redirects(limits.other_hosts))
    watch = _current.watch = _Watch(end)
    watch.timer.start()
    try:
        with opener.open(req, timeout=max(0.001, min(TIMEOUT, end - time.monotonic()))) as r:
            length = r.headers.get("Content-Length")
            length = int(length) if length is not None and length.strip().isdigit() else None
            if length is not None and expected is not None and length != expected:
                raise BuildError(f"server announces {length} bytes, the manifest says {expected}", url)
            limit = cap if expected is None else expected
            if length is not None and length > limit:
                raise BuildError(f"server announces {length} bytes, more than the limit of {cap} bytes ({cap_flag})",
                                 url)
            n = 0
            while block := r.read1(min(BLOCK, limit + 1 - n)):
                n += len(block)
                if n > limit:
                    raise BuildError(f"sends more than the {expected} bytes the manifest lists" if expected is not None
                                     else f"more than the limit of {cap} bytes ({cap_flag})", url)
                sink(block)
            if watch.expired:
                raise _Expired()
            if length is not None and n != length:
                raise _Retry(f"short body: {n} of {length} bytes")
            return n
    except urllib.error.HTTPError as e:
        if e.code in (404, 410):
            raise _NotFound(f"HTTP {e.code}") from None
        if e.code >= 500 or e.code in (408, 429):
            raise _Retry(f"HTTP {e.code}") from None
        raise BuildError(f"HTTP {e.code} {str(e.reason)[:100]!r}", url) from None
    except (urllib.error.URLError, http.client.HTTPException, ConnectionError, socket.timeout, TimeoutError,
            OSError) as e:
        if watch.expired:
            raise _Expired() from None
        if isinstance(e, urllib.error.URLError):
            raise _Retry(f"{e.reason}") from None
        raise _Retry(f"{type(e).__name__}: {e}" if str(e) else type(e).__name__) from None
    finally:
        watch.timer.cancel()
        _current.watch = None


def _with_retries(url: str, attempt_fn, retries: int, limits: Limits):
    """attempt_fn(end) until it succeeds, at most `retries` times and until the file's deadline `end`."""
    end = time.monotonic() + limits.file_timeout
    last = ""
    try:
        for k in range(retries):
            if time.monotonic() >= end:
                raise _Expired()
            try:
                return attempt_fn(end)
            except _Retry as e:
                last = str(e)
                if k + 1 < retries:
                    time.sleep(max(0.0, min(BACKOFF * 2 ** k, BACKOFF_MAX, end - time.monotonic())))
    except _Expired:
        raise BuildError(f"not complete within {limits.file_timeout:g} s ({FLAGS['file_timeout']})", url) from None
    raise BuildError(f"failed after {retries} attempts (last: {last})", url)


def fetch_table(url: str, limits: Limits, tmpdir: Path, retries: int = RETRIES):
    """The file at `url` (a manifest: at most `limits.manifest_size` bytes) as an anonymous temporary file in
    `tmpdir`, open at its start; None when the mirror has none."""
    f = tempfile.TemporaryFile(dir=tmpdir)

    def attempt(end):
        f.seek(0)
        f.truncate()
        _get(url, f.write, None, limits.manifest_size, FLAGS["manifest_size"], end, limits)
    try:
        _with_retries(url, attempt, retries, limits)
    except _NotFound:
        f.close()
        return None
    except BaseException:
        f.close()
        raise
    f.seek(0)
    return f


# -------------------------------------------------------------- checking --
def _check_file(path: Path, r: Remote) -> str | None:
    """Why the file at `path` is not a complete copy of `r` (None when it is)."""
    size = path.stat().st_size
    if r.size is not None and size != r.size:
        return f"{size} bytes, the manifest says {r.size}"
    with open(path, "rb") as f:
        if r.kind == "npy":
            try:
                shape, _, dtype = npy_header(f)
            except PickledNpy as e:
                return str(e)
            except (ValueError, EOFError) as e:
                return f"not a valid .npy file ({e})"
            want = f.tell() + int(np.prod(shape)) * np.dtype(dtype).itemsize
            if size != want:
                return f"{size} bytes, its .npy header promises {want}"
        else:
            if f.read(4) not in (b"II*\x00", b"MM\x00*", b"II+\x00", b"MM\x00+"):
                return "not a TIFF file"
    return None


def _sha256(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        while block := f.read(BLOCK):
            h.update(block)
    return h.hexdigest()


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _remove_stale_partials(dest: Path) -> None:
    for p in dest.parent.glob(dest.name + ".partial-*"):
        try:
            pid = int(p.name.rsplit("-", 2)[-2])
        except (ValueError, IndexError):
            pid = -1
        if pid != os.getpid() and not _pid_alive(pid):
            p.unlink(missing_ok=True)


def check_size(r: Remote, limits: Limits) -> None:
    """Refuse a file the manifest lists as larger than the limit, before any request."""
    if r.size is not None and r.size > limits.file_size:
        raise BuildError(f"the manifest lists {r.size} bytes, more than the limit of {limits.file_size} bytes "
                         f"({FLAGS['file_size']})", r.url)


def fetch_file(r: Remote, cache: Path, limits: Limits, retries: int = RETRIES) -> bool:
    """Make cache/r.rel a checked copy of r.url; returns True when it was downloaded (False: cached)."""
    dest = cache / r.rel
    if dest.exists() and _check_file(dest, r) is None and (not r.sha256 or _sha256(dest) == r.sha256.lower()):
        return False
    dest.parent.mkdir(parents=True, exist_ok=True)
    _remove_stale_partials(dest)
    tmp = dest.with_name(f"{dest.name}.partial-{os.getpid()}-{threading.get_ident()}")

    def attempt(end):
        try:
            with open(tmp, "wb") as f:
                _get(r.url, f.write, r.size, limits.file_size, FLAGS["file_size"], end, limits)
                f.flush()
                os.fsync(f.fileno())
            why = _check_file(tmp, r)
            if why is not None:
                raise _Retry(why)
            if r.sha256 and _sha256(tmp) != r.sha256.lower():
                raise _Retry("sha256 differs from the manifest")
            os.replace(tmp, dest)
        finally:
            tmp.unlink(missing_ok=True)

    try:
        _with_retries(r.url, attempt, retries, limits)
    except _NotFound as e:
        raise BuildError(f"not found on the mirror ({e})", r.url) from None
    return True


