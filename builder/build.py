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
  4. update zone attributes, then the tile fingerprints in the build record;
  5. update the embedding overviews (builder.overviews) above the changed shards, and
  6. the global_rgb pyramid where shards changed, side by side (they read different arrays;
     `Runner.concurrently`), then consolidate.

The build record (JSON, outside the store: `<store>.build/` by default) keeps
what a later incremental run needs: tile fingerprints per zone, the RGB
model and the layout.  The store itself holds nothing but Zarr.

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
regrid.py (phase 2's grid moves), shardtask.py (phase 3's task and the colour/code sample); this module
runs the phases in order.
"""
from __future__ import annotations

import shutil
from collections import defaultdict
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Iterator

import zarr
from threadpoolctl import threadpool_limits

from builder import BUILD_VERSION
from builder import convention as conv
from builder import extensions as ext
from builder import overviews as ovr
from builder import record as rec
from builder.errors import BuildError
from builder.grid import ZoneGrid
from builder.lock import store_lock
from builder.parallel import Runner
from builder.plan import check_overlaps, plan_zone, tile_box, zone_key
from builder.hooks import kill_point
from builder.regrid import grow_zone
from builder.rgb import RGBModel
from builder.shardtask import ShardTask, write_shard
from builder.shardtask import sample as sample_pixels
from builder.arrayfiles import ShardSpec
from builder.store import SHARDED, Layout, clean_partials, consolidate, create_zone, open_year
from builder.tiles import Tile, TileRef, check_scales, discover, open_tile


@dataclass
class BuildConfig:
    tiles: str
    store: Path
    year: int
    model_version: str = "1.0"
    build_version: str = BUILD_VERSION
    record: Path | None = None
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

    @property
    def record_dir(self) -> Path:
        return Path(self.record) if self.record else Path(str(self.store) + ".build")


@dataclass
class BuildReport:
    store: Path
    zones: dict[str, int] = field(default_factory=dict)  # zone -> n_tiles
    shards_written: int = 0
    shards_skipped: int = 0  # journalled as done by an interrupted run
    shards_empty: int = 0  # computed, but no valid pixel: no file
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


def _create_zone(cfg: BuildConfig, root, record: dict, name: str, zone: int, south: bool, grid: ZoneGrid,
                 n_bands: int) -> None:
    """Create the zone group; the record names the zone first, so a killed creation is recognised and redone."""
    zrec = {"south": south, "grid": grid.__dict__, "tiles": {}, "creating": True}
    record["zones"][name] = zrec
    rec.save_record(cfg, record)
    create_zone(root, grid, n_bands, cfg.rgb, cfg.layout)
    if cfg.overviews:
        _overviews_of(cfg, record, n_bands)(root[name], grid)
    kill_point("zone-created")
    _set_zone_attrs(root[name], cfg, zone, south, n_bands, 0, grid)
    del zrec["creating"]
    rec.save_record(cfg, record)


def _overviews_of(cfg: BuildConfig, record: dict, n_bands: int) -> Callable[[zarr.Group, ZoneGrid], None]:
    """f(zone group, grid): the zone's overview arrays created or resized to the grid, and its
    tessera-ovr:* attributes (level transforms) updated."""
    model = ovr.CodeModel.from_json(record["overviews"]["model"])

    def ensure(group: zarr.Group, grid: ZoneGrid) -> None:
        ovr.ensure(group, grid, n_bands, model, ovr.LEVELS, cfg.layout)
        group.update_attributes(ovr.attrs(grid, ovr.LEVELS, cfg.code_dims))  # one write (attrs.update: one per key)
    return ensure


@contextmanager
def lock(cfg: BuildConfig) -> Iterator[None]:
    """The store's build lock (builder/lock.py): one build of a store at a time, held for the whole build
    (re-entrant: `cmd_build` validates the store under the same lock).  Test phases `lock` and `locked`."""
    kill_point("lock")
    with store_lock(cfg.record_dir, cfg.store):
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
    store = Path(cfg.store)
    report = BuildReport(store)
    refs = discover(cfg.tiles, cfg.year)
    tiles: list[Tile] = runner.map(_open_checked, refs, f"reading {len(refs)} tiles", here=True)
    _check_consistent(tiles)
    n_bands = tiles[0].n_bands
    by_zone: dict[int, list[Tile]] = defaultdict(list)
    for t in tiles:
        by_zone[t.zone].append(t)
    record = rec.load_record(cfg)
    rec.check_record(cfg, record, n_bands, by_zone)
    if cfg.overlap == "error":
        for ztiles in by_zone.values():
            check_overlaps(ztiles, zone_key(ztiles)[1])
    rgb_model = None
    need_code = cfg.overviews and "overviews" not in record
    sample = sample_pixels(tiles) if (cfg.rgb and "rgb" not in record) or need_code else None
    # One BLAS thread: the local pool starts up on the other core meanwhile (Runner.__enter__), and
    # OpenBLAS's threads waiting on a busy core made these two small fits take 0.3 s instead of 0.02 s.
    with threadpool_limits(1):
        if cfg.rgb:
            rgb_model = RGBModel.from_json(record["rgb"]) if "rgb" in record else RGBModel.fit(sample)
        code_model = ovr.CodeModel.fit(sample, cfg.code_dims).to_json() if need_code else None
    tiles = runner.map(Tile.hashed, tiles, f"fingerprinting {len(tiles)} tiles", here=True)
    by_zone = {z: [t for t in tiles if t.zone == z] for z in by_zone}
    # Everything above only reads: a refused build leaves no store and no record behind.
    root = open_year(store, cfg.year)
    rec.check_zone_groups(cfg, root, record)
    clean_partials(store)  # temporary files of writes a killed run left behind (builder/atomic.py)
    clean_partials(cfg.record_dir)  # ... and in its record (record.json, *.done, overview quarters)
    record.setdefault("model_version", cfg.model_version)
    record["n_bands"] = n_bands
    record["layout"] = cfg.layout.__dict__
    record.setdefault("zones", {})
    if rgb_model is not None:
        record["rgb"] = rgb_model.to_json()
    if need_code:
        record["overviews"] = {"levels": ovr.LEVELS, "dims": cfg.code_dims, "model": code_model}
    rec.save_record(cfg, record)  # a resumed run must reuse the same colours and code

    for zone_num, ztiles in sorted(by_zone.items()):
        _build_zone(cfg, runner, root, zone_num, ztiles, n_bands, rgb_model, record, report)
    report.tiles_total = len(tiles)
    pyramid = cfg.global_rgb and cfg.rgb
    runner.concurrently(lambda: _update_overviews(cfg, root, record, runner),
                        *([lambda: _update_pyramid(cfg, record, runner)] if pyramid else []))
    consolidate(store)
    kill_point("consolidated")
    if (pyramid and record.get("pyramid_pending")) or record.get("overview_pending"):
        if pyramid:
            record["pyramid_pending"] = {}
        record.pop("overview_pending", None)
        rec.save_record(cfg, record)
    return report


def _update_overviews(cfg: BuildConfig, root, record: dict, runner: Runner) -> None:
    """Phase 5: the overview levels above the pending shards, then the quarter files are removed (before
    the pending shards leave the record)."""
    if record.get("overview_pending"):
        ovr.update({name: (Path(cfg.store) / name, ZoneGrid.from_attrs(dict(root[name].attrs), cfg.layout.shard),
                           pending) for name, pending in sorted(record["overview_pending"].items())},
                   ovr.LEVELS, runner, checkpoint=kill_point, quarters=_quarters(cfg))
    shutil.rmtree(_quarters(cfg), ignore_errors=True)


def _update_pyramid(cfg: BuildConfig, record: dict, runner: Runner) -> None:
    """Phase 6: the global_rgb pyramid over the pending shards."""
    from builder.pyramid import update_pyramid
    update_pyramid(Path(cfg.store), record.get("pyramid_pending", {}), cfg.global_res, runner, checkpoint=kill_point)


def _quarters(cfg: BuildConfig) -> Path:
    """Where the shard writer leaves each shard's level-1 quarter for the overviews (builder.overviews)."""
    return cfg.record_dir / "overview-quarters"


def _set_zone_attrs(group, cfg: BuildConfig, zone: int, south: bool, n_bands: int, n_tiles: int, grid: ZoneGrid):
    attrs = conv.zone_attrs(
        year=cfg.year, zone=zone, south=south, n_bands=n_bands, n_tiles=n_tiles,
        model_version=cfg.model_version, build_version=cfg.build_version, has_rgb=cfg.rgb,
        origin_e=grid.origin_e, origin_n=grid.origin_n, height=grid.height, width=grid.width)
    if cfg.overviews:
        attrs["zarr_conventions"].append(dict(ext.OVR))
        attrs.update(ovr.attrs(grid, ovr.LEVELS, cfg.code_dims))
    group.update_attributes(attrs)  # one write (attrs.update writes zarr.json once per key)


def _build_zone(cfg, runner, root, zone_num, ztiles, n_bands, rgb_model, record, report) -> None:
    store = Path(cfg.store)
    name = conv.zone_group_name(zone_num)
    zone_dir = store / name
    zone, south = zone_key(ztiles)
    grid = ZoneGrid.covering(zone, south, [tile_box(t, south) for t in ztiles], cfg.layout.shard)
    if rec.zone_record(record, name):
        # a store without overviews (built with --no-overviews) has no code model and no levels to move
        ovr_move = _overviews_of(cfg, record, n_bands) if "overviews" in record else None
        grid = grow_zone(cfg, record, name, grid, n_bands, ovr_move)
    else:
        _create_zone(cfg, root, record, name, zone, south, grid, n_bands)
    zrec = record["zones"][name]
    known = zrec["tiles"]
    boxes = zrec.setdefault("boxes", {})  # where each tile's pixels went (zone CRS): a moved tile's old place
    plan = plan_zone(grid, ztiles, known, boxes)
    shards = list(plan.shards)
    report.tiles_new += len(plan.dirty)
    if cfg.overviews:
        if ext.OVR_GROUP not in root[name]:
            # a zone without overviews (a store built before them): every stored shard needs them
            rec.add_overview_pending(record, name, grid, ovr.stored_shards(zone_dir / "embeddings"))
            rec.save_record(cfg, record)
        _overviews_of(cfg, record, n_bands)(root[name], grid)  # idempotent: finishes a killed creation
    if shards and rgb_model is not None:
        rec.add_pending(record, name, grid, shards)
    if shards and cfg.overviews:
        rec.add_overview_pending(record, name, grid, shards)
    if shards and (rgb_model is not None or cfg.overviews):
        rec.save_record(cfg, record)  # before the shards change: the pyramid and overviews are redone over them
    done_file = cfg.record_dir / f"{name}.done"
    done = rec.read_done(done_file, plan.plan_id)  # shards an interrupted run of this same plan finished
    todo = [s for s in shards if s not in done]
    report.shards_skipped += len(shards) - len(todo)
    rgb = rgb_model.to_json() if rgb_model else None
    code = record["overviews"]["model"] if cfg.overviews else None
    arrays = [*SHARDED, *(ovr.level_path(0, a) for a in ovr.level_arrays(0))]
    specs = {a: ShardSpec.read(zone_dir / a) for a in arrays if (zone_dir / a / "zarr.json").exists()}
    quarters = str(ovr.level_quarters(_quarters(cfg), name, 0)) if cfg.overviews else None
    tasks = [ShardTask(str(zone_dir), grid, s, plan.cover(s), n_bands, rgb, str(done_file), specs, code, quarters)
             for s in todo]
    for i in range(0, len(tasks), 64):  # in batches: bounded graphs and memory
        for shard, n_valid in runner.map(write_shard, tasks[i:i + 64],
                                         f"{name}: shards {i + 1}-{min(i + 64, len(tasks))} of {len(tasks)}"):
            report.shards_written += n_valid > 0
            report.shards_empty += n_valid == 0
    for t, _, _ in plan.dirty:
        known[t.name] = t.fingerprint()
        boxes[t.name] = list(tile_box(t, grid.south))
    _set_zone_attrs(root[name], cfg, zone, south, n_bands, len(known), grid)
    rec.save_record(cfg, record)  # the fingerprints: only now is the tiles' content in the zone
    kill_point("zone-recorded")
    done_file.unlink(missing_ok=True)
    report.zones[name] = len(known)
    report.changed_boxes[name] = [(grid.__dict__, list(shards))]
