"""Coordinates in the browser: the Web Mercator display (UTM <-> lon/lat is builder/core/utm.py's, re-exported)."""
from __future__ import annotations

import numpy as np

from builder.core.utm import lonlat_to_utm, utm_bbox_lonlat, utm_to_lonlat

__all__ = ["lonlat_to_utm", "utm_to_lonlat", "utm_bbox_lonlat", "lonlat_to_merc", "merc_to_lonlat", "R_MERC"]
R_MERC = 6378137.0


def lonlat_to_merc(lon, lat):
    lon = np.asarray(lon, dtype=np.float64)
    lat = np.clip(np.asarray(lat, dtype=np.float64), -85.05112878, 85.05112878)
    return R_MERC * np.radians(lon), R_MERC * np.log(np.tan(np.pi / 4 + np.radians(lat) / 2))


def merc_to_lonlat(x, y):
    x = np.asarray(x, dtype=np.float64)
    y = np.asarray(y, dtype=np.float64)
    return np.degrees(x / R_MERC), np.degrees(2 * np.arctan(np.exp(y / R_MERC)) - np.pi / 2)
