"""Growing a zone grid to the north or west: shard files move by whole shards, journalled (crash-safe,
resumable).  See builder/grid.py for why whole shards suffice."""
from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Callable

import zarr

from builder import extensions as ext
from builder import overviews as ovr
from builder.grid import ZoneGrid
from builder.hooks import kill_point
from builder.record import save_json, save_record
from builder.store import SHARDED, move_shards, resize_zone


def regrid(zone_dir: Path, old: ZoneGrid, new: ZoneGrid, n_bands: int, journal: Path, commit,
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
        save_json(journal, state)
    group = zarr.open_group(zarr.storage.LocalStore(zone_dir), mode="r+", use_consolidated=False)
    if state["phase"] == "stage":
        for name, r, c in shifts:
            if (zone_dir / name).exists():
                move_shards(zone_dir / name, staging / name, r, c)
                kill_point("regrid-staged")
        state["phase"] = "commit"
        save_json(journal, state)
    for name, _, _ in shifts:
        if (staging / name).exists():
            move_shards(staging / name, zone_dir / name, 0, 0)
    shutil.rmtree(staging, ignore_errors=True)
    resize_zone(group, new, n_bands)
    group.update_attributes(new.attrs())  # one write, not one per key (zarr's attrs.update)
    if overviews is not None and ext.OVR_GROUP in group:
        overviews(group, new)  # resized, and the levels' transforms in the zone attributes
    kill_point("regrid-moved")
    commit()
    kill_point("regrid-recorded")
    journal.unlink()


def grow_zone(cfg, record: dict, name: str, want: ZoneGrid, n_bands: int,
              overviews: Callable[[zarr.Group, ZoneGrid], None] | None) -> ZoneGrid:
    """The zone's recorded grid grown to contain `want`; an interrupted move is finished first."""
    zrec = record["zones"][name]
    zone_dir = Path(cfg.store) / name
    journal = cfg.record_dir / f"{name}.regrid.json"

    def move(old: ZoneGrid, new: ZoneGrid) -> ZoneGrid:
        def commit():
            zrec["grid"] = new.__dict__
            save_record(cfg, record)
        regrid(zone_dir, old, new, n_bands, journal, commit, overviews)
        return new

    grid = ZoneGrid(**zrec["grid"])
    if journal.exists():
        grid = move(grid, ZoneGrid(**json.loads(journal.read_text())["new"]))
    target = grid.union(want)
    return move(grid, target) if target != grid else grid
