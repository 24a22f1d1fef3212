"""The one level scheduler of the build: a pyramid of levels, each computed from the level below, level by level.

The embedding overviews (builder/overviews.py) and the global_rgb pyramid (builder/pyramid.py) both give it their
levels, finest first, each as a `Level`: the units to compute (shards or chunks), the task function that computes
a batch of them, and how they are batched.  A level's units follow from the level below's units, not from its
results, so every level is known before the first task runs.

Each level is one `runner.map` over its batches, then a checkpoint (a test hook: builder/hooks.py) named
`{phase}-level{k}`.  The coarse levels have few units each, and a map per level would leave all but one core
idle while it waits for the level below: from the first level with at most `small` units, that level and every
coarser one are computed in one task, finer before coarser.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable

from builder.parallel import Runner

SMALL = 4  # a level with at most this many units is computed, with all coarser ones, in one task


def one_each(units: list) -> list[tuple]:
    """Batches of one unit."""
    return [(u,) for u in units]


@dataclass(frozen=True)
class Level:
    k: int
    fn: Callable[..., list]  # fn(batch: tuple of units, **kwargs) -> one result per unit, in order
    units: list
    kwargs: dict = field(default_factory=dict)
    small: int = SMALL  # this level and all coarser ones go in one task when it has at most this many units
    batches: Callable[[list], list[tuple]] = one_each


def _chain(levels: tuple[tuple[Callable, tuple, dict], ...]) -> list[list]:
    """Several levels in one task, finer before coarser: each level's results."""
    return [fn(units, **kwargs) for fn, units, kwargs in levels]


def run(runner: Runner, stage: str, noun: str, levels: list[Level], checkpoint: Callable[[str], None] = lambda phase: None,
        phase: str | None = None) -> list[list[Any]]:
    """Compute `levels` (finest first) on `runner`; each level's results, in unit order.  `stage` and `noun` name
    the work in the progress lines ("global_rgb level 0: 12 chunks"), `phase` (default: `stage`) the checkpoints."""
    phase = phase or stage
    out: list[list[Any]] = []
    for i, level in enumerate(levels):
        if len(level.units) <= level.small:
            rest = levels[i:]
            desc = f"{stage} levels {level.k}-{rest[-1].k}"
            (results,) = runner.map(_chain, [tuple((lv.fn, tuple(lv.units), lv.kwargs) for lv in rest)], desc)
            out += results
            for lv in rest:
                checkpoint(f"{phase}-level{lv.k}")
            break
        batches = level.batches(level.units)
        results = runner.map(level.fn, batches, f"{stage} level {level.k}: {len(level.units)} {noun}", **level.kwargs)
        out.append([r for batch in results for r in batch])
        checkpoint(f"{phase}-level{level.k}")
    return out
