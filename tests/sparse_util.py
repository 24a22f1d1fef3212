"""Where a built store is sparse: a shard of a zone's grid the builder never wrote (no valid pixel) beside one it
wrote, found from the store's files (not from its records, which the tests check)."""
from __future__ import annotations

from pathlib import Path

import numpy as np
import zarr

SHARD = 256
BAND = 16


def missing_beside_present(store: Path) -> tuple[str, tuple[int, int], tuple[int, int], tuple[int, int, int, int]]:
    """(zone, missing shard, present shard, window): two neighbouring shards (row, col) of a zone's grid, the first
    never written, the second written, and a window (`window`) across both with a valid pixel in the second."""
    for zone in sorted(p.name for p in store.glob("utm*")):
        files = {(int(p.parts[-2]), int(p.parts[-1]))
                 for p in (store / zone / "scales" / "c").rglob("*") if p.is_file()}
        scales = zarr.open_array(store / zone / "scales", mode="r")
        h, w = scales.shape
        for i in range(h // SHARD):
            for j in range(w // SHARD):
                for there in ((i, j - 1), (i, j + 1), (i - 1, j), (i + 1, j)):
                    if (i, j) not in files and there in files:
                        for at in range(0, SHARD - BAND + 1, BAND):
                            r0, r1, c0, c1 = box = window((i, j), there, at)
                            if np.isfinite(scales[r0:r1, c0:c1]).any():  # data in the written shard's part
                                return zone, (i, j), there, box
    raise AssertionError(f"no zone of {store} has a missing shard beside a present one: the test needs one")


def window(missing: tuple[int, int], present: tuple[int, int], at: int) -> tuple[int, int, int, int]:
    """(r0, r1, c0, c1): a band BAND pixels wide, `at` pixels along the two shards' common edge, across the whole
    present shard and 56 pixels into the missing one."""
    (i, j), (i2, j2) = missing, present
    m, p = (j, j2) if i == i2 else (i, i2)
    across = (p * SHARD, m * SHARD + 56) if p < m else (m * SHARD + SHARD - 56, (p + 1) * SHARD)
    if i == i2:
        return i * SHARD + at, i * SHARD + at + BAND, *across
    return *across, j * SHARD + at, j * SHARD + at + BAND
