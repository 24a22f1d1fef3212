"""What each `python -m builder` subcommand does, given its parsed arguments (builder/cli.py parses them)."""
from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

from builder.core import convention as conv
from builder.catalog import write_catalog, write_years_index
from builder.errors import BuildError

REPO = Path(__file__).resolve().parent.parent
DEFAULT_STATIC = REPO / "static"
DEFAULT_CACHE = REPO / ".cache"


def _make_layout(a):
    from builder.store import Layout
    if a.shard <= 0 or a.chunk <= 0 or a.shard % a.chunk:
        raise BuildError(f"--chunk {a.chunk} must divide --shard {a.shard}")
    if not 0 <= a.clevel <= 9:
        raise BuildError(f"--clevel {a.clevel} is outside 0..9")
    return Layout(a.shard, a.chunk, a.cname, a.clevel)


def _report(r, t0: float) -> None:
    zones = ", ".join(f"{z} ({n} tiles)" for z, n in sorted(r.zones.items()))
    print(f"{r.store}: {zones}; {r.shards_written} shards written, {r.shards_empty} empty (no file), "
          f"{r.shards_skipped} already done; {r.tiles_new} new/changed of {r.tiles_total} tiles "
          f"in {time.time() - t0:.1f}s")


def _under(base: str, name: str = "") -> str | Path:
    """`name` inside a local directory or an object store prefix (no name: the place itself)."""
    from builder.sink import is_url
    if is_url(base):
        return "/".join(filter(None, [base.rstrip("/"), name]))
    return Path(base) / name


def _validate_or_fail(store: str | Path) -> None:
    from builder.sink import is_url, object_options
    from builder.validate import validate
    probs = validate(str(store), object_options(str(store)) if is_url(store) else None)
    if probs:
        raise BuildError(f"built store fails validation: {probs[0]} (+{len(probs) - 1} more)", str(store))


def cmd_build(a) -> int:
    from builder.build import BuildConfig, build, lock
    from builder.core import codes
    from builder.parallel import Runner
    years = a.year
    if len(set(years)) != len(years):
        dup = next(y for y in years if years.count(y) > 1)
        raise BuildError(f"year {dup} given twice; one store per year")
    if a.store and len(years) > 1:
        raise BuildError("--store names one store; use --out DIR to build several years")
    layout = _make_layout(a)
    if a.code_dims < 1:
        raise BuildError(f"--code-dims {a.code_dims} must be at least 1")
    cfgs = [BuildConfig(tiles="", store=_under(a.store) if a.store else _under(a.out, f"{y}.zarr"), year=y,
                        model_version=a.model_version, record=_under(a.record, f"{y}") if a.record else None,
                        rgb=not a.no_rgb, overlap=a.overlap, layout=layout, global_res=a.global_res, quiet=a.quiet,
                        global_rgb=not a.no_global, overviews=not a.no_overviews, code_dims=a.code_dims,
                        code_method=codes.BY_NAME[a.code].method)
            for y in years]
    from builder import mirror, relay
    # TILES, or a view of the tiles fetched --from a mirror or re-laid --from-store (with the tiles each store's
    # record names)
    records = {cfg.year: cfg.record_sink for cfg in cfgs}
    tiles = (relay if a.from_store else mirror).tiles_from_args(a, DEFAULT_CACHE, records)
    with Runner(a.scheduler, a.workers, a.quiet) as runner:
        for cfg in cfgs:
            cfg.tiles = tiles
            t0 = time.time()
            with lock(cfg):  # validated under the build's own lock: no other build changes it meanwhile
                _report(build(cfg, runner), t0)
                _validate_or_fail(cfg.store)
            print(f"{cfg.store}: valid tessera:{conv.DATASET_VERSION} store")
    if a.out:
        write_catalog(_under(a.out))
    return 0


def cmd_demo(a) -> int:
    from builder import demo
    from builder.build import BuildConfig, build, lock
    from builder.parallel import Runner
    tiles = Path(a.tiles)
    out = Path(a.out)
    t0 = time.time()
    from builder.parallel import cores
    written = demo.write_demo_tiles(tiles, years=a.years, px=a.px, dense=not a.no_dense, easy=a.easy,
                                    workers=a.workers or cores())
    print(f"wrote {len(written)} synthetic tiles ({'easy' if a.easy else 'realistic'}) and their ground truth "
          f"to {tiles} in {time.time() - t0:.1f}s")
    layout = _make_layout(a)
    version = demo.EASY_MODEL_VERSION if a.easy else demo.MODEL_VERSION
    for y in a.years:
        _drop_other_demo(out / f"{y}.zarr", Path(a.record) / str(y), version)
    with Runner(a.scheduler, a.workers, a.quiet) as runner:
        for y in a.years:
            store = out / f"{y}.zarr"
            t0 = time.time()
            cfg = BuildConfig(tiles=str(tiles), store=store, year=y,
                              model_version=version,
                              build_version=f"{__import__('builder').BUILD_VERSION} (synthetic demo tiles)",
                              record=Path(a.record) / str(y), layout=layout, global_res=a.global_res,
                              quiet=a.quiet)
            with lock(cfg):
                _report(build(cfg, runner), t0)
                _validate_or_fail(store)
    from builder.truth import write_demo_truth
    for path in write_demo_truth(out, tiles / demo.TRUTH_DIR, a.years):
        print(f"ground truth: {path}")
    if len(a.years) > 1:
        print(f"multi-year index: {write_years_index(out, [out / f'{y}.zarr' for y in a.years])}")
    print(f"catalog: {write_catalog(out)}")
    return 0


def _demo_version(record: Path) -> str | None:
    """The model_version of the demo store whose build record is in `record` (None: no record)."""
    import json
    try:
        return json.loads((record / "record.json").read_text()).get("model_version")
    except (OSError, ValueError):
        return None


def _drop_other_demo(store: Path, record: Path, version: str) -> None:
    """A demo store built from another demo generator's tiles (an earlier version, or --easy against the realistic
    world) cannot be extended with these tiles (its model_version differs): it is the demo's own output, so it
    is removed, with its record, and built again."""
    import shutil
    have = _demo_version(record)
    if have is not None and have != version and have.startswith("synthetic-demo"):
        print(f"{store}: built from the {have} demo tiles; rebuilding it from {version}")
        shutil.rmtree(store, ignore_errors=True)
        shutil.rmtree(record, ignore_errors=True)


def cmd_validate(a) -> int:
    from builder.publish import parse_options
    from builder.validate import validate
    stats: dict = {}
    probs = validate(a.store, parse_options(a.option) or None, deep=a.deep, stats=stats)
    for p in probs:
        print(p)
    if probs:
        print(f"{len(probs)} violation(s) in {a.store}", file=sys.stderr)
        return 1
    deep = (f"; --deep checked {stats.get('chunks', 0)} chunks in {stats.get('files', 0)} files"
            if a.deep else "")
    print(f"{a.store}: valid tessera:{conv.DATASET_VERSION} store{deep}")
    return 0


def cmd_publish(a) -> int:
    from builder.publish import parse_options, publish
    n = publish(Path(a.src), a.dest, parse_options(a.option), a.quiet, force=a.force)
    print(f"published {n} files from {a.src} to {a.dest}")
    return 0


def cmd_catalog(a) -> int:
    print(write_catalog(Path(a.dir)))
    return 0


def cmd_site(a) -> int:
    from builder.site import build_site
    build_site(Path(a.out), Path(a.cache), quiet=a.quiet)
    return 0


def cmd_serve(a) -> int:
    from builder.serve import serve
    root = Path(a.root)
    if not (root / "index.html").exists():
        raise BuildError("no index.html; build the site first (python -m builder site)", str(root))
    serve(root, a.host, a.port, ranges=not a.no_range, cors=not a.no_cors)
    return 0


def cmd_up(a) -> int:
    static = Path(a.static)
    args = argparse.Namespace(**vars(a))
    args.tiles, args.out, args.record = str(DEFAULT_CACHE / "demo-tiles"), str(static / "data"), str(DEFAULT_CACHE / "demo-build")
    catalog = static / "data" / "catalog.json"
    from builder import demo
    version = demo.EASY_MODEL_VERSION if a.easy else demo.MODEL_VERSION
    from builder.truth import truth_path
    stale = any(_demo_version(Path(args.record) / str(y)) != version or not truth_path(Path(args.out), y).exists()
                for y in a.years)  # another generator's stores, or a demo built before its ground-truth stores
    if a.rebuild or stale or not catalog.exists():
        cmd_demo(args)
    from builder.site import build_site
    build_site(static, DEFAULT_CACHE, quiet=a.quiet)
    from builder.serve import serve
    serve(static, a.host, a.port)
    return 0


def cmd_sample(a) -> int:
    from builder.publish import parse_options
    from builder.reader.sample import sample_file
    df = sample_file(a.store, a.points, a.out, a.year, parse_options(a.option), allow=a.allow or None)
    counts = df["status"].value_counts()
    print(f"{a.out}: {len(df)} points ({', '.join(f'{n} {k}' for k, n in counts.items()) or 'none'})")
    return 0


def cmd_index(a) -> int:
    from builder.virtual.cli import run
    return run(a)
