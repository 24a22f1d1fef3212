"""Build (or extend) one year store from a directory of TESSERA tiles.

Phases, each safe to interrupt (even by SIGKILL):
  1. open every tile's headers, scan its scales, fit the colour and code models
     on a sample, and fingerprint the tiles' content (all bad input is refused
     here, before anything is written);
  2. plan zone grids; a grid that must grow to the north or west is moved by
     whole shards (`regrid`, journalled, so a crash mid-move resumes);
  3. write every shard touched by a new or changed tile, in parallel through
     Dask.  A shard is recomputed from all tiles that cover it, in name order
     (where two tiles both have a valid pixel the later one wins, a no-data
     pixel never overwrites data).  Each finished shard is journalled, so a
     re-run after a crash skips it;
  4. update the zone arrays' records of their shards (builder/chunkrecord.py; whenever the plan has shards, so
     a re-run after a kill that left no shard to write still brings them up to date), the zone attributes, then
     the tile fingerprints in the build record;
  5. update the embedding overviews (builder.overviews) above the changed shards, and
  6. the global_rgb pyramid where shards changed, side by side (they read different arrays;
     `Runner.concurrently`), then consolidate (the records within the store's budget: builder/recordbudget.py).

The build record (a typed `record.BuildRecord`, JSON outside the store: `<store>.build/` by default) keeps
what a later incremental run needs: tile fingerprints per zone, the RGB
model and the layout.  The store itself holds nothing but Zarr.

Storage-neutral: the store and the record are each a builder.sink.Sink, a local directory or an object store
prefix (s3://bucket/prefix, endpoint and credentials from the standard AWS environment variables).  Every write
goes through them (shards, metadata, the record, its journals, the lock), so the same build writes either, and
its tasks run alike on local worker processes or on Dask workers that share no disk with this process.  The
store's root zarr.json with its consolidated metadata (phase 6's last write) is the commit point: readers
open a store through it.

Progress is recorded only after the work it describes is on disk, and intents
before the work: a zone enters the record (marked "creating") before its group
is created; a moved grid is recorded before its move journal is removed; the
shards a run is about to write are added to the record's `pyramid_pending`
and `overview_pending` before they are written, and leave them only once the
pyramid, the overviews and the consolidated metadata are updated; zone attributes are written before the
fingerprints.  A re-run therefore finds everything a killed run left undone.
TESSERA_TEST_KILL_AT=<phase> makes the process SIGKILL itself at that phase (with TESSERA_TEST_INTERRUPT=1,
send its process group a Ctrl-C; `kill_point`; tests/test_kills.py, tests/test_build.py).

Modules: plan.py (pure planning: grids, placements, shards), record.py (the record and journals),
regrid.py (phase 2's grid moves), shardtask.py (phase 3's task and the colour/code sample), products.py (what
phase 3 writes besides the embeddings: registered per-shard products), levels.py (phases 5 and 6's one level
scheduler); this module runs the phases in order.
"""
from __future__ import annotations

from collections import defaultdict
from contextlib import contextmanager
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from typing import Callable, Iterator

import zarr
from threadpoolctl import threadpool_limits

from builder import BUILD_VERSION
from builder.core import convention as conv
from builder.core import extensions as ext
from builder import chunkrecord
from builder import codefit
from builder import overviews as ovr
from builder import record as rec
from builder.arrayfiles import ShardSpec
from builder.errors import BuildError
from builder.core.grid import ZoneGrid
from builder.hooks import kill_point
from builder.lock import store_lock
from builder.parallel import Runner
from builder.plan import check_overlaps, plan_zone, tile_box, zone_key
from builder.products import for_build as shard_products
from builder.record import BuildRecord, Journal, OverviewsRecord, ZoneRecord
from builder.regrid import grow_zone
from builder.rgb import RGBModel
from builder.shardtask import ShardTask, write_shard
from builder.shardtask import sample as sample_pixels
from builder.sink import Sink, open_sink
from builder.store import SHARDED, Layout, consolidate, create_zone, open_year
from builder.tiles import Tile, TileRef, check_scales, discover, open_tile


SHARD_BATCH = 64  # shard tasks handed to the runner at once (at least 4 a worker: builder.parallel.Runner.parallelism)


@dataclass
class BuildConfig:
    tiles: str
    store: str | Path  # a local path or an object store URL (s3://bucket/prefix/2024.zarr)
    year: int
    model_version: str = "1.0"
    build_version: str = BUILD_VERSION
    record: str | Path | None = None  # the build record's directory or URL (default: <store>.build)
    rgb: bool = True
    overlap: str = "last"  # or "error"
    layout: Layout = field(default_factory=Layout)
    scheduler: str = "local"
    workers: int | None = None
    global_rgb: bool = True
    global_res: float = conv.GLOBAL_RES0
    quiet: bool = False
    overviews: bool = True  # embedding overviews (tessera-ovr:)
    code_dims: int = ovr.DIMS
    code_method: str = ext.OVR_PCA  # the compact code's method (builder/core/codes.py), fixed per store

    @cached_property
    def store_sink(self) -> Sink:
        return open_sink(self.store)

    @cached_property
    def record_sink(self) -> Sink:
        return open_sink(self.record) if self.record else open_sink(f"{str(self.store).rstrip('/')}.build")


@dataclass
class BuildReport:
    store: str
    zones: dict[str, int] = field(default_factory=dict)  # zone -> n_tiles
    shards_written: int = 0
    shards_skipped: int = 0  # journalled as done by an interrupted run
    shards_empty: int = 0  # computed, but no valid pixel: no object
    tiles_new: int = 0
    tiles_total: int = 0
    changed_boxes: dict[str, list] = field(default_factory=dict)


# ---------------------------------------------------------------- phase 1 --
def _open_checked(ref: TileRef) -> Tile:
    tile = open_tile(ref)
    check_scales(tile.scale_values(), tile.scales.url)
    return tile


def _check_consistent(tiles: list[Tile]) -> None:
    first = tiles[0]
    for t in tiles[1:]:
        if t.n_bands != first.n_bands:
            raise BuildError(f"has {t.n_bands} bands but {first.name} has {first.n_bands}", t.emb.url)


def _create_zone(cfg: BuildConfig, root, record: BuildRecord, name: str, zone: int, south: bool, grid: ZoneGrid,
                 n_bands: int) -> None:
    """Create the zone group; the record names the zone first, so a killed creation is recognised and redone."""
    zrec = record.zones[name] = ZoneRecord(south, grid, creating=True)
    rec.save_record(cfg.record_sink, record)
    create_zone(cfg.store_sink / name, grid, n_bands, cfg.rgb, cfg.layout,
                _overviews_of(cfg, record, n_bands) if cfg.overviews else None)
    kill_point("zone-created")
    _set_zone_attrs(root[name], cfg, record, zone, south, n_bands, 0, grid)
    zrec.creating = False
    rec.save_record(cfg.record_sink, record)


def _overviews_of(cfg: BuildConfig, record: BuildRecord, n_bands: int) -> Callable[[zarr.Group, ZoneGrid], None]:
    """f(zone group, grid): the zone's overview arrays created or resized to the grid, and its
    tessera-ovr:* attributes (level transforms) updated."""
    model = record.overviews.code

    def ensure(group: zarr.Group, grid: ZoneGrid) -> None:
        ovr.ensure(group, grid, n_bands, model, ovr.LEVELS, cfg.layout)
        group.update_attributes(ovr.attrs(grid, ovr.LEVELS, model))  # one write (attrs.update: one per key)
    return ensure


@contextmanager
def lock(cfg: BuildConfig) -> Iterator[None]:
    """The store's build lock (builder/lock.py, in the build record's sink): one build of a store at a time, held
    for the whole build (re-entrant: `cmd_build` validates the store under the same lock).  Test phases `lock`
    and `locked`."""
    kill_point("lock")
    with store_lock(cfg.record_sink, cfg.store):
        kill_point("locked")
        yield


def build(cfg: BuildConfig, runner: Runner | None = None) -> BuildReport:
    with lock(cfg):  # before the record is read: a build never acts on a record another build is changing
        own = runner is None
        runner = runner or Runner(cfg.scheduler, cfg.workers, cfg.quiet)
        if own:
            runner.__enter__()
        try:
            return _build(cfg, runner)
        finally:
            if own:
                runner.__exit__(None, None, None)


def _build(cfg: BuildConfig, runner: Runner) -> BuildReport:
    store = cfg.store_sink
    report = BuildReport(str(cfg.store))
    refs = discover(cfg.tiles, cfg.year)
    tiles: list[Tile] = runner.map(_open_checked, refs, f"reading {len(refs)} tiles", here=True)
    _check_consistent(tiles)
    n_bands = tiles[0].n_bands
    by_zone: dict[int, list[Tile]] = defaultdict(list)
    for t in tiles:
        by_zone[t.zone].append(t)
    record = rec.load_record(cfg.record_sink)
    rec.check_record(cfg, record, n_bands, by_zone)
    if cfg.overviews:
        codefit.check(cfg.code_method, cfg.code_dims, n_bands)
    if cfg.overlap == "error":
        for ztiles in by_zone.values():
            check_overlaps(ztiles, zone_key(ztiles)[1])
    rgb_model = None
    need_code = cfg.overviews and record.overviews is None
    sample = sample_pixels(tiles) if (cfg.rgb and record.rgb is None) or need_code else None
    # One BLAS thread: the local pool starts up on the other core meanwhile (Runner.__enter__), and
    # OpenBLAS's threads waiting on a busy core made these two small fits take 0.3 s instead of 0.02 s.
    with threadpool_limits(1):
        if cfg.rgb:
            rgb_model = RGBModel.from_json(record.rgb) if record.rgb is not None else RGBModel.fit(sample)
        code_model = codefit.fit(cfg.code_method, sample, cfg.code_dims).to_json() if need_code else None
    tiles = runner.map(Tile.hashed, tiles, f"fingerprinting {len(tiles)} tiles", here=True)
    by_zone = {z: [t for t in tiles if t.zone == z] for z in by_zone}
    # Everything above only reads: a refused build leaves no store and no record behind.
    root = open_year(store, cfg.year)
    rec.check_zone_groups(cfg, root, record)
    store.clean_partials()  # temporary files of writes a killed run left behind (builder/atomic.py)
    cfg.record_sink.clean_partials()  # ... and in its record (record.json, journals, overview quarters)
    if record.model_version is None:
        record.model_version = cfg.model_version
    record.n_bands = n_bands
    record.layout = dict(cfg.layout.__dict__)
    if rgb_model is not None:
        record.rgb = rgb_model.to_json()
    if need_code:
        record.overviews = OverviewsRecord(ovr.LEVELS, cfg.code_dims, code_model)
    rec.save_record(cfg.record_sink, record)  # a resumed run must reuse the same colours and code

    for zone_num, ztiles in sorted(by_zone.items()):
        _build_zone(cfg, runner, root, zone_num, ztiles, n_bands, record, report)
    report.tiles_total = len(tiles)
    pyramid = cfg.global_rgb and cfg.rgb
    runner.concurrently(lambda: _update_overviews(cfg, root, record, runner),
                        *([lambda: _update_pyramid(cfg, record, runner)] if pyramid else []))
    consolidate(store)
    kill_point("consolidated")
    if (pyramid and record.pyramid_pending) or record.overview_pending:
        if pyramid:
            record.pyramid_pending = {}
        record.overview_pending = {}
        rec.save_record(cfg.record_sink, record)
    return report


def _update_overviews(cfg: BuildConfig, root, record: BuildRecord, runner: Runner) -> None:
    """Phase 5: the overview levels above the pending shards and the overview arrays' records of their shards, then
    the quarters are removed (before the pending shards leave the record)."""
    if record.overview_pending:
        ovr.update({name: (cfg.store_sink / name, ZoneGrid.from_attrs(dict(root[name].attrs), cfg.layout.shard),
                           pending) for name, pending in sorted(record.overview_pending.items())},
                   ovr.LEVELS, record.overviews.code, runner, checkpoint=kill_point,
                   quarters=_quarters(cfg))
        for name in sorted(record.overview_pending):  # before the pending shards leave the record: redone after a kill
            ovr.record_shards(cfg.store_sink / name, ovr.LEVELS)
    _quarters(cfg).delete_all()


def _update_pyramid(cfg: BuildConfig, record: BuildRecord, runner: Runner) -> None:
    """Phase 6: the global_rgb pyramid over the pending shards."""
    from builder.pyramid import update_pyramid
    update_pyramid(cfg.store_sink, record.pyramid_pending, cfg.global_res, runner, checkpoint=kill_point)


def _quarters(cfg: BuildConfig) -> Sink:
    """Where the shard writer leaves each shard's level-1 quarter for the overviews (builder.overviews)."""
    return cfg.record_sink / "overview-quarters"


def _set_zone_attrs(group, cfg: BuildConfig, record: BuildRecord, zone: int, south: bool, n_bands: int, n_tiles: int,
                    grid: ZoneGrid):
    attrs = conv.zone_attrs(
        year=cfg.year, zone=zone, south=south, n_bands=n_bands, n_tiles=n_tiles,
        model_version=cfg.model_version, build_version=cfg.build_version, has_rgb=cfg.rgb,
        origin_e=grid.origin_e, origin_n=grid.origin_n, height=grid.height, width=grid.width)
    if cfg.overviews:
        attrs["zarr_conventions"].append(dict(ext.OVR))
        attrs.update(ovr.attrs(grid, ovr.LEVELS, record.overviews.code))
    group.update_attributes(attrs)  # one write (attrs.update writes zarr.json once per key)


def _build_zone(cfg, runner, root, zone_num, ztiles, n_bands, record: BuildRecord, report) -> None:
    name = conv.zone_group_name(zone_num)
    zone_sink = cfg.store_sink / name
    zone, south = zone_key(ztiles)
    grid = ZoneGrid.covering(zone, south, [tile_box(t, south) for t in ztiles], cfg.layout.shard)
    if record.zone(name):
        # a store without overviews (built with --no-overviews) has no code model and no levels to move
        ovr_move = _overviews_of(cfg, record, n_bands) if record.overviews else None
        grid = grow_zone(cfg, record, name, grid, n_bands, ovr_move)
    else:
        _create_zone(cfg, root, record, name, zone, south, grid, n_bands)
    zrec = record.zones[name]
    known, boxes = zrec.tiles, zrec.boxes  # boxes: where each tile's pixels went (zone CRS): a moved tile's old place
    plan = plan_zone(grid, ztiles, known, boxes)
    shards = list(plan.shards)
    report.tiles_new += len(plan.dirty)
    if cfg.overviews:
        if ext.OVR_GROUP not in root[name]:
            # a zone without overviews (a store built before them): every stored shard needs them
            record.add_overview_pending(name, grid, ovr.stored_shards(zone_sink / "embeddings"))
            rec.save_record(cfg.record_sink, record)
        _overviews_of(cfg, record, n_bands)(root[name], grid)  # idempotent: finishes a killed creation
    if shards and cfg.rgb:
        record.add_pending(name, grid, shards)
    if shards and cfg.overviews:
        record.add_overview_pending(name, grid, shards)
    if shards and (cfg.rgb or cfg.overviews):
        rec.save_record(cfg.record_sink, record)  # before the shards change: the pyramid and overviews are redone over them
    journal = Journal(cfg.record_sink, name, plan.plan_id)
    done = journal.done()  # shards an interrupted run of this same plan finished
    todo = [s for s in shards if s not in done]
    report.shards_skipped += len(shards) - len(todo)
    products = shard_products(cfg, record, _quarters(cfg))
    arrays = ["embeddings", "scales", *(a for p in products for a in p.arrays)]
    specs = ShardSpec.read_many(zone_sink, arrays) if shards else {}
    tasks = [ShardTask(zone_sink, grid, s, plan.cover(s), n_bands, journal, specs, products) for s in todo]
    batch = max(SHARD_BATCH, 4 * runner.parallelism)  # bounded graphs and memory; every worker busy to a batch's end
    written: dict[str, list] = defaultdict(list)  # array -> (shard, has a file) of the shards written
    for i in range(0, len(tasks), batch):
        for shard, n_valid, files in runner.map(write_shard, tasks[i:i + batch],
                                                f"{name}: shards {i + 1}-{min(i + batch, len(tasks))} of {len(tasks)}"):
            report.shards_written += n_valid > 0
            report.shards_empty += n_valid == 0
            for array, has in files.items():
                written[array].append((shard, has))
    kill_point("zone-shards-written")
    # The zone arrays' records of their shards, whenever the plan has shards (not only when some were left to write:
    # a run killed after its last shard's journal entry leaves nothing to write, and its records stale).  Shards a
    # killed run wrote are known only from the files.
    if shards:
        for array in (a for a in SHARDED if a in specs):
            chunkrecord.update(zone_sink / array, written[array], relist=len(todo) < len(shards))
    for t, _, _ in plan.dirty:
        known[t.name] = t.fingerprint()
        boxes[t.name] = list(tile_box(t, grid.south))
    _set_zone_attrs(root[name], cfg, record, zone, south, n_bands, len(known), grid)
    rec.save_record(cfg.record_sink, record)  # the fingerprints: only now is the tiles' content in the zone
    kill_point("zone-recorded")
    journal.clear()
    report.zones[name] = len(known)
    report.changed_boxes[name] = [(grid.__dict__, list(shards))]
