"""Pure build planning (no I/O): which zone grid, where each tile sits, which shards to (re)write and
which tiles cover each.  Unit-tested without files (tests/test_plan.py).

A tile here is anything with name, zone, south, origin_e, origin_n, shape and fingerprint(), as
builder.tiles.Tile has.
"""
from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from typing import TYPE_CHECKING

from builder.core import convention as conv
from builder.errors import BuildError
from builder.core.grid import ZoneGrid

if TYPE_CHECKING:
    from builder.tiles import Tile


def zone_key(tiles: list[Tile]) -> tuple[int, bool]:
    zones = {(t.zone, t.south) for t in tiles}
    if len(zones) == 2:
        # The same zone number in both hemispheres shares one group; it is laid
        # out in the northern CRS, southern tiles shifted by the false northing.
        return zones.pop()[0], False
    return zones.pop()


def tile_box(t: Tile, south_grid: bool) -> tuple[float, float, float, float]:
    dn = -conv.SOUTH_FALSE_NORTHING if (t.south and not south_grid) else 0.0
    h, w = t.shape
    p = conv.PIXEL_SIZE
    return (t.origin_e, t.origin_n + dn - h * p, t.origin_e + w * p, t.origin_n + dn)


def tile_offset(grid: ZoneGrid, t: Tile) -> tuple[int, int]:
    box = tile_box(t, grid.south)
    return grid.pixel_offset(box[0], box[3])


def box_shards(grid: ZoneGrid, box: list[float]) -> list[tuple[int, int]]:
    """Shards of `grid` under a box (e0, n0, e1, n1) that a tile once covered."""
    r, c = grid.pixel_offset(box[0], box[3])
    return grid.shards_in(r, c, round((box[3] - box[1]) / conv.PIXEL_SIZE), round((box[2] - box[0]) / conv.PIXEL_SIZE))


def check_overlaps(ztiles: list[Tile], south: bool) -> None:
    boxes = [(tile_box(t, south), t) for t in ztiles]
    for i, (a, ta) in enumerate(boxes):
        for b, tb in boxes[i + 1:]:
            if a[0] < b[2] and b[0] < a[2] and a[1] < b[3] and b[1] < a[3]:
                raise BuildError(f"overlaps tile {ta.name} (use --overlap last to let the later tile win)",
                                 tb.emb.url)




@dataclass(frozen=True)
class ZonePlan:
    """What one zone's run writes: tiles placed on the grid, the changed ones, the shards to rewrite and the
    plan's id (a resumed run of the same plan skips the shards it journalled as done)."""

    grid: ZoneGrid
    placed: tuple  # (tile, row, col) of every tile, in name order
    dirty: tuple  # (tile, row, col) of the tiles new or changed since `known`
    shards: tuple[tuple[int, int], ...]
    plan_id: str

    def cover(self, shard: tuple[int, int]) -> tuple:
        """(tile, row, col) of the tiles over `shard`, in the order they are written (later wins)."""
        return tuple((t, r, c) for t, r, c in self.placed if shard in self.grid.shards_in(r, c, *t.shape))


def plan_zone(grid: ZoneGrid, tiles, known: dict[str, str], boxes: dict[str, list]) -> ZonePlan:
    """The plan of one zone: `known` the recorded fingerprints by tile name, `boxes` where each recorded tile's
    pixels went (a moved or changed tile's old place is rewritten too)."""
    placed = tuple((t, *tile_offset(grid, t)) for t in tiles)
    dirty = tuple((t, r, c) for t, r, c in placed if known.get(t.name) != t.fingerprint())
    shards = sorted({s for t, r, c in dirty for s in grid.shards_in(r, c, *t.shape)} |
                    {s for t, _, _ in dirty if t.name in boxes for s in box_shards(grid, boxes[t.name])})
    # Same grid, same tiles recorded before, same tiles now: the same plan.
    plan_id = hashlib.sha256(json.dumps([grid.__dict__, sorted(known.items()),
                                         sorted((t.name, t.fingerprint()) for t, _, _ in placed)],
                                        sort_keys=True).encode()).hexdigest()[:16]
    return ZonePlan(grid, placed, dirty, tuple(shards), plan_id)
