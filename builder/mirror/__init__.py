"""Tiles from a TESSERA HTTP mirror: `python -m builder build --from URL --bbox W,S,E,N --year Y`.

fetch.py does HTTP and the checked cache, manifest.py decides which files a bbox needs, this
module makes the per-bbox view the build reads.

URL is the root of one model version on the mirror (the directory that holds the manifest).
Accepted layout (see docs/stores.md, "Building from a TESSERA HTTP mirror"):

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
bodies.  What a mirror may send is bounded (limits.py: file and manifest sizes, manifest rows, a
deadline per file, no redirect to another host), and a manifest path with '..' is refused.  Every
file is checked (size against the manifest and Content-Length, .npy header against the size, TIFF
header, sha256 when the manifest has one) and written to the cache as a temporary file renamed into place, so the cache only ever holds complete, checked files: a killed run
leaves at most `*.partial-<pid>` files, which the next run deletes and fetches again.  The
build then reads a per-bbox view of the cache (symlinks) through the ordinary local build path.
"""
from __future__ import annotations

import hashlib
import re
import sys
import time
import urllib.parse
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import TYPE_CHECKING

from builder.atomic import write_dir
from builder.errors import BuildError
from builder.mirror.limits import FLAGS, Limits  # the rest when used: `python -m builder` imports this package


SLUG_MAX = 120  # characters of a cache folder's name (NAME_MAX is 255 bytes)

if TYPE_CHECKING:
    from builder.sink import Sink


# ------------------------------------------------------------------ view --
def cache_dir_for(cache: Path, base: str) -> Path:
    """One cache subdirectory per mirror root path (e.g. `v1`), whatever the host and port: a mirror that
    moved, or another mirror of the same version, reuses it.  A cached file is reused only when it matches
    the manifest (size, .npy header, sha256 when listed; fetch.fetch_file), otherwise fetched again."""
    slug = re.sub(r"[^A-Za-z0-9._-]+", "_", urllib.parse.urlsplit(base).path)[:SLUG_MAX].strip("_.") or "mirror"
    return cache / slug  # never "." nor "..": no dot at either end


def make_view(cache: Path, bbox, tiles: list[tuple[int, str]]) -> Path:
    """A tile root holding exactly `tiles` (symlinks into the cache), stable per bbox."""
    from builder.tiles import EMBEDDINGS_DIR, LANDMASKS_DIR
    key = "_".join(f"{v:g}" for v in bbox) + "-" + hashlib.sha256(repr(sorted(tiles)).encode()).hexdigest()[:12]
    view = cache / "views" / key

    def fill(tmp: Path) -> None:
        for year, name in tiles:
            for rel in (f"{EMBEDDINGS_DIR}/{year}/{name}/{name}.npy",
                        f"{EMBEDDINGS_DIR}/{year}/{name}/{name}_scales.npy", f"{LANDMASKS_DIR}/{name}.tiff"):
                link = tmp / rel
                link.parent.mkdir(parents=True, exist_ok=True)
                if not link.exists():
                    link.symlink_to((cache / rel).resolve())
    write_dir(view, fill)  # whole or not at all: a build never reads a half-made view
    return view


def _refuse_inside_store(cache: Path) -> None:
    for p in [cache.resolve(), *cache.resolve().parents]:
        if p.suffix == ".zarr" or (p / "zarr.json").exists():
            raise BuildError("the tile cache may not be inside a Zarr store", str(cache))


def stored_tiles(records: dict[int, Sink]) -> dict[int, set[str]]:
    """The tiles each year's store already holds (from its build record, a builder.sink.Sink): the build must see
    them again, or shards they share with new tiles would be rewritten without them."""
    from builder.record import load_record
    return {year: {n for z in rec.zones.values() for n in z.tiles}
            for year, rec in ((y, load_record(sink)) for y, sink in records.items()) if rec.zones}


def prepare(base: str, bbox, years: list[int], cache: Path, jobs: int = 8, retries: int | None = None,
            quiet: bool = False, keep: dict[int, set[str]] | None = None, limits: Limits = Limits()) -> Path:
    """Fetch what the bbox needs into the cache; return a tile root for the local build."""
    from builder.mirror.fetch import RETRIES, fetch_file
    from builder.mirror.manifest import plan
    retries = RETRIES if retries is None else retries
    base = base.rstrip("/")
    if urllib.parse.urlsplit(base).scheme not in ("http", "https"):
        raise BuildError("--from takes an http(s):// URL of a mirror", base)
    cache = Path(cache)
    _refuse_inside_store(cache)
    root = cache_dir_for(cache, base)
    root.mkdir(parents=True, exist_ok=True)
    t0 = time.time()
    remotes, tiles = plan(base, bbox, years, limits, root, retries, keep)
    with ThreadPoolExecutor(max_workers=max(1, jobs)) as pool:
        futures = [pool.submit(fetch_file, r, root, limits, retries) for r in remotes]
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


def tiles_from_args(a, default_cache: Path, records: dict) -> str:
    """cli glue: the tile root for `build`, from TILES or from --from/--bbox/--cache; `records`: the build record
    (a builder.sink.Sink) of each year's store."""
    given = {name: getattr(a, name) for name in FLAGS}  # the mirror's limits, as the flags gave them
    if a.mirror is None:
        if a.tiles is None:
            raise BuildError("build needs TILES or --from URL --bbox W,S,E,N")
        if a.bbox or a.cache or any(given.values()):
            raise BuildError(f"--bbox, --cache, {', '.join(FLAGS.values())} go with --from URL")
        return a.tiles
    from builder.mirror.manifest import parse_bbox
    if a.tiles is not None:
        raise BuildError("give either TILES or --from URL, not both")
    if not a.bbox:
        raise BuildError("--from needs --bbox W,S,E,N")
    cache = Path(a.cache) if a.cache else default_cache / "mirror"
    return str(prepare(a.mirror, parse_bbox(a.bbox), list(a.year), cache, jobs=a.jobs, quiet=a.quiet,
                       keep=stored_tiles(records), limits=Limits.resolve(given)))
