"""Build planning without I/O (builder/plan.py): grids, tile placements, the shards a run rewrites and the
tiles over each.  Expected rows, columns and shards are worked out here by hand from metres."""
from __future__ import annotations

from dataclasses import dataclass
from types import SimpleNamespace

import pytest

from builder.errors import BuildError
from builder.core.grid import ZoneGrid
from builder.plan import check_overlaps, plan_zone, tile_box, zone_key

SHARD = 256
STEP = SHARD * 10.0  # metres per shard edge


@dataclass(frozen=True)
class FakeTile:
    name: str
    origin_e: float
    origin_n: float
    shape: tuple[int, int]
    print_: str = "a"
    zone: int = 30
    south: bool = False

    def fingerprint(self) -> str:
        return self.print_

    @property
    def emb(self):
        return SimpleNamespace(url=f"tiles/{self.name}.npy")


# The lattice-aligned grid corner: easting 640 * 2560 m, northing 2200 * 2560 m.
E0, N0 = 640 * STEP, 2200 * STEP
A = FakeTile("a", E0 + 100 * 10, N0 - 50 * 10, (300, 200))   # rows 50..349, cols 100..299
B = FakeTile("b", E0 + 600 * 10, N0 - 10 * 10, (100, 100))   # rows 10..109, cols 600..699


def grid_of(*tiles):
    return ZoneGrid.covering(30, False, [tile_box(t, False) for t in tiles], SHARD)


def shards_of(r0, c0, h, w):
    return {(r, c) for r in range(r0 // SHARD, (r0 + h - 1) // SHARD + 1) for c in range(c0 // SHARD, (c0 + w - 1) // SHARD + 1)}


def test_tiles_are_placed_on_the_lattice_aligned_grid():
    grid = grid_of(A, B)
    assert (grid.origin_e, grid.origin_n) == (E0, N0)
    assert (grid.height, grid.width) == (2 * SHARD, 3 * SHARD)  # rows 0..349 -> 2 shards, cols ..699 -> 3
    plan = plan_zone(grid, [A, B], {}, {})
    assert [(t.name, r, c) for t, r, c in plan.placed] == [("a", 50, 100), ("b", 10, 600)]


def test_a_new_build_rewrites_every_shard_under_its_tiles():
    plan = plan_zone(grid_of(A, B), [A, B], {}, {})
    assert set(plan.shards) == shards_of(50, 100, 300, 200) | shards_of(10, 600, 100, 100)
    assert list(plan.shards) == sorted(plan.shards) and [t.name for t, _, _ in plan.dirty] == ["a", "b"]


def test_an_unchanged_tile_is_not_rewritten_and_a_changed_one_with_its_old_place():
    grid = grid_of(A, B)
    plan = plan_zone(grid, [A, B], {"a": "a", "b": "a"}, {})
    assert plan.dirty == () and plan.shards == ()
    b2 = FakeTile("b", B.origin_e, B.origin_n, B.shape, print_="changed")
    old_box = [E0, N0 - 300 * 10, E0 + 10 * 10, N0 - 290 * 10]  # where b's pixels went before: row 290, col 0
    plan = plan_zone(grid, [A, b2], {"a": "a", "b": "a"}, {"b": old_box})
    assert [t.name for t, _, _ in plan.dirty] == ["b"]
    assert set(plan.shards) == shards_of(10, 600, 100, 100) | {(1, 0)}


def test_cover_lists_the_tiles_over_a_shard_in_order():
    plan = plan_zone(grid_of(A, B), [A, B], {}, {})
    assert [t.name for t, _, _ in plan.cover((0, 0))] == ["a"]
    assert [t.name for t, _, _ in plan.cover((0, 2))] == ["b"]
    assert plan.cover((1, 2)) == ()
    c = FakeTile("c", E0 + 150 * 10, N0 - 60 * 10, (10, 10))  # inside a, written after it
    plan = plan_zone(grid_of(A, B, c), [A, B, c], {}, {})
    assert [t.name for t, _, _ in plan.cover((0, 0))] == ["a", "c"]


def test_the_plan_id_names_grid_records_and_tiles():
    grid = grid_of(A, B)
    one = plan_zone(grid, [A, B], {"a": "a"}, {}).plan_id
    assert one == plan_zone(grid, [A, B], {"a": "a"}, {}).plan_id
    assert one != plan_zone(grid, [A, B], {}, {}).plan_id
    assert one != plan_zone(grid_of(A, B, FakeTile("z", E0 - STEP, N0, (1, 1))), [A, B], {"a": "a"}, {}).plan_id


def test_both_hemispheres_share_the_northern_grid_and_overlaps_are_named():
    south = FakeTile("s", E0, 9_000_000.0, (10, 10), south=True)
    assert zone_key([A, south]) == (30, False) and zone_key([south]) == (30, True)
    assert tile_box(south, False)[3] == 9_000_000.0 - 10_000_000.0
    over = FakeTile("o", A.origin_e + 10, A.origin_n - 10, (5, 5))
    with pytest.raises(BuildError, match="overlaps tile a"):
        check_overlaps([A, over], False)
    check_overlaps([A, B], False)
