"""Exports of pinned vectors: CSV (one row per pixel) and .npy (float32 (N, B))."""
from __future__ import annotations

import io

import numpy as np

from builder.core.pixel import Pixel


def to_csv(pixels: list[Pixel]) -> bytes:
    valid = [p for p in pixels if p.valid]
    if not valid:
        return b""
    b = len(valid[0].vector)
    out = io.StringIO()
    out.write(",".join(["zone", "row", "col", "lon", "lat", "easting", "northing", "scale",
                        *[f"b{i}" for i in range(b)]]) + "\n")
    for p in valid:
        head = [p.zone, str(p.row), str(p.col), f"{p.lon:.7f}", f"{p.lat:.7f}", f"{p.easting:.1f}",
                f"{p.northing:.1f}", repr(float(p.scale))]
        out.write(",".join(head + [repr(float(v)) for v in p.vector]) + "\n")
    return out.getvalue().encode()


def to_npy(pixels: list[Pixel]) -> bytes:
    valid = [p.vector for p in pixels if p.valid]
    arr = np.stack(valid).astype(np.float32) if valid else np.zeros((0, 0), np.float32)
    buf = io.BytesIO()
    np.save(buf, arr)
    return buf.getvalue()
