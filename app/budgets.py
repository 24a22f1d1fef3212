"""How much the explorer's tools read at once: the caps and budgets of a tool's region (app/tools/region.py plan).

Module attributes, looked up at call time (`budgets.MAX_REGION`), so that tests and benchmarks may change them.
"""
from __future__ import annotations

MAX_REGION = 768  # pixels per side of a tool region (app/tools/region.py): 3 shard widths, so an unaligned window touches 4x4 shards
OVERVIEWS = True  # tool regions read tessera-ovr: levels when a zone has them (False: the capped 10 m path)
MAX_CODE_SIDE = 4096  # pixels per side of a region read as an overview level's compact code (a link's window)
REGION_BYTES = 20 * 1600 * 1000  # a tool region's read budget with overviews: 20 B per pixel of a 1600 x 1000 screen
EXACT_PIXELS = MAX_REGION * MAX_REGION  # the most pixels per zone an exact (full-vector) result reads: ~300 MB float32
