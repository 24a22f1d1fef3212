"""Tiles from a TESSERA HTTP mirror: `python -m builder build --from URL --bbox W,S,E,N --year Y`.

URL is the root of one model version on the mirror (the directory that holds the manifest).
Accepted layout (see README, "Building from a mirror"):

    URL/manifest.parquet     one row per (year, tile): year, lon, lat (the 0.1 degree cell centre),
                             grid_path, scales_path (relative to URL, a URL below it, or a server path
                             containing global_0.1_degree_representation/), grid_size, scales_size;
                             optional grid_sha256/scales_sha256, landmask_path, landmask_size
    URL/registry.parquet     used when there is no manifest.parquet: year, lon, lat, file_size,
                             scales_size, optional hash/scales_hash (sha256); files at their
                             canonical paths
    URL/landmasks.parquet    optional: lon, lat, file_size, optional hash (sha256)
    URL/global_0.1_degree_representation/{year}/grid_{lon}_{lat}/grid_{lon}_{lat}{,_scales}.npy
    URL/global_0.1_degree_tiff_all/grid_{lon}_{lat}.tiff

Only tiles whose 0.1 degree cell meets the bbox are fetched, by a bounded pool of threads, each
request retried with exponential backoff on dropped connections, timeouts, 5xx/429 and short
bodies.  Every file is checked (size against the manifest and Content-Length, .npy header against
the size, TIFF header, sha256 when the manifest has one) and written to the cache as a temporary
file renamed into place, so the cache only ever holds complete, checked files: a killed run
leaves at most `*.partial-<pid>` files, which the next run deletes and fetches again.  The
build then reads a per-bbox view of the cache (symlinks) through the ordinary local build path.
"""
from __future__ import annotations

import hashlib
import http.client
import io
import json
import os
import re
import shutil
import socket
import sys
import threading
import time
import urllib.error
import urllib.parse
import urllib.request
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

import numpy as np
from numpy.lib import format as npy_format

from builder.errors import BuildError
from builder.tiles import EMBEDDINGS_DIR, LANDMASKS_DIR, TILE_DEG, grid_name

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


def parse_bbox(s: str) -> tuple[float, float, float, float]:
    try:
        w, so, e, n = (float(v) for v in s.split(","))
    except ValueError:
        raise BuildError(f"--bbox {s!r}: expected four numbers W,S,E,N (degrees)") from None
    if not all(np.isfinite([w, so, e, n])) or not (-180 <= w <= e <= 180 and -90 <= so <= n <= 90):
        raise BuildError(f"--bbox {s!r}: need -180 <= W <= E <= 180 and -90 <= S <= N <= 90")
    return w, so, e, n


def cell_meets_bbox(lon: float, lat: float, bbox) -> bool:
    """Does the 0.1 degree cell centred at (lon, lat) share area with the bbox (or contain a point bbox)?"""
    w, s, e, n = bbox
    h = TILE_DEG / 2
    cw, ce, cs, cn = lon - h, lon + h, lat - h, lat + h
    ok_x = (cw <= e and w <= ce) if w == e else (cw < e and w < ce)
    ok_y = (cs <= n and s <= cn) if s == n else (cs < n and s < cn)
    return ok_x and ok_y


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
                version = npy_format.read_magic(f)
                read = npy_format.read_array_header_1_0 if version == (1, 0) else npy_format.read_array_header_2_0
                shape, _, dtype = read(f)
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
    if dest.exists() and _check_file(dest, r) is None:
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


# -------------------------------------------------------------- manifest --
def _table(data: bytes, url: str):
    import pyarrow.parquet as pq
    try:
        return pq.read_table(io.BytesIO(data)).to_pandas()
    except Exception as e:
        raise BuildError(f"not a readable Parquet file ({e})", url) from None


def _require(df, cols: set[str], url: str) -> None:
    missing = sorted(cols - set(df.columns))
    if missing:
        raise BuildError(f"missing column(s) {', '.join(missing)}", url)


def _rel(path: str, base: str, url: str) -> str:
    """A manifest path as a path relative to the mirror root."""
    p = str(path)
    if p.startswith(base + "/"):
        return p[len(base) + 1:]
    for anchor in (EMBEDDINGS_DIR + "/", LANDMASKS_DIR + "/"):
        i = p.find(anchor)
        if i >= 0 and (i == 0 or p[i - 1] == "/"):
            return p[i:]
    if "://" in p or p.startswith("/") or ".." in p.split("/"):
        raise BuildError(f"path {p!r} is outside the mirror layout", url)
    return p


def _opt(row, col):
    v = row.get(col)
    if v is None or (isinstance(v, float) and np.isnan(v)):
        return None
    return v


def _lonlat(name: str) -> tuple[float, float]:
    lon, lat = name.split("_")[1:]
    return float(lon), float(lat)


def plan(base: str, bbox, years: list[int], retries: int = RETRIES,
         keep: dict[int, set[str]] | None = None) -> tuple[list[Remote], list[tuple[int, str]]]:
    """The files to fetch for the tiles of `years` meeting `bbox` (plus the tiles `keep[year]` names:
    those already in the year's store), and the (year, name) tiles."""
    keep = keep or {}
    murl = f"{base}/{MANIFEST}"
    data = fetch_bytes(murl, retries, missing_ok=True)
    if data is None:
        rurl = f"{base}/{REGISTRY}"
        data = fetch_bytes(rurl, retries, missing_ok=True)
        if data is None:
            raise BuildError(f"no {MANIFEST} (nor {REGISTRY}) on the mirror", murl)
        df, murl = _table(data, rurl), rurl
        _require(df, {"year", "lon", "lat", "file_size", "scales_size"}, murl)
        df = df.rename(columns={"file_size": "grid_size", "hash": "grid_sha256", "scales_hash": "scales_sha256"})
    else:
        df = _table(data, murl)
        _require(df, {"year", "lon", "lat", "grid_path", "scales_path", "grid_size", "scales_size"}, murl)
    lm = fetch_bytes(f"{base}/{LANDMASKS}", retries, missing_ok=True)
    lm_info: dict[str, tuple[int | None, str | None]] = {}
    if lm is not None:
        ldf = _table(lm, f"{base}/{LANDMASKS}")
        _require(ldf, {"lon", "lat", "file_size"}, f"{base}/{LANDMASKS}")
        for row in ldf.to_dict("records"):
            lm_info[grid_name(float(row["lon"]), float(row["lat"]))] = (int(row["file_size"]), _opt(row, "hash"))

    remotes: dict[str, Remote] = {}
    tiles: list[tuple[int, str]] = []
    for row in df.to_dict("records"):
        year, lon, lat = int(row["year"]), float(row["lon"]), float(row["lat"])
        name = grid_name(lon, lat)
        if year not in years or not (cell_meets_bbox(lon, lat, bbox) or name in keep.get(year, ())):
            continue
        tdir = f"{EMBEDDINGS_DIR}/{year}/{name}"
        files = [(f"{tdir}/{name}.npy", "grid"), (f"{tdir}/{name}_scales.npy", "scales")]
        for rel, key in files:
            src = _rel(row[f"{key}_path"], base, murl) if f"{key}_path" in row else rel
            size = _opt(row, f"{key}_size")
            remotes[rel] = Remote(f"{base}/{src}", rel, None if size is None else int(size),
                                  _opt(row, f"{key}_sha256"), "npy")
        lrel = f"{LANDMASKS_DIR}/{name}.tiff"
        lsrc = _rel(row["landmask_path"], base, murl) if _opt(row, "landmask_path") else lrel
        lsize, lsha = lm_info.get(name, (_opt(row, "landmask_size"), None))
        remotes[lrel] = Remote(f"{base}/{lsrc}", lrel, None if lsize is None else int(lsize), lsha, "tiff")
        tiles.append((year, name))
    for y in years:
        gone = sorted(keep.get(y, set()) - {n for yy, n in tiles if yy == y})
        if gone:
            raise BuildError(f"the {y} store holds {len(gone)} tile(s) the manifest does not list ({gone[0]}, ...); "
                             "build into a new store", murl)
    in_bbox = [t for t in tiles if cell_meets_bbox(*_lonlat(t[1]), bbox)]
    if not in_bbox:
        raise BuildError(f"no tiles for year(s) {', '.join(map(str, years))} meet bbox "
                         f"{','.join(f'{v:g}' for v in bbox)}", murl)
    return sorted(remotes.values(), key=lambda r: r.rel), sorted(set(tiles))


# ------------------------------------------------------------------ view --
def cache_dir_for(cache: Path, base: str) -> Path:
    """One cache subdirectory per mirror root URL."""
    u = urllib.parse.urlsplit(base)
    slug = re.sub(r"[^A-Za-z0-9._-]+", "_", f"{u.netloc}{u.path}").strip("_") or "mirror"
    return cache / slug


def make_view(cache: Path, bbox, tiles: list[tuple[int, str]]) -> Path:
    """A tile root holding exactly `tiles` (symlinks into the cache), stable per bbox."""
    key = "_".join(f"{v:g}" for v in bbox) + "-" + hashlib.sha256(repr(sorted(tiles)).encode()).hexdigest()[:12]
    view = cache / "views" / key
    tmp = cache / "views" / f".{key}.partial-{os.getpid()}"
    shutil.rmtree(tmp, ignore_errors=True)
    for year, name in tiles:
        for rel in (f"{EMBEDDINGS_DIR}/{year}/{name}/{name}.npy", f"{EMBEDDINGS_DIR}/{year}/{name}/{name}_scales.npy",
                    f"{LANDMASKS_DIR}/{name}.tiff"):
            link = tmp / rel
            link.parent.mkdir(parents=True, exist_ok=True)
            if not link.exists():
                link.symlink_to((cache / rel).resolve())
    old = cache / "views" / f".{key}.old-{os.getpid()}"
    if view.exists():
        os.replace(view, old)
    os.replace(tmp, view)
    shutil.rmtree(old, ignore_errors=True)
    return view


def _refuse_inside_store(cache: Path) -> None:
    for p in [cache.resolve(), *cache.resolve().parents]:
        if p.suffix == ".zarr" or (p / "zarr.json").exists():
            raise BuildError("the tile cache may not be inside a Zarr store", str(cache))


def stored_tiles(record_dirs: dict[int, Path]) -> dict[int, set[str]]:
    """The tiles each year's store already holds (from its build record): the build must see them again,
    or shards they share with new tiles would be rewritten without them."""
    out: dict[int, set[str]] = {}
    for year, d in record_dirs.items():
        p = Path(d) / "record.json"
        if p.exists():
            rec = json.loads(p.read_text())
            out[year] = {n for z in rec.get("zones", {}).values() for n in z.get("tiles", {})}
    return out


def prepare(base: str, bbox, years: list[int], cache: Path, jobs: int = 8, retries: int = RETRIES,
            quiet: bool = False, keep: dict[int, set[str]] | None = None) -> Path:
    """Fetch what the bbox needs into the cache; return a tile root for the local build."""
    base = base.rstrip("/")
    if urllib.parse.urlsplit(base).scheme not in ("http", "https"):
        raise BuildError("--from takes an http(s):// URL of a mirror", base)
    cache = Path(cache)
    _refuse_inside_store(cache)
    root = cache_dir_for(cache, base)
    t0 = time.time()
    remotes, tiles = plan(base, bbox, years, retries, keep)
    with ThreadPoolExecutor(max_workers=max(1, jobs)) as pool:
        futures = [pool.submit(fetch_file, r, root, retries) for r in remotes]
        done, err = [], None
        for f in futures:
            try:
                done.append(f.result())
            except BuildError as e:  # the first failure is reported; the others are let finish
                err = err or e
        if err:
            raise err
    fetched = sum(done)
    if not quiet:
        print(f"{base}: {len(tiles)} tiles meet the bbox; {fetched} files fetched, "
              f"{len(remotes) - fetched} from the cache {root} in {time.time() - t0:.1f}s", file=sys.stderr)
    return make_view(root, bbox, tiles)


def tiles_from_args(a, default_cache: Path) -> str:
    """cli glue: the tile root for `build`, from TILES or from --from/--bbox/--cache."""
    if a.mirror is None:
        if a.tiles is None:
            raise BuildError("build needs TILES or --from URL --bbox W,S,E,N")
        if a.bbox or a.cache:
            raise BuildError("--bbox and --cache go with --from URL")
        return a.tiles
    if a.tiles is not None:
        raise BuildError("give either TILES or --from URL, not both")
    if not a.bbox:
        raise BuildError("--from needs --bbox W,S,E,N")
    cache = Path(a.cache) if a.cache else default_cache / "mirror"
    records = {}
    for y in a.year:  # the record dirs cmd_build will use
        store = Path(a.store) if a.store else Path(a.out) / f"{y}.zarr"
        records[y] = Path(a.record) / str(y) if a.record else Path(str(store) + ".build")
    return str(prepare(a.mirror, parse_bbox(a.bbox), list(a.year), cache, jobs=a.jobs, quiet=a.quiet,
                       keep=stored_tiles(records)))
