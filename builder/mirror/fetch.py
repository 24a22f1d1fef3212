"""HTTP fetching with retries into the tile cache: each file checked, then renamed into place."""
from __future__ import annotations

import hashlib
import http.client
import io
import os
import socket
import threading
import time
import urllib.error
import urllib.parse
import urllib.request
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from builder.errors import BuildError
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


@dataclass(frozen=True)
class Remote:
    url: str
    rel: str  # canonical path below the cache root
    size: int | None
    sha256: str | None
    kind: str  # "npy" or "tiff"


# ------------------------------------------------------------------ HTTP --
def _get(url: str, sink, expected: int | None) -> int:
    """One GET streamed into `sink`; returns the byte count.  Raises _Retry, _NotFound or BuildError."""
    req = urllib.request.Request(url, headers={"User-Agent": USER_AGENT, "Accept-Encoding": "identity"})
    try:
        with urllib.request.urlopen(req, timeout=TIMEOUT) as r:
            length = r.headers.get("Content-Length")
            if length is not None and expected is not None and int(length) != expected:
                raise BuildError(f"server announces {length} bytes, the manifest says {expected}", url)
            n = 0
            while True:
                block = r.read(BLOCK)
                if not block:
                    break
                sink(block)
                n += len(block)
            if length is not None and n != int(length):
                raise _Retry(f"short body: {n} of {length} bytes")
            return n
    except urllib.error.HTTPError as e:
        if e.code in (404, 410):
            raise _NotFound(f"HTTP {e.code}") from None
        if e.code >= 500 or e.code in (408, 429):
            raise _Retry(f"HTTP {e.code}") from None
        raise BuildError(f"HTTP {e.code} {e.reason}", url) from None
    except urllib.error.URLError as e:
        raise _Retry(f"{e.reason}") from None
    except (http.client.HTTPException, ConnectionError, socket.timeout, TimeoutError, OSError) as e:
        raise _Retry(f"{type(e).__name__}: {e}" if str(e) else type(e).__name__) from None


def _with_retries(url: str, attempt_fn, retries: int):
    last = ""
    for k in range(retries):
        try:
            return attempt_fn()
        except _Retry as e:
            last = str(e)
            if k + 1 < retries:
                time.sleep(min(BACKOFF * 2 ** k, BACKOFF_MAX))
    raise BuildError(f"failed after {retries} attempts (last: {last})", url)


def fetch_bytes(url: str, retries: int = RETRIES, missing_ok: bool = False) -> bytes | None:
    def attempt():
        buf = io.BytesIO()
        _get(url, buf.write, None)
        return buf.getvalue()
    try:
        return _with_retries(url, attempt, retries)
    except _NotFound as e:
        if missing_ok:
            return None
        raise BuildError(f"not found on the mirror ({e})", url) from None


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


def fetch_file(r: Remote, cache: Path, retries: int = RETRIES) -> bool:
    """Make cache/r.rel a checked copy of r.url; returns True when it was downloaded (False: cached)."""
    dest = cache / r.rel
    if dest.exists() and _check_file(dest, r) is None and (not r.sha256 or _sha256(dest) == r.sha256.lower()):
        return False
    dest.parent.mkdir(parents=True, exist_ok=True)
    _remove_stale_partials(dest)
    tmp = dest.with_name(f"{dest.name}.partial-{os.getpid()}-{threading.get_ident()}")

    def attempt():
        try:
            with open(tmp, "wb") as f:
                _get(r.url, f.write, r.size)
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
        _with_retries(r.url, attempt, retries)
    except _NotFound as e:
        raise BuildError(f"not found on the mirror ({e})", r.url) from None
    return True


