"""Where a build writes: one small interface over a local directory or an object store, so that every write of
the build (shards, metadata, the build record, its journals, the lock) goes through the same few calls.

A `Sink` is a root (a directory, or a prefix of an object store) and keys below it ("utm30/embeddings/c/0/0/0");
`sink / "utm30"` is the sink of a sub-prefix.  Its calls:

  write(key, data)   the whole object or nothing: a local file is written to a temporary file and renamed into
                     place (builder/atomic.py); an object is one PUT (write_many: several, concurrently)
  get(key)           its bytes, or None when there is no such key (get_many: several, concurrently)
  delete(key)        gone (no error when it was not there); delete_all(prefix) removes everything below prefix
  keys(prefix)       every key below prefix, relative to this sink (a local write's temporary file excluded)
  move(key, dst, k)  the object at key becomes dst's k: a rename on a local disk, a copy then a delete on an
                     object store (idempotent either way: a killed move is finished by moving again)
  zarr_store()       the zarr-python store at this root (for groups, array metadata and consolidation)
  lock(name, ...)    the exclusive lock of a command writing here (builder/lock.py): flock on a local file, an
                     object created only if absent (a conditional PUT) holding a lease on an object store

Object stores have no rename and no append, so the build keeps to what both kinds do alike: every shard and
every journal entry is one object, a document is rewritten whole, and the store's root zarr.json (with the
consolidated metadata) is written last.

An object store is named by URL, s3:// first.  Its endpoint and credentials come from the standard AWS
environment variables of the process that opens it (AWS_ENDPOINT_URL, AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY,
AWS_REGION or AWS_DEFAULT_REGION), never from the task that uses it: a sink sent to a Dask worker travels as its
URL, and the worker opens it with its own environment.  Listings are never cached (other processes write too).
"""
from __future__ import annotations

import os
import shutil
from abc import ABC, abstractmethod
from pathlib import Path

from builder.atomic import PARTIAL, write_bytes
from builder.errors import BuildError


def is_url(where: str | Path) -> bool:
    return isinstance(where, str) and "://" in where and not where.startswith("file://")


def open_sink(where: str | Path) -> "Sink":
    """The sink at a local path (or file:// URL) or an object store URL (s3://bucket/prefix)."""
    if isinstance(where, Sink):
        return where
    if is_url(where):
        return ObjectSink(str(where))
    return LocalSink(Path(str(where).removeprefix("file://")))


def as_sink(where) -> "Sink":
    """A Sink given as itself or as a local path (what the tests and benchmarks pass)."""
    return where if isinstance(where, Sink) else LocalSink(Path(where))


def join(*parts: str) -> str:
    return "/".join(p.strip("/") for p in parts if p and p.strip("/"))


class Sink(ABC):
    url: str  # the root, as a path or URL (for messages)

    def __str__(self) -> str:
        return self.url

    def __eq__(self, other) -> bool:
        return type(other) is type(self) and other.url == self.url

    def __hash__(self) -> int:
        return hash((type(self), self.url))

    @abstractmethod
    def __truediv__(self, sub: str) -> "Sink": ...

    @abstractmethod
    def write(self, key: str, data: bytes) -> None: ...

    def write_many(self, docs: dict[str, bytes]) -> None:
        """Write several objects (each whole; an object store sends them concurrently)."""
        for key, data in docs.items():
            self.write(key, data)

    @abstractmethod
    def get(self, key: str) -> bytes | None: ...

    def get_many(self, keys: list[str]) -> dict[str, bytes]:
        """The objects of `keys` that exist, by key (an object store fetches them concurrently)."""
        return {k: v for k in keys if (v := self.get(k)) is not None}

    def exists(self, key: str) -> bool:
        return self.get(key) is not None

    @abstractmethod
    def delete(self, key: str) -> None: ...

    @abstractmethod
    def delete_all(self, prefix: str = "") -> None: ...

    @abstractmethod
    def keys(self, prefix: str = "") -> list[str]: ...

    @abstractmethod
    def is_empty(self) -> bool: ...

    @abstractmethod
    def children(self) -> list[str]:
        """The names of the prefixes (directories) directly below the root."""

    @abstractmethod
    def move(self, key: str, dst: "Sink", dst_key: str) -> None: ...

    @abstractmethod
    def zarr_store(self): ...

    @abstractmethod
    def lock(self, name: str, target: str, what: str, cannot: str): ...

    def prepare(self) -> None:
        """Make sure a build can write here (before its first write); BuildError naming the root if not."""

    def clean_partials(self) -> int:
        """Remove the temporary files of writes a killed process left (an object store has none)."""
        return 0


class LocalSink(Sink):
    """A local directory: builder/atomic.py's whole-or-nothing files, flock locks, zarr's LocalStore."""

    def __init__(self, root: Path):
        self.root = Path(root)
        self.url = str(self.root)

    def __repr__(self) -> str:
        return f"LocalSink({self.url!r})"

    def __truediv__(self, sub: str) -> "LocalSink":
        return LocalSink(self.root / sub)

    def path(self, key: str) -> Path:
        return self.root / key

    def write(self, key: str, data: bytes) -> None:
        write_bytes(self.root / key, data)

    def get(self, key: str) -> bytes | None:
        try:
            return (self.root / key).read_bytes()
        except (FileNotFoundError, NotADirectoryError, IsADirectoryError):
            return None

    def exists(self, key: str) -> bool:
        return (self.root / key).is_file()

    def delete(self, key: str) -> None:
        (self.root / key).unlink(missing_ok=True)

    def delete_all(self, prefix: str = "") -> None:
        shutil.rmtree(self.root / prefix, ignore_errors=True)

    def keys(self, prefix: str = "") -> list[str]:
        base = self.root / prefix
        out = []
        for folder, _, files in os.walk(base):
            rel = Path(folder).relative_to(self.root).as_posix()
            out += [name if rel == "." else f"{rel}/{name}" for name in files if PARTIAL not in name]
        return sorted(out)

    def is_empty(self) -> bool:
        return not self.root.exists() or not any(self.root.iterdir())

    def children(self) -> list[str]:
        return sorted(p.name for p in self.root.iterdir() if p.is_dir()) if self.root.is_dir() else []

    def move(self, key: str, dst: Sink, dst_key: str) -> None:
        if isinstance(dst, LocalSink):
            target = dst.root / dst_key
            target.parent.mkdir(parents=True, exist_ok=True)
            os.replace(self.root / key, target)
        else:
            _copy_then_delete(self, key, dst, dst_key)

    def zarr_store(self):
        import zarr
        return zarr.storage.LocalStore(self.root)

    def lock(self, name: str, target: str, what: str, cannot: str):
        from builder.lock import FileLock
        return FileLock(self.root / name, target, what, cannot)

    def prepare(self) -> None:
        try:
            self.root.mkdir(parents=True, exist_ok=True)
        except OSError as e:
            raise BuildError(f"cannot create the store ({e.strerror})", self.url) from None
        if not os.access(self.root, os.W_OK):
            raise BuildError("target is not writable", self.url)

    def clean_partials(self) -> int:
        n = 0
        for p in self.root.rglob(f"*{PARTIAL}"):
            p.unlink(missing_ok=True)
            n += 1
        return n


def _copy_then_delete(src: Sink, key: str, dst: Sink, dst_key: str) -> None:
    data = src.get(key)
    if data is not None:
        dst.write(dst_key, data)
        src.delete(key)


def object_options(url: str) -> dict:
    """fsspec options of an object store URL from the standard environment variables (s3: the endpoint and the
    region; s3fs's botocore reads the credentials itself).  Listings are never cached."""
    opts: dict = {"use_listings_cache": False}
    if url.startswith(("s3://", "s3a://")):
        client: dict = {}
        if os.environ.get("AWS_ENDPOINT_URL"):
            client["endpoint_url"] = os.environ["AWS_ENDPOINT_URL"]
        region = os.environ.get("AWS_REGION") or os.environ.get("AWS_DEFAULT_REGION")
        if region:
            client["region_name"] = region
        if client:
            opts["client_kwargs"] = client
    return opts


class ObjectSink(Sink):
    """A prefix of an object store through fsspec (s3fs for s3://).  Travels to other processes as its URL; each
    process opens the store with its own environment (`object_options`)."""

    def __init__(self, url: str, _fs=None):
        self.url = url.rstrip("/")
        self._fs = _fs

    def __repr__(self) -> str:
        return f"ObjectSink({self.url!r})"

    def __getstate__(self) -> dict:
        return {"url": self.url}

    def __setstate__(self, state: dict) -> None:
        self.url, self._fs = state["url"], None

    @property
    def fs(self):
        if self._fs is None:
            import fsspec
            self._fs, _ = fsspec.url_to_fs(self.url, **object_options(self.url))
        return self._fs

    @property
    def root(self) -> str:
        """The root as the file system's path (bucket/prefix)."""
        return self.url.split("://", 1)[1]

    def _path(self, key: str) -> str:
        return f"{self.root}/{key}" if key else self.root

    def _failed(self, key: str, what: str, e: Exception) -> BuildError:
        return BuildError(f"cannot {what} ({type(e).__name__}: {str(e)[:200]})", join(self.url, key) if key else self.url)

    def __truediv__(self, sub: str) -> "ObjectSink":
        return ObjectSink(f"{self.url}/{sub.strip('/')}", self._fs)

    def write(self, key: str, data: bytes) -> None:
        try:
            self.fs.pipe_file(self._path(key), data)
        except OSError as e:
            raise self._failed(key, "write", e) from None

    def write_many(self, docs: dict[str, bytes]) -> None:
        try:
            self.fs.pipe({self._path(k): v for k, v in docs.items()})
        except OSError as e:
            raise self._failed("", "write", e) from None

    def get(self, key: str) -> bytes | None:
        try:
            return self.fs.cat_file(self._path(key))
        except FileNotFoundError:
            return None
        except OSError as e:
            raise self._failed(key, "read", e) from None

    def get_many(self, keys: list[str]) -> dict[str, bytes]:
        if not keys:
            return {}
        paths = {self._path(k): k for k in keys}
        try:
            found = self.fs.cat(list(paths), on_error="omit")
        except OSError as e:
            raise self._failed("", "read", e) from None
        return {paths[p]: v for p, v in found.items() if p in paths}

    def delete(self, key: str) -> None:
        try:
            self.fs.rm_file(self._path(key))
        except FileNotFoundError:
            pass
        except OSError as e:
            raise self._failed(key, "delete", e) from None

    def delete_all(self, prefix: str = "") -> None:
        found = self.keys(prefix)
        if found:
            try:
                self.fs.rm([self._path(k) for k in found])
            except FileNotFoundError:
                pass
            except OSError as e:
                raise self._failed(prefix, "delete", e) from None

    def keys(self, prefix: str = "") -> list[str]:
        base = self._path(prefix).rstrip("/")
        try:
            found = self.fs.find(base)
        except FileNotFoundError:
            return []
        except OSError as e:
            raise self._failed(prefix, "list", e) from None
        root = self.root + "/"
        # find() of a key that is itself an object lists that object: only keys below the prefix count
        return sorted(p[len(root):] for p in found if p.startswith(base + "/"))

    def is_empty(self) -> bool:
        try:
            return not self.fs.ls(self.root, detail=False)
        except FileNotFoundError:
            return True
        except OSError as e:
            raise self._failed("", "list", e) from None

    def children(self) -> list[str]:
        try:
            found = self.fs.ls(self.root, detail=True)
        except FileNotFoundError:
            return []
        except OSError as e:
            raise self._failed("", "list", e) from None
        return sorted(d["name"].rstrip("/").rsplit("/", 1)[-1] for d in found if d["type"] == "directory")

    def move(self, key: str, dst: Sink, dst_key: str) -> None:
        if isinstance(dst, ObjectSink) and dst.url.split("://")[0] == self.url.split("://")[0]:
            try:
                self.fs.copy(self._path(key), dst._path(dst_key))
            except FileNotFoundError:
                return  # moved already (a killed move's copy and delete both done)
            except OSError as e:
                raise self._failed(key, "copy", e) from None
            self.delete(key)
        else:
            _copy_then_delete(self, key, dst, dst_key)

    def zarr_store(self):
        import zarr
        return zarr.storage.FsspecStore.from_url(self.url, storage_options=object_options(self.url))

    def lock(self, name: str, target: str, what: str, cannot: str):
        from builder.lock import ObjectLock
        return ObjectLock(self.fs, self._path(name), target, what, cannot)

    def prepare(self) -> None:
        bucket = self.root.split("/", 1)[0]
        try:
            if not self.fs.exists(bucket):
                raise BuildError(f"no such bucket {bucket!r}", self.url)
        except OSError as e:
            raise self._failed("", "reach the object store", e) from None
