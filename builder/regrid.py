"""Growing a zone grid to the north or west: shard objects move by whole shards, journalled (crash-safe,
resumable).  See builder/core/grid.py for why whole shards suffice.  The journal (`<zone>.regrid.json`) and the shards
staged on the way (`<zone>.regrid.staging/`) are in the build record's sink; a move is a rename on a local disk and
a copy then a delete on an object store (builder/sink.py), idempotent either way."""
from __future__ import annotations

import json
from typing import Callable

import zarr

from builder import chunkrecord
from builder.core import extensions as ext
from builder import overviews as ovr
from builder.core.grid import ZoneGrid
from builder.hooks import kill_point
from builder.record import BuildRecord, save_json, save_record
from builder.sink import Sink
from builder.store import SHARDED, move_shards, resize_zone


def regrid(zone: Sink, old: ZoneGrid, new: ZoneGrid, n_bands: int, record: Sink, journal: str, commit,
           overviews: Callable[[zarr.Group, ZoneGrid], None] | None = None) -> None:
    """Grow a zone grid to `new`, moving shard objects by whole shards (crash-safe, resumable).

    `commit()` records the new grid; it runs after the move and before the journal (`journal`, a key of the
    `record` sink) goes, so that a re-run either finishes the journalled move or finds the new grid recorded,
    never moves twice.
    """
    dr, dc = new.offset_of(old)
    # every sharded array with its shift in its own shards: the zone's, then each overview level's
    shifts = [(name, dr, dc) for name in SHARDED] + ovr.moves(old, new, ovr.LEVELS)
    staging = record / f"{journal.removesuffix('.json')}.staging"
    raw = record.get(journal)
    state = json.loads(raw) if raw is not None else None
    if state is None:
        state = {"phase": "stage", "old": old.__dict__, "new": new.__dict__}
        save_json(record, journal, state)
    group = zarr.open_group(zone.zarr_store(), mode="r+", use_consolidated=False)
    if state["phase"] == "stage":
        for name, r, c in shifts:
            if zone.exists(f"{name}/zarr.json"):
                move_shards(zone / name, staging / name, r, c)
                kill_point("regrid-staged")
        state["phase"] = "commit"
        save_json(record, journal, state)
    for name, _, _ in shifts:
        move_shards(staging / name, zone / name, 0, 0)
    staging.delete_all()
    resize_zone(group, new, n_bands)
    group.update_attributes(new.attrs())  # one write, not one per key (zarr's attrs.update)
    if overviews is not None and ext.OVR_GROUP in group:
        overviews(group, new)  # resized, and the levels' transforms in the zone attributes
    for name, _, _ in shifts:  # the arrays' records of their shards name the shards' old places: taken anew
        if zone.exists(f"{name}/zarr.json"):
            chunkrecord.update(zone / name, relist=True)
    kill_point("regrid-moved")
    commit()
    kill_point("regrid-recorded")
    record.delete(journal)


def grow_zone(cfg, record: BuildRecord, name: str, want: ZoneGrid, n_bands: int,
              overviews: Callable[[zarr.Group, ZoneGrid], None] | None) -> ZoneGrid:
    """The zone's recorded grid grown to contain `want`; an interrupted move is finished first."""
    zrec = record.zones[name]
    zone = cfg.store_sink / name
    journal = f"{name}.regrid.json"

    def move(old: ZoneGrid, new: ZoneGrid) -> ZoneGrid:
        def commit():
            zrec.grid = new
            save_record(cfg.record_sink, record)
        regrid(zone, old, new, n_bands, cfg.record_sink, journal, commit, overviews)
        return new

    grid = zrec.grid
    raw = cfg.record_sink.get(journal)
    if raw is not None:
        grid = move(grid, ZoneGrid(**json.loads(raw)["new"]))
    target = grid.union(want)
    return move(grid, target) if target != grid else grid
