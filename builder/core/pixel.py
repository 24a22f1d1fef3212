"""The pixel the explorer's reader gives (builder/core/reader.py StoreModel.pixel; its zones are
builder/core/zone.py's Zone, the global_rgb levels builder/core/describe.py's Level)."""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from builder.core import layout as lay


@dataclass
class Pixel:
    zone: str
    row: int
    col: int
    lon: float
    lat: float
    easting: float
    northing: float
    scale: float
    vector: np.ndarray | None  # float32 (B,), None where there is no data
    status: str = lay.VALID  # builder.core.layout: valid, or water / nodata (geoemb: NaN water, +inf no data)

    @property
    def valid(self) -> bool:
        return self.vector is not None

    def label(self) -> str:
        return f"{self.zone} r{self.row} c{self.col}"
