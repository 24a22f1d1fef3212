"""Per-shard products: what the shard task (builder/shardtask.py) writes beside a shard's embeddings and scales,
while the shard is in memory.  Each is registered here, as the convention's extensions are in
builder/core/extensions.py, and the shard task knows none of them by name: it calls `before` on each before it writes
the shard's own objects, and `write` on each after.

  RGBPreview       the zone's `rgb` preview shard (the store's colour model, tessera:has_rgb_preview)
  Level0Code       the overviews' level-0 compact code (tessera-ovr:, builder/overviews.py)
  OverviewQuarter  the shard's 2x2 means, kept in the build record for the overviews' level 1 (a quarter that
                   exists always matches the shard stored: it is removed before the shard is rewritten)

A build asks each registered product whether it takes part (`for_build`, from the build's options and record);
what takes part travels in the shard's task, so a product's parameters (a fitted model) reach every worker.
"""
from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property
from typing import Callable

import numpy as np

from builder.core import codes
from builder.core import convention as conv
from builder import overviews as ovr
from builder.arrayfiles import ShardedArrayFiles, ShardSpec
from builder.sink import Sink


class ShardData:
    """One shard of a zone as the shard task computed it, and where its arrays are."""

    def __init__(self, zone: Sink, name: str, grid, shard: tuple[int, int], emb: np.ndarray, scl: np.ndarray,
                 specs: dict[str, ShardSpec]):
        self.zone, self.name, self.grid, self.shard, self.emb, self.scl, self.specs = zone, name, grid, shard, emb, scl, specs
        self.files: dict[str, bool] = {}  # array path -> whether this shard has a file in it now (the arrays' records)

    @cached_property
    def ints(self) -> np.ndarray:
        """The valid pixels' int8 vectors as float32: computed once, for every product that needs them."""
        return self.emb[conv.valid_mask(self.scl)].astype(np.float32)

    @property
    def lattice(self) -> tuple[int, int]:
        """The shard's level-0 lattice index (grids move, the lattice not)."""
        r, c = self.grid.lattice_origin(0)
        return r + self.shard[0], c + self.shard[1]

    def write(self, array: str, data: np.ndarray) -> None:
        self.files[array] = ShardedArrayFiles(self.zone / array, self.specs[array]).write(*self.shard, data)


class ShardProduct:
    arrays: tuple[str, ...] = ()  # zone arrays it writes (their codec settings travel in the task)

    def before(self, shard: ShardData) -> None:
        """Called before the shard's own objects are written."""

    def write(self, shard: ShardData) -> None:
        """Called once they are."""


PRODUCTS: list[Callable[..., ShardProduct | None]] = []  # each: for_build(cfg, record, quarters) -> product or None


def register(cls):
    PRODUCTS.append(cls.for_build)
    return cls


def for_build(cfg, record, quarters: Sink) -> tuple[ShardProduct, ...]:
    """The products a build writes with every shard, in registration order."""
    return tuple(p for p in (make(cfg, record, quarters) for make in PRODUCTS) if p is not None)


@register
@dataclass(frozen=True)
class RGBPreview(ShardProduct):
    model: dict  # rgb.RGBModel.to_json()
    arrays = ("rgb",)

    @classmethod
    def for_build(cls, cfg, record, quarters):
        return cls(record.rgb) if cfg.rgb and record.rgb is not None else None

    def write(self, d: ShardData) -> None:
        from builder.rgb import RGBModel
        d.write("rgb", RGBModel.from_json(self.model).apply(d.emb, d.scl, d.ints))


@register
@dataclass(frozen=True)
class Level0Code(ShardProduct):
    model: dict  # the store's compact code's to_json() (builder/core/codes.py)
    arrays = (ovr.level_path(0, "code"), ovr.level_path(0, "code_scales"))

    @classmethod
    def for_build(cls, cfg, record, quarters):
        return cls(record.overviews.model) if cfg.overviews else None

    def write(self, d: ShardData) -> None:
        code, scales = codes.from_json(self.model).encode(d.emb, d.scl, d.ints)
        d.write(self.arrays[0], code)
        d.write(self.arrays[1], scales)


@register
@dataclass(frozen=True)
class OverviewQuarter(ShardProduct):
    quarters: Sink  # the build record's quarters (overviews.quarter_key)

    @classmethod
    def for_build(cls, cfg, record, quarters):
        return cls(quarters) if cfg.overviews else None

    def before(self, d: ShardData) -> None:
        self.quarters.delete(ovr.quarter_key(d.name, 0, d.lattice))

    def write(self, d: ShardData) -> None:
        ovr.save_quarter(self.quarters, ovr.quarter_key(d.name, 0, d.lattice), d.emb, d.scl)
