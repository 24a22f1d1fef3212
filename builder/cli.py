"""`python -m builder`: the command line.  This module only parses arguments; builder/commands.py runs them."""
from __future__ import annotations

import argparse
import contextlib
import os
import sys
import warnings

from builder.core import codes
from builder.core import convention as conv
from builder.commands import (DEFAULT_CACHE, DEFAULT_STATIC, cmd_build, cmd_catalog, cmd_demo, cmd_index, cmd_publish,
                               cmd_sample, cmd_serve, cmd_site, cmd_up, cmd_validate)
from builder.errors import BuildError
from builder.mirror import limits as mirror_limits


def _sched(p: argparse.ArgumentParser) -> None:
    p.add_argument("--scheduler", default="local",
                   help="local (worker processes on this machine, default), threads, sync, "
                        "or a Dask scheduler address tcp://host:port")
    p.add_argument("--workers", type=int, default=None,
                   help="worker processes or threads (default: one per CPU this build may use)")
    p.add_argument("-q", "--quiet", action="store_true", help="no progress bars")


def _layout(p: argparse.ArgumentParser) -> None:
    p.add_argument("--shard", type=int, default=conv.SHARD, help="shard edge in pixels (default 256)")
    p.add_argument("--chunk", type=int, default=conv.CHUNK, help="inner chunk edge in pixels (default 4)")
    p.add_argument("--cname", default="zstd", help="Blosc compressor (default zstd)")
    p.add_argument("--clevel", type=int, default=3, help="Blosc level (default 3)")
    p.add_argument("--global-res", type=float, default=conv.GLOBAL_RES0,
                   help="global_rgb level-0 resolution in degrees (default 0.0001)")


def _demo_data(p: argparse.ArgumentParser) -> None:
    p.add_argument("--no-dense", action="store_true",
                   help="leave out the dense site (three whole 0.1 degree tiles; the small tiles only)")
    p.add_argument("--easy", action="store_true",
                   help="the earlier, nearly low-rank generator with cleanly separable classes (not like real data)")


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python -m builder",
                                description="Build, validate and publish TESSERA (tessera: v1) Zarr stores and the explorer site.")
    sub = p.add_subparsers(dest="cmd", required=True, metavar="COMMAND")

    b = sub.add_parser("build", help="build year stores from a directory of TESSERA tiles (geotessera layout)")
    b.add_argument("tiles", nargs="?", help="tile root (local dir or fsspec URL) holding global_0.1_degree_representation/ "
                                 "and global_0.1_degree_tiff_all/")
    b.add_argument("--year", type=int, action="append", required=True, help="year to build (repeatable)")
    b.add_argument("--from", dest="mirror", metavar="URL", help="instead of TILES: fetch from a TESSERA HTTP mirror "
                   "(the version root holding manifest.parquet) the tiles meeting --bbox, into --cache")
    b.add_argument("--from-store", metavar="URL", help="instead of TILES: re-lay --bbox of a store the reader opens "
                   "(geoemb:, the dClimate plain copy, tessera: v1; path or fsspec URL) as tiles in --cache")
    b.add_argument("--bbox", help="W,S,E,N in degrees (with --from or --from-store)")
    b.add_argument("--cache", help="tile cache for --from (default .cache/mirror) or --from-store (default "
                                   ".cache/relay); never inside a store")
    b.add_argument("--jobs", type=int, default=8, help="parallel downloads with --from (default 8)")
    mirror_limits.add_arguments(b)
    g = b.add_mutually_exclusive_group(required=True)
    g.add_argument("--out", help="directory receiving one {year}.zarr per year (and catalog.json)")
    g.add_argument("--store", help="path of the single year store to build or extend")
    b.add_argument("--model-version", default="1.0", help="tessera:model_version of the tiles (default 1.0)")
    b.add_argument("--record", help="directory for build records (default: <store>.build)")
    b.add_argument("--no-rgb", action="store_true", help="do not compute the rgb preview (nor global_rgb)")
    b.add_argument("--no-global", action="store_true", help="do not update the global_rgb pyramid")
    b.add_argument("--no-overviews", action="store_true",
                   help="no embedding overviews (tessera-ovr:); refused for a store that has them")
    b.add_argument("--code", choices=list(codes.BY_NAME), default=codes.PCACode.name,
                   help="the overviews' compact code: 'pca' (default; D int8 PCA coordinates) or 'pq' (product "
                        "quantisation, M bytes; a codebook in the store); fixed per store")
    b.add_argument("--code-dims", type=int, default=8,
                   help="the compact code's dimensions: PCA's D, PQ's M bytes, dividing the bands (default 8; "
                        "fixed per store)")
    b.add_argument("--overlap", choices=["last", "error"], default="last",
                   help="overlapping tiles: 'last' (default) lets the later tile (by name) win where it has data; "
                        "'error' refuses them")
    _layout(b)
    _sched(b)
    b.set_defaults(fn=cmd_build)

    d = sub.add_parser("demo", help="write deterministic synthetic tiles and build demo stores from them")
    d.add_argument("--tiles", default=str(DEFAULT_CACHE / "demo-tiles"), help="where to write the synthetic tiles")
    d.add_argument("--out", default=str(DEFAULT_STATIC / "data"), help="directory for the year stores")
    d.add_argument("--record", default=str(DEFAULT_CACHE / "demo-build"), help="build records directory")
    d.add_argument("--px", type=int, default=384, help="tile edge in pixels (default 384)")
    d.add_argument("--years", type=int, nargs="+", default=[2023, 2024])
    _demo_data(d)
    _layout(d)
    _sched(d)
    d.set_defaults(fn=cmd_demo)

    v = sub.add_parser("validate", help="check a store against the tessera: convention; exit 1 on any violation")
    v.add_argument("store", help="store path or fsspec URL")
    v.add_argument("-o", "--option", action="append", default=[], help="fsspec storage option key=value")
    v.add_argument("--deep", action="store_true",
                   help="also read every chunk of the zone arrays: verify each inner chunk's crc32c and decode it")
    v.set_defaults(fn=cmd_validate)

    pb = sub.add_parser("publish", help="validate and mirror stores to a directory or fsspec URL (s3://...)")
    pb.add_argument("src", help="a store, or a directory containing stores (e.g. static/data)")
    pb.add_argument("dest", help="destination directory or URL, made a mirror of src: files src does not publish "
                                 "are deleted there (dotfiles excepted); it may not overlap src")
    pb.add_argument("-o", "--option", action="append", default=[],
                    help="fsspec storage option key=value (endpoint_url=... for S3-compatible servers)")
    pb.add_argument("-q", "--quiet", action="store_true")
    pb.add_argument("--force", action="store_true",
                    help="publish into a destination that holds files but was not written by publish (no "
                         ".tessera-publish.json): they are replaced or deleted")
    pb.set_defaults(fn=cmd_publish)

    c = sub.add_parser("catalog", help="write catalog.json listing the year stores of a directory")
    c.add_argument("dir")
    c.set_defaults(fn=cmd_catalog)

    s = sub.add_parser("site", help="assemble the self-hosted browser app in static/ (Pyodide, wheels, JS)")
    s.add_argument("--out", default=str(DEFAULT_STATIC))
    s.add_argument("--cache", default=str(DEFAULT_CACHE), help="download cache (npm and PyPI files)")
    s.add_argument("-q", "--quiet", action="store_true")
    s.set_defaults(fn=cmd_site)

    sv = sub.add_parser("serve", help="serve the site on 127.0.0.1 with HTTP Range support")
    sv.add_argument("--root", default=str(DEFAULT_STATIC))
    sv.add_argument("--host", default="127.0.0.1")
    sv.add_argument("--port", type=int, default=8000)
    sv.add_argument("--no-range", action="store_true", help="ignore Range headers (to test the app's error)")
    sv.add_argument("--no-cors", action="store_true", help="send no CORS headers (to test the app's error)")
    sv.set_defaults(fn=cmd_serve)

    u = sub.add_parser("up", help="the main job: build the demo stores and the site, then serve it")
    u.add_argument("--static", default=str(DEFAULT_STATIC))
    u.add_argument("--host", default="127.0.0.1")
    u.add_argument("--port", type=int, default=8000)
    u.add_argument("--px", type=int, default=384)
    u.add_argument("--years", type=int, nargs="+", default=[2023, 2024])
    u.add_argument("--rebuild", action="store_true", help="rebuild the demo stores even if present")
    _demo_data(u)
    _layout(u)
    _sched(u)
    u.set_defaults(fn=cmd_up)

    sm = sub.add_parser("sample", help="embeddings at points (lon, lat) of a tessera: v1 or geoemb: store, to Parquet")
    sm.add_argument("store", help="a store, a directory or catalog.json of year stores, or a geoemb: store "
                                  "(path or fsspec URL)")
    sm.add_argument("points", help="CSV (or .parquet) with lon and lat columns")
    sm.add_argument("-o", "--out", required=True, help="output table: .parquet (or .csv): lon, lat, zone, row, col, "
                                                       "status, scale, b0..b127")
    sm.add_argument("--year", type=int, help="year (required when the store holds several)")
    sm.add_argument("--option", action="append", default=[], help="fsspec storage option key=value")
    sm.add_argument("--allow", action="append", default=[], metavar="PREFIX",
                    help="a catalog may list stores below PREFIX (a URL or path) as well as on its own origin "
                         "(repeatable)")
    sm.set_defaults(fn=cmd_sample)

    ix = sub.add_parser("index", help="write virtual Zarr (Kerchunk) indexes over tiles or year stores")
    from builder.virtual.cli import add_arguments
    add_arguments(ix)
    ix.set_defaults(fn=cmd_index)
    return p


def _join_bbox(argv: list[str]) -> list[str]:
    """`--bbox -0.1,50.8,0.2,51.0` as `--bbox=...`: argparse takes a value starting with '-' for an option."""
    out = list(argv)
    for i in range(len(out) - 1):
        if out[i] == "--bbox" and out[i + 1][:2] in {f"-{c}" for c in ".0123456789"}:
            out[i:i + 2] = [f"--bbox={out[i + 1]}"]
            break
    return out


@contextlib.contextmanager
def _no_library_warnings():
    """Libraries' warnings (zarr-python's ZarrUserWarning about consolidated metadata, say) speak to developers,
    not to the user of the command: none is shown, from this process or its worker processes (which start with
    this interpreter's -W options).  The builder's own problems are errors, never warnings.  Warnings the user
    asked for (python -W, PYTHONWARNINGS) and TESSERA_DEBUG=1 leave them on."""
    if sys.warnoptions or os.environ.get("TESSERA_DEBUG"):
        yield
        return
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        sys.warnoptions.append("ignore")
        try:
            yield
        finally:
            sys.warnoptions.remove("ignore")


def main(argv: list[str] | None = None) -> int:
    args = parser().parse_args(_join_bbox(sys.argv[1:] if argv is None else argv))
    try:
        with _no_library_warnings():
            return args.fn(args)
    except BuildError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("interrupted; re-run the same command to resume", file=sys.stderr)
        return 130
    except ValueError as e:  # the index writer's documented argument errors
        print(f"error: {e}", file=sys.stderr)
        return 2
    except Exception as e:  # anything else is a bug: one line, the traceback only on request
        if os.environ.get("TESSERA_DEBUG"):
            raise
        print(f"error: internal: {type(e).__name__}: {e} (set TESSERA_DEBUG=1 for a traceback)", file=sys.stderr)
        return 3
