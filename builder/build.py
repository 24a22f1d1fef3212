"""Build (or extend) one year store from a directory of TESSERA tiles.

Phases, each safe to interrupt:
  1. open every tile's headers and scan its scales (all bad input is refused
     here, before anything is written);
  2. plan zone grids; a grid that must grow to the north or west is moved by
     whole shards (`_regrid`, journalled, so a crash mid-move resumes);
  3. write every shard touched by a new or changed tile, in parallel through
     Dask.  A shard is recomputed from all tiles that cover it, in name order
     (where two tiles both have a valid pixel the later one wins, a no-data
     pixel never overwrites data).  Finished shards are journalled, so a
     re-run after a crash skips them;
  4. update zone attributes and the build record;
  5. update the global_rgb pyramid where shards changed.

The build record (JSON, outside the store: `<store>.build/` by default) keeps
what a later incremental run needs: tile fingerprints per zone, the RGB
model and the layout.  The store itself holds nothing but Zarr.
"""
from __future__ import annotations

import hashlib
import json
import os
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import zarr

from builder import BUILD_VERSION
from builder import convention as conv
from builder.errors import BuildError
from builder.grid import ZoneGrid
from builder.parallel import Runner
from builder.rgb import RGBModel
from builder.store import (SHARDED, Layout, ShardedArrayFiles, clean_partials, consolidate, create_zone, move_shards,
                           open_year, resize_zone)
from builder.tiles import Tile, TileRef, discover, open_tile

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
    s = tile.scale_values()
    if np.isinf(s).any():
        r, c = np.argwhere(np.isinf(s))[0][:2]
        raise BuildError(f"scales contain inf (pixel row {r}, col {c})", tile.scales.url)
    return tile


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


def _save_json(path: Path, doc: dict) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps(doc, indent=1))
    os.replace(tmp, path)


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


def _regrid(zone_dir: Path, old: ZoneGrid, new: ZoneGrid, n_bands: int, journal: Path) -> None:
    """Grow a zone grid to `new`, moving shard files by whole shards (crash-safe, resumable)."""
    dr, dc = new.offset_of(old)
    staging = journal.with_suffix(".staging")
    state = json.loads(journal.read_text()) if journal.exists() else None
    if state is None:
        state = {"phase": "stage", "old": old.__dict__, "new": new.__dict__}
        _save_json(journal, state)
    group = zarr.open_group(zarr.storage.LocalStore(zone_dir), mode="r+")
    if state["phase"] == "stage":
        for name in SHARDED:
            if (zone_dir / name).exists():
                move_shards(zone_dir / name, staging / name, dr, dc)
        state["phase"] = "commit"
        _save_json(journal, state)
    for name in SHARDED:
        if (staging / name).exists():
            move_shards(staging / name, zone_dir / name, 0, 0)
    resize_zone(group, new, n_bands)
    group.attrs.update(new.attrs())
    journal.unlink()


# ---------------------------------------------------------------- phase 3 --
@dataclass(frozen=True)
class ShardTask:
    zone_dir: str
    grid: ZoneGrid
    shard: tuple[int, int]
    tiles: tuple[tuple[Tile, int, int], ...]  # tile with its (row, col) in the zone grid
    n_bands: int
    rgb: dict | None


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
    return task.shard, n_valid


def _fit_rgb(tiles: list[Tile]) -> RGBModel:
    """PCA on a deterministic sample: up to SAMPLE_ROWS rows per tile, read one row at a time."""
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
    return RGBModel.fit(np.concatenate(parts))


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
    tiles: list[Tile] = runner.map(_open_checked, refs, f"reading {len(refs)} tile headers")
    _check_consistent(tiles)
    n_bands = tiles[0].n_bands
    record = _load_record(cfg)
    if record and record.get("model_version") != cfg.model_version:
        raise BuildError(f"store was built from model_version {record.get('model_version')!r}, "
                         f"refusing to mix in {cfg.model_version!r}", str(store))
    if record and record.get("n_bands") not in (None, n_bands):
        raise BuildError(f"store has {record['n_bands']} bands, tiles have {n_bands}", str(store))
    if record and record.get("layout") not in (None, cfg.layout.__dict__):
        raise BuildError(f"store was built with layout {record['layout']}, not {cfg.layout.__dict__}", str(store))
    by_zone: dict[int, list[Tile]] = defaultdict(list)
    for t in tiles:
        by_zone[t.zone].append(t)
    if cfg.overlap == "error":
        for ztiles in by_zone.values():
            _check_overlaps(ztiles, _zone_key(ztiles)[1])
    root = open_year(store, cfg.year)
    # A store made by another tool (or whose record is lost) must not be mixed blindly.
    for name in root.group_keys():
        z = conv.parse_zone_group_name(name)
        if z is None:
            continue
        attrs = dict(root[name].attrs)
        if attrs.get("tessera:model_version") != cfg.model_version:
            raise BuildError(f"zone {name} has model_version {attrs.get('tessera:model_version')!r}; "
                             f"refusing to mix in {cfg.model_version!r}", str(store))
        if name not in record.get("zones", {}):
            raise BuildError(f"zone {name} exists but has no build record in {cfg.record_dir}; "
                             "refusing to add tiles to it blindly", str(store))
    record.setdefault("model_version", cfg.model_version)
    record["n_bands"] = n_bands
    record["layout"] = cfg.layout.__dict__
    record.setdefault("zones", {})
    rgb_model = None
    if cfg.rgb:
        rgb_model = RGBModel.from_json(record["rgb"]) if "rgb" in record else _fit_rgb(tiles)
        record["rgb"] = rgb_model.to_json()
    _save_json(cfg.record_dir / "record.json", record)  # a resumed run must reuse the same colours

    for zone_num, ztiles in sorted(by_zone.items()):
        _build_zone(cfg, runner, root, zone_num, ztiles, n_bands, rgb_model, record, report)
    _save_json(cfg.record_dir / "record.json", record)
    report.tiles_total = len(tiles)
    if cfg.global_rgb and cfg.rgb:
        from builder.pyramid import update_pyramid
        update_pyramid(store, report.changed_boxes, cfg.global_res, runner)
    consolidate(store)
    return report


def _set_zone_attrs(group, cfg: BuildConfig, zone: int, south: bool, n_bands: int, n_tiles: int, grid: ZoneGrid):
    group.attrs.update(conv.zone_attrs(
        year=cfg.year, zone=zone, south=south, n_bands=n_bands, n_tiles=n_tiles,
        model_version=cfg.model_version, build_version=cfg.build_version, has_rgb=cfg.rgb,
        origin_e=grid.origin_e, origin_n=grid.origin_n, height=grid.height, width=grid.width))


def _build_zone(cfg, runner, root, zone_num, ztiles, n_bands, rgb_model, record, report) -> None:
    store = Path(cfg.store)
    name = conv.zone_group_name(zone_num)
    zone_dir = store / name
    zrec = record["zones"].get(name)
    zone, south = _zone_key(ztiles)
    if zrec and zrec["south"] != south:
        raise BuildError(f"zone {name} was built in {conv.proj_code(zone, zrec['south'])}; these tiles need "
                         f"{conv.proj_code(zone, south)}; rebuild the zone into a new store", str(store))
    grid = ZoneGrid.covering(zone, south, [_tile_box(t, south) for t in ztiles], cfg.layout.shard)
    journal = cfg.record_dir / f"{name}.regrid.json"
    if zrec:
        old = ZoneGrid(**zrec["grid"])
        grid = old.union(grid)
        clean_partials(zone_dir)
        if journal.exists() or grid != old:
            if journal.exists():
                grid = ZoneGrid(**json.loads(journal.read_text())["new"])
            _regrid(zone_dir, old, grid, n_bands, journal)
            zrec["grid"] = grid.__dict__
            _save_json(cfg.record_dir / "record.json", record)
    else:
        create_zone(root, grid, n_bands, cfg.rgb, cfg.layout)
        zrec = {"south": south, "grid": grid.__dict__, "tiles": {}}
        record["zones"][name] = zrec
        _set_zone_attrs(root[name], cfg, zone, south, n_bands, 0, grid)
        _save_json(cfg.record_dir / "record.json", record)
    placed = [(t, *_tile_offset(grid, t)) for t in ztiles]
    known = zrec["tiles"]
    dirty = [(t, r, c) for t, r, c in placed if known.get(t.name) != t.fingerprint()]
    report.tiles_new += len(dirty)
    shards = sorted({s for t, r, c in dirty for s in grid.shards_in(r, c, *t.shape)})
    # Resume: shards finished by an interrupted run of this same plan are skipped.
    plan_id = hashlib.sha256(json.dumps([grid.__dict__, sorted((t.name, t.fingerprint()) for t, _, _ in placed)],
                                        sort_keys=True).encode()).hexdigest()[:16]
    done_file = cfg.record_dir / f"{name}.done"
    done: set[tuple[int, int]] = set()
    if done_file.exists():
        lines = done_file.read_text().split()
        if lines and lines[0] == plan_id:
            done = {tuple(map(int, x.split(","))) for x in lines[1:]}
    else:
        done_file.parent.mkdir(parents=True, exist_ok=True)
    if not done:
        done_file.write_text(plan_id + "\n")
    todo = [s for s in shards if s not in done]
    report.shards_skipped += len(shards) - len(todo)
    tasks = []
    for s in todo:
        cover = tuple((t, r, c) for t, r, c in placed if s in grid.shards_in(r, c, *t.shape))
        tasks.append(ShardTask(str(zone_dir), grid, s, cover, n_bands, rgb_model.to_json() if rgb_model else None))
    with open(done_file, "a") as journal_f:
        for i in range(0, len(tasks), 64):  # journal in batches so a crash loses little work
            for shard, n_valid in runner.map(_write_shard, tasks[i:i + 64],
                                             f"{name}: shards {i + 1}-{min(i + 64, len(tasks))} of {len(tasks)}"):
                report.shards_written += n_valid > 0
                report.shards_empty += n_valid == 0
                journal_f.write(f"{shard[0]},{shard[1]}\n")
            journal_f.flush()
    for t, _, _ in dirty:
        known[t.name] = t.fingerprint()
    _set_zone_attrs(root[name], cfg, zone, south, n_bands, len(known), grid)
    record["zones"][name] = zrec
    _save_json(cfg.record_dir / "record.json", record)
    done_file.unlink(missing_ok=True)
    report.zones[name] = len(known)
    report.changed_boxes[name] = [(grid.__dict__, list(shards))]
