"""Build (or extend) one year store from a directory of TESSERA tiles.

Phases, each safe to interrupt (even by SIGKILL):
  1. open every tile's headers, scan its scales and fingerprint its content
     (all bad input is refused here, before anything is written);
  2. plan zone grids; a grid that must grow to the north or west is moved by
     whole shards (`_regrid`, journalled, so a crash mid-move resumes);
  3. write every shard touched by a new or changed tile, in parallel through
     Dask.  A shard is recomputed from all tiles that cover it, in name order
     (where two tiles both have a valid pixel the later one wins, a no-data
     pixel never overwrites data).  Each finished shard is journalled, so a
     re-run after a crash skips it;
  4. update zone attributes, then the tile fingerprints in the build record;
  5. update the embedding overviews (builder.overviews) above the changed shards;
  6. update the global_rgb pyramid where shards changed, then consolidate.

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
TESSERA_TEST_KILL_AT=<phase> makes the process SIGKILL itself at that phase
(`kill_point`; tests/test_kills.py).
"""
from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import signal
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

import numpy as np
import zarr

from builder import BUILD_VERSION
from builder import convention as conv
from builder import extensions as ext
from builder import overviews as ovr
from builder.errors import BuildError
from builder.grid import ZoneGrid
from builder.parallel import Runner
from builder.rgb import RGBModel
from builder.store import (SHARDED, Layout, ShardedArrayFiles, clean_partials, consolidate, create_zone, move_shards,
                           open_year, resize_zone)
from builder.tiles import Tile, TileRef, check_scales, discover, open_tile

KILL_ENV = "TESSERA_TEST_KILL_AT"
SAMPLE_ROWS = 40  # rows sampled per tile for the RGB PCA
SAMPLE_PER_ROW = 100


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


def kill_point(phase: str) -> None:
    """Test hook: SIGKILL this process at `phase` when TESSERA_TEST_KILL_AT names it."""
    if os.environ.get(KILL_ENV) == phase:
        os.kill(os.getpid(), signal.SIGKILL)


# ---------------------------------------------------------------- phase 1 --
def _open_checked(ref: TileRef) -> Tile:
    tile = open_tile(ref)
    check_scales(tile.scale_values(), tile.scales.url)
    return tile.hashed()


def _check_consistent(tiles: list[Tile]) -> None:
    first = tiles[0]
    for t in tiles[1:]:
        if t.n_bands != first.n_bands:
            raise BuildError(f"has {t.n_bands} bands but {first.name} has {first.n_bands}", t.emb.url)


# ---------------------------------------------------------------- record --
def _load_record(cfg: BuildConfig) -> dict:
    p = cfg.record_dir / "record.json"
    if p.exists():
        return json.loads(p.read_text())
    return {}


def _save_text(path: Path, text: str) -> None:
    """Write whole or not at all (temporary file renamed into place)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".tmp")
    tmp.write_text(text)
    os.replace(tmp, path)


def _save_json(path: Path, doc: dict) -> None:
    _save_text(path, json.dumps(doc, indent=1))


def _save_record(cfg: BuildConfig, record: dict) -> None:
    _save_json(cfg.record_dir / "record.json", record)


def _check_record(cfg: BuildConfig, record: dict, n_bands: int, by_zone: dict[int, list[Tile]]) -> None:
    store = str(cfg.store)
    if record and record.get("model_version") != cfg.model_version:
        raise BuildError(f"store was built from model_version {record.get('model_version')!r}, "
                         f"refusing to mix in {cfg.model_version!r}", store)
    if record and record.get("n_bands") not in (None, n_bands):
        raise BuildError(f"store has {record['n_bands']} bands, tiles have {n_bands}", store)
    if record and record.get("layout") not in (None, cfg.layout.__dict__):
        raise BuildError(f"store was built with layout {record['layout']}, not {cfg.layout.__dict__}", store)
    have = record.get("overviews")
    if have and not cfg.overviews:
        raise BuildError("store has embedding overviews; building without them would leave them stale "
                         "(drop --no-overviews, or rebuild into a new store)", store)
    if have and cfg.overviews and (have["levels"], have["dims"]) != (ovr.LEVELS, cfg.code_dims):
        raise BuildError(f"store has overviews of {have['levels']} levels and a {have['dims']}-d code, "
                         f"not {ovr.LEVELS} and {cfg.code_dims}; rebuild into a new store", store)
    for zone_num, ztiles in by_zone.items():
        name = conv.zone_group_name(zone_num)
        zrec = _zone_record(record, name)
        zone, south = _zone_key(ztiles)
        if zrec and zrec["south"] != south:
            raise BuildError(f"zone {name} was built in {conv.proj_code(zone, zrec['south'])}; these tiles need "
                             f"{conv.proj_code(zone, south)}; rebuild the zone into a new store", store)


def _check_zone_groups(cfg: BuildConfig, root, record: dict) -> None:
    """A store made by another tool (or whose record is lost) must not be mixed blindly."""
    for name in root.group_keys():
        if conv.parse_zone_group_name(name) is None or record.get("zones", {}).get(name, {}).get("creating"):
            continue  # not a zone, or a zone whose creation a killed run of ours began
        attrs = dict(root[name].attrs)
        if attrs.get("tessera:model_version") != cfg.model_version:
            raise BuildError(f"zone {name} has model_version {attrs.get('tessera:model_version')!r}; "
                             f"refusing to mix in {cfg.model_version!r}", str(cfg.store))
        if name not in record.get("zones", {}):
            raise BuildError(f"zone {name} exists but has no build record in {cfg.record_dir}; "
                             "refusing to add tiles to it blindly", str(cfg.store))


def _zone_record(record: dict, name: str) -> dict | None:
    """The zone's record, or None when the zone is new or a killed run was still creating its group."""
    zrec = record.get("zones", {}).get(name)
    return None if zrec is None or zrec.get("creating") else zrec


def _add_overview_pending(record: dict, name: str, grid: ZoneGrid, shards) -> None:
    """Note level-0 shards (as lattice indices) whose overviews must be recomputed (kept until they are)."""
    entries = record.setdefault("overview_pending", {}).setdefault(name, [])
    entries[:] = sorted({tuple(x) for x in entries} | {tuple(x) for x in ovr.lattice_shards(grid, shards)})


def _add_pending(record: dict, name: str, grid: ZoneGrid, shards: list[tuple[int, int]]) -> None:
    """Note shards whose global_rgb chunks must be redrawn (kept until the pyramid is updated)."""
    entries = record.setdefault("pyramid_pending", {}).setdefault(name, [])
    for entry in entries:
        if entry[0] == grid.__dict__:
            entry[1] = sorted({tuple(x) for x in entry[1]} | set(shards))
            return
    entries.append([grid.__dict__, sorted(shards)])


# ---------------------------------------------------------------- phase 2 --
def _zone_key(tiles: list[Tile]) -> tuple[int, bool]:
    zones = {(t.zone, t.south) for t in tiles}
    if len(zones) == 2:
        # The same zone number in both hemispheres shares one group; it is laid
        # out in the northern CRS, southern tiles shifted by the false northing.
        return zones.pop()[0], False
    return zones.pop()


def _tile_box(t: Tile, south_grid: bool) -> tuple[float, float, float, float]:
    dn = -conv.SOUTH_FALSE_NORTHING if (t.south and not south_grid) else 0.0
    h, w = t.shape
    p = conv.PIXEL_SIZE
    return (t.origin_e, t.origin_n + dn - h * p, t.origin_e + w * p, t.origin_n + dn)


def _tile_offset(grid: ZoneGrid, t: Tile) -> tuple[int, int]:
    box = _tile_box(t, grid.south)
    return grid.pixel_offset(box[0], box[3])


def _box_shards(grid: ZoneGrid, box: list[float]) -> list[tuple[int, int]]:
    """Shards of `grid` under a box (e0, n0, e1, n1) that a tile once covered."""
    r, c = grid.pixel_offset(box[0], box[3])
    return grid.shards_in(r, c, round((box[3] - box[1]) / conv.PIXEL_SIZE), round((box[2] - box[0]) / conv.PIXEL_SIZE))


def _regrid(zone_dir: Path, old: ZoneGrid, new: ZoneGrid, n_bands: int, journal: Path, commit,
            overviews: Callable[[zarr.Group, ZoneGrid], None] | None = None) -> None:
    """Grow a zone grid to `new`, moving shard files by whole shards (crash-safe, resumable).

    `commit()` records the new grid; it runs after the move and before the journal goes, so that a
    re-run either finishes the journalled move or finds the new grid recorded, never moves twice.
    """
    dr, dc = new.offset_of(old)
    # every sharded array with its shift in its own shards: the zone's, then each overview level's
    shifts = [(name, dr, dc) for name in SHARDED] + ovr.moves(old, new, ovr.LEVELS)
    staging = journal.with_suffix(".staging")
    state = json.loads(journal.read_text()) if journal.exists() else None
    if state is None:
        state = {"phase": "stage", "old": old.__dict__, "new": new.__dict__}
        _save_json(journal, state)
    group = zarr.open_group(zarr.storage.LocalStore(zone_dir), mode="r+", use_consolidated=False)
    if state["phase"] == "stage":
        for name, r, c in shifts:
            if (zone_dir / name).exists():
                move_shards(zone_dir / name, staging / name, r, c)
                kill_point("regrid-staged")
        state["phase"] = "commit"
        _save_json(journal, state)
    for name, _, _ in shifts:
        if (staging / name).exists():
            move_shards(staging / name, zone_dir / name, 0, 0)
    shutil.rmtree(staging, ignore_errors=True)
    resize_zone(group, new, n_bands)
    group.attrs.update(new.attrs())
    if overviews is not None and ext.OVR_GROUP in group:
        overviews(group, new)  # resized, and the levels' transforms in the zone attributes
    kill_point("regrid-moved")
    commit()
    kill_point("regrid-recorded")
    journal.unlink()


def _grow_zone(cfg: BuildConfig, record: dict, name: str, want: ZoneGrid, n_bands: int) -> ZoneGrid:
    """The zone's recorded grid grown to contain `want`; an interrupted move is finished first."""
    zrec = record["zones"][name]
    zone_dir = Path(cfg.store) / name
    journal = cfg.record_dir / f"{name}.regrid.json"

    def move(old: ZoneGrid, new: ZoneGrid) -> ZoneGrid:
        def commit():
            zrec["grid"] = new.__dict__
            _save_record(cfg, record)
        _regrid(zone_dir, old, new, n_bands, journal, commit, _overviews_of(cfg, record, n_bands))
        return new

    grid = ZoneGrid(**zrec["grid"])
    if journal.exists():
        grid = move(grid, ZoneGrid(**json.loads(journal.read_text())["new"]))
    target = grid.union(want)
    return move(grid, target) if target != grid else grid


def _create_zone(cfg: BuildConfig, root, record: dict, name: str, zone: int, south: bool, grid: ZoneGrid,
                 n_bands: int) -> None:
    """Create the zone group; the record names the zone first, so a killed creation is recognised and redone."""
    zrec = {"south": south, "grid": grid.__dict__, "tiles": {}, "creating": True}
    record["zones"][name] = zrec
    _save_record(cfg, record)
    create_zone(root, grid, n_bands, cfg.rgb, cfg.layout)
    if cfg.overviews:
        _overviews_of(cfg, record, n_bands)(root[name], grid)
    kill_point("zone-created")
    _set_zone_attrs(root[name], cfg, zone, south, n_bands, 0, grid)
    del zrec["creating"]
    _save_record(cfg, record)


# ---------------------------------------------------------------- phase 3 --
@dataclass(frozen=True)
class ShardTask:
    zone_dir: str
    grid: ZoneGrid
    shard: tuple[int, int]
    tiles: tuple[tuple[Tile, int, int], ...]  # tile with its (row, col) in the zone grid
    n_bands: int
    rgb: dict | None
    journal: str  # the zone's done file: "row,col" is appended once the shard's files are in place


def _write_shard(task: ShardTask) -> tuple[tuple[int, int], int]:
    s = task.grid.shard
    sr, sc = task.shard
    r0, c0 = sr * s, sc * s
    emb = np.zeros((s, s, task.n_bands), dtype=np.int8)
    scl = np.full((s, s), np.nan, dtype=np.float32)
    for tile, tr, tc in task.tiles:
        h, w = tile.shape
        a0, a1 = max(r0, tr), min(r0 + s, tr + h)
        b0, b1 = max(c0, tc), min(c0 + s, tc + w)
        if a0 >= a1 or b0 >= b1:
            continue
        e, v = tile.window(a0 - tr, a1 - tr, b0 - tc, b1 - tc)
        ok = ~np.isnan(v)
        sub_e = emb[a0 - r0:a1 - r0, b0 - c0:b1 - c0]
        sub_s = scl[a0 - r0:a1 - r0, b0 - c0:b1 - c0]
        sub_e[ok] = e[ok]
        sub_s[ok] = v[ok]
    n_valid = int((~np.isnan(scl)).sum())
    zone = Path(task.zone_dir)
    # A shard with no valid pixel is all fill: its files are removed, never written.
    ShardedArrayFiles(zone / "embeddings").write(sr, sc, emb)
    ShardedArrayFiles(zone / "scales").write(sr, sc, scl)
    if task.rgb is not None:
        ShardedArrayFiles(zone / "rgb").write(sr, sc, RGBModel.from_json(task.rgb).apply(emb, scl))
    kill_point("shard-written")
    with open(task.journal, "a") as f:  # one short O_APPEND write: lines of parallel tasks never mix
        f.write(f"{sr},{sc}\n")
    return task.shard, n_valid


def _read_done(done_file: Path, plan_id: str) -> set[tuple[int, int]]:
    """Shards journalled as done by an interrupted run of the same plan; starts a new journal otherwise."""
    lines = done_file.read_text().splitlines() if done_file.exists() else []
    if lines and lines[0] == plan_id:
        return {tuple(map(int, x.split(","))) for x in lines[1:] if re.fullmatch(r"\d+,\d+", x)}
    _save_text(done_file, plan_id + "\n")
    return set()


def _sample(tiles: list[Tile]) -> np.ndarray:
    """A deterministic sample of dequantised land pixels: up to SAMPLE_ROWS rows per tile, read one row at
    a time (fits the RGB preview's PCA and the overviews' code)."""
    rng = np.random.default_rng(0)
    parts = []
    for t in tiles:
        s = t.scale_values()
        ok = ~np.isnan(s) & t.land
        rows = np.flatnonzero(ok.any(axis=1))
        for r in rng.choice(rows, size=min(SAMPLE_ROWS, rows.size), replace=False) if rows.size else []:
            cols = np.flatnonzero(ok[r])
            cols = rng.choice(cols, size=min(SAMPLE_PER_ROW, cols.size), replace=False)
            e = t.embedding_rows(int(r), int(r) + 1)[0]
            parts.append(conv.dequantise(e[cols], s[r, cols]))
    if not parts:
        raise BuildError("no valid land pixel in any tile; nothing to preview")
    return np.concatenate(parts)


def _overviews_of(cfg: BuildConfig, record: dict, n_bands: int) -> Callable[[zarr.Group, ZoneGrid], None]:
    """f(zone group, grid): the zone's overview arrays created or resized to the grid, and its
    tessera-ovr:* attributes (level transforms) updated."""
    model = ovr.CodeModel.from_json(record["overviews"]["model"])

    def ensure(group: zarr.Group, grid: ZoneGrid) -> None:
        ovr.ensure(group, grid, n_bands, model, ovr.LEVELS, cfg.layout)
        group.attrs.update(ovr.attrs(grid, ovr.LEVELS, cfg.code_dims))
    return ensure


def _check_overlaps(ztiles: list[Tile], south: bool) -> None:
    boxes = [(_tile_box(t, south), t) for t in ztiles]
    for i, (a, ta) in enumerate(boxes):
        for b, tb in boxes[i + 1:]:
            if a[0] < b[2] and b[0] < a[2] and a[1] < b[3] and b[1] < a[3]:
                raise BuildError(f"overlaps tile {ta.name} (use --overlap last to let the later tile win)",
                                 tb.emb.url)


def build(cfg: BuildConfig, runner: Runner | None = None) -> BuildReport:
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
    tiles: list[Tile] = runner.map(_open_checked, refs, f"reading and fingerprinting {len(refs)} tiles")
    _check_consistent(tiles)
    n_bands = tiles[0].n_bands
    by_zone: dict[int, list[Tile]] = defaultdict(list)
    for t in tiles:
        by_zone[t.zone].append(t)
    record = _load_record(cfg)
    _check_record(cfg, record, n_bands, by_zone)
    if cfg.overlap == "error":
        for ztiles in by_zone.values():
            _check_overlaps(ztiles, _zone_key(ztiles)[1])
    rgb_model = None
    need_code = cfg.overviews and "overviews" not in record
    sample = _sample(tiles) if (cfg.rgb and "rgb" not in record) or need_code else None
    if cfg.rgb:
        rgb_model = RGBModel.from_json(record["rgb"]) if "rgb" in record else RGBModel.fit(sample)
    # Everything above only reads: a refused build leaves no store and no record behind.
    root = open_year(store, cfg.year)
    _check_zone_groups(cfg, root, record)
    clean_partials(store)  # temporary files of writes a killed run left behind
    record.setdefault("model_version", cfg.model_version)
    record["n_bands"] = n_bands
    record["layout"] = cfg.layout.__dict__
    record.setdefault("zones", {})
    if rgb_model is not None:
        record["rgb"] = rgb_model.to_json()
    if need_code:
        record["overviews"] = {"levels": ovr.LEVELS, "dims": cfg.code_dims,
                               "model": ovr.CodeModel.fit(sample, cfg.code_dims).to_json()}
    _save_record(cfg, record)  # a resumed run must reuse the same colours and code

    for zone_num, ztiles in sorted(by_zone.items()):
        _build_zone(cfg, runner, root, zone_num, ztiles, n_bands, rgb_model, record, report)
    report.tiles_total = len(tiles)
    if record.get("overview_pending"):
        ovr.update({name: (store / name, ZoneGrid.from_attrs(dict(root[name].attrs), cfg.layout.shard), pending)
                    for name, pending in sorted(record["overview_pending"].items())}, ovr.LEVELS, runner,
                   checkpoint=kill_point)
    pyramid = cfg.global_rgb and cfg.rgb
    if pyramid:
        from builder.pyramid import update_pyramid
        update_pyramid(store, record.get("pyramid_pending", {}), cfg.global_res, runner, checkpoint=kill_point)
    consolidate(store)
    kill_point("consolidated")
    if (pyramid and record.get("pyramid_pending")) or record.get("overview_pending"):
        if pyramid:
            record["pyramid_pending"] = {}
        record.pop("overview_pending", None)
        _save_record(cfg, record)
    return report


def _set_zone_attrs(group, cfg: BuildConfig, zone: int, south: bool, n_bands: int, n_tiles: int, grid: ZoneGrid):
    attrs = conv.zone_attrs(
        year=cfg.year, zone=zone, south=south, n_bands=n_bands, n_tiles=n_tiles,
        model_version=cfg.model_version, build_version=cfg.build_version, has_rgb=cfg.rgb,
        origin_e=grid.origin_e, origin_n=grid.origin_n, height=grid.height, width=grid.width)
    if cfg.overviews:
        attrs["zarr_conventions"].append(dict(ext.OVR))
        attrs.update(ovr.attrs(grid, ovr.LEVELS, cfg.code_dims))
    group.attrs.update(attrs)


def _build_zone(cfg, runner, root, zone_num, ztiles, n_bands, rgb_model, record, report) -> None:
    store = Path(cfg.store)
    name = conv.zone_group_name(zone_num)
    zone_dir = store / name
    zone, south = _zone_key(ztiles)
    grid = ZoneGrid.covering(zone, south, [_tile_box(t, south) for t in ztiles], cfg.layout.shard)
    if _zone_record(record, name):
        grid = _grow_zone(cfg, record, name, grid, n_bands)
    else:
        _create_zone(cfg, root, record, name, zone, south, grid, n_bands)
    zrec = record["zones"][name]
    placed = [(t, *_tile_offset(grid, t)) for t in ztiles]
    known = zrec["tiles"]
    boxes = zrec.setdefault("boxes", {})  # where each tile's pixels went (zone CRS): a moved tile's old place
    dirty = [(t, r, c) for t, r, c in placed if known.get(t.name) != t.fingerprint()]
    report.tiles_new += len(dirty)
    shards = sorted({s for t, r, c in dirty for s in grid.shards_in(r, c, *t.shape)} |
                    {s for t, _, _ in dirty if t.name in boxes for s in _box_shards(grid, boxes[t.name])})
    # Resume: shards finished by an interrupted run of this same plan (same grid, same tiles
    # recorded before, same tiles now) are skipped.
    plan_id = hashlib.sha256(json.dumps([grid.__dict__, sorted(known.items()),
                                         sorted((t.name, t.fingerprint()) for t, _, _ in placed)],
                                        sort_keys=True).encode()).hexdigest()[:16]
    if cfg.overviews:
        if ext.OVR_GROUP not in root[name]:
            # a zone without overviews (a store built before them): every stored shard needs them
            _add_overview_pending(record, name, grid, ovr.stored_shards(zone_dir / "embeddings"))
            _save_record(cfg, record)
        _overviews_of(cfg, record, n_bands)(root[name], grid)  # idempotent: finishes a killed creation
    if shards and rgb_model is not None:
        _add_pending(record, name, grid, shards)
    if shards and cfg.overviews:
        _add_overview_pending(record, name, grid, shards)
    if shards and (rgb_model is not None or cfg.overviews):
        _save_record(cfg, record)  # before the shards change: the pyramid and overviews are redone over them
    done_file = cfg.record_dir / f"{name}.done"
    done = _read_done(done_file, plan_id)
    todo = [s for s in shards if s not in done]
    report.shards_skipped += len(shards) - len(todo)
    rgb = rgb_model.to_json() if rgb_model else None
    tasks = []
    for s in todo:
        cover = tuple((t, r, c) for t, r, c in placed if s in grid.shards_in(r, c, *t.shape))
        tasks.append(ShardTask(str(zone_dir), grid, s, cover, n_bands, rgb, str(done_file)))
    for i in range(0, len(tasks), 64):  # in batches: bounded graphs and memory
        for shard, n_valid in runner.map(_write_shard, tasks[i:i + 64],
                                         f"{name}: shards {i + 1}-{min(i + 64, len(tasks))} of {len(tasks)}"):
            report.shards_written += n_valid > 0
            report.shards_empty += n_valid == 0
    for t, _, _ in dirty:
        known[t.name] = t.fingerprint()
        boxes[t.name] = list(_tile_box(t, grid.south))
    _set_zone_attrs(root[name], cfg, zone, south, n_bands, len(known), grid)
    _save_record(cfg, record)  # the fingerprints: only now is the tiles' content in the zone
    kill_point("zone-recorded")
    done_file.unlink(missing_ok=True)
    report.zones[name] = len(known)
    report.changed_boxes[name] = [(grid.__dict__, list(shards))]
