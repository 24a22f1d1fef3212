"""Points: lon/lat -> zone pixel (pyproj), and the embeddings there.

Each zone's points are read with one coordinate selection per array (ZoneView.pixels), in batches of
whole inner chunks: zarr-python then fetches each touched shard index once (kept by IndexCachingStore
across batches and calls) and each touched inner chunk once, by range request.
"""
from __future__ import annotations


import numpy as np
import pandas as pd

from builder.core.geometry import NearestZone
from builder.reader.layouts import OUTSIDE, VALID, Zone, to_crs

BATCH = 8192  # points per coordinate selection (zarr expands it to points x bands indices: ~25 MB)


def lonlat(points, where: str = "points") -> tuple[np.ndarray, np.ndarray]:
    """(lon, lat) float64 arrays from a DataFrame with lon/lat columns, an (N, 2) array or (lon, lat) pairs."""
    if isinstance(points, pd.DataFrame):
        if not {"lon", "lat"} <= set(points.columns):
            raise ValueError(f"{where}: need lon and lat columns, found {', '.join(map(str, points.columns)) or 'none'}")
        return points["lon"].to_numpy(np.float64), points["lat"].to_numpy(np.float64)
    a = np.asarray(points if isinstance(points, np.ndarray) else list(points), dtype=np.float64)
    if a.size == 0:
        return np.zeros(0), np.zeros(0)
    if a.ndim != 2 or a.shape[1] != 2:
        raise ValueError(f"{where}: expected (lon, lat) pairs, got an array of shape {a.shape}")
    return a[:, 0].copy(), a[:, 1].copy()


def locate(zones: list[Zone], lon: np.ndarray, lat: np.ndarray):
    """(zone index or -1, row, col) per point.  Where zone grids overlap, the zone whose central meridian
    is nearest wins: the explorer's rule (builder/core/reader.py StoreModel.locate), with its helper."""
    rows = np.full(lon.shape, -1, dtype=np.int64)
    cols = np.full(lon.shape, -1, dtype=np.int64)
    pick = NearestZone(lon)
    for i, z in enumerate(zones):
        near = np.flatnonzero(z.near(lon, lat))
        if not len(near):
            continue
        e, n = to_crs(z.crs).transform(lon[near], lat[near])
        r, c = z.rowcol(e, n)
        contains = np.zeros(lon.shape, dtype=bool)
        contains[near] = z.contains(r, c)
        win = pick.offer(i, z.grid.zone, contains)[near]
        idx = near[win]
        rows[idx], cols[idx] = r[win], c[win]
    return pick.which, rows, cols


def _batches(rows: np.ndarray, cols: np.ndarray, chunk: int):
    """Index arrays of at most ~BATCH points, sorted by inner chunk and never splitting one."""
    key = (rows // chunk) * (int(cols.max()) // chunk + 1) + cols // chunk
    order = np.argsort(key, kind="stable")
    k = key[order]
    starts = np.flatnonzero(np.r_[True, k[1:] != k[:-1]])
    cut, lo = [], 0
    for s in starts:
        if s - lo >= BATCH:
            cut.append(s)
            lo = s
    return np.split(order, cut)


def sample_points(store, points, year=None) -> pd.DataFrame:
    lon, lat = lonlat(points)
    views = store.views(year)
    which, rows, cols = locate([v.zone for v in views], lon, lat)
    n_bands = max((v.zone.n_bands for v in views), default=0)
    vec = np.full((len(lon), n_bands), np.nan, dtype=np.float32)
    scale = np.full(len(lon), np.nan, dtype=np.float32)
    status = np.full(len(lon), OUTSIDE, dtype=object)
    zone = np.full(len(lon), None, dtype=object)
    for i, v in enumerate(views):
        mine = np.flatnonzero(which == i)
        if not len(mine):
            continue
        zone[mine] = v.zone.name
        for b in _batches(rows[mine], cols[mine], v.zone.chunk):
            idx = mine[b]
            q, s = v.pixels(rows[idx], cols[idx])
            scale[idx], status[idx] = s, v.layout.classify(s)
            vec[idx, :v.zone.n_bands] = v.layout.dequantise(q, s)
    inside = which >= 0
    df = pd.DataFrame({
        "lon": lon, "lat": lat, "zone": zone,
        "row": pd.array(np.where(inside, rows, 0), dtype="Int64"), "col": pd.array(np.where(inside, cols, 0), dtype="Int64"),
        "status": status, "scale": scale})
    df.loc[~inside, ["row", "col"]] = pd.NA
    return pd.concat([df, pd.DataFrame(vec, columns=[f"b{i}" for i in range(n_bands)])], axis=1)


def probe(store, lon: float, lat: float, year=None):
    row = sample_points(store, [(lon, lat)], year).iloc[0]
    if row["status"] != VALID:
        return None, row["status"]
    return row.iloc[7:].to_numpy(dtype=np.float32), VALID
