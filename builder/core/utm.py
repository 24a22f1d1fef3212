"""UTM <-> lon/lat on the WGS84 ellipsoid (pure core: stdlib + numpy), for the explorer in Pyodide and every zone.

pyproj does have a Pyodide build (3.6.1 is in the Pyodide 0.27.7 lock), but
loading it adds PROJ compiled to wasm, its proj.db and the sqlite3 and
certifi packages it depends on to the explorer's download, for the two
projections used here; and proj4js would cost one JS bridge call per point,
while the map reprojects whole images (hundreds of thousands of points) per
redraw.  So the transverse Mercator is written here as vectorised numpy,
using Krueger's series to third order in n (the form given by Karney 2011
and quoted for UTM: about a millimetre within 3000 km of the central
meridian).  tests/test_app_logic.py checks it against pyproj on CPython.
"""
from __future__ import annotations

import numpy as np

from builder.core.geometry import central_meridian

A_AXIS = 6378137.0
F = 1 / 298.257223563
K0 = 0.9996
E0 = 500_000.0
N0_SOUTH = 10_000_000.0
_n = F / (2 - F)
_A = A_AXIS / (1 + _n) * (1 + _n**2 / 4 + _n**4 / 64)
_ALPHA = (_n / 2 - 2 * _n**2 / 3 + 5 * _n**3 / 16, 13 * _n**2 / 48 - 3 * _n**3 / 5, 61 * _n**3 / 240)
_BETA = (_n / 2 - 2 * _n**2 / 3 + 37 * _n**3 / 96, _n**2 / 48 + _n**3 / 15, 17 * _n**3 / 480)
_DELTA = (2 * _n - 2 * _n**2 / 3 - 2 * _n**3, 7 * _n**2 / 3 - 8 * _n**3 / 5, 56 * _n**3 / 15)
_C = 2 * np.sqrt(_n) / (1 + _n)


def lonlat_to_utm(lon, lat, zone: int, south: bool):
    """(easting, northing) of lon/lat (degrees) in UTM `zone`.

    The map projects every screen pixel of a zoomed-in redraw, so the series' double angles come from tan xi' =
    t / cos(dl) and tanh eta' = sin(dl) / sqrt(1 + t^2) by algebra, and its higher terms by the multiple-angle
    identities: 9 transcendental functions per point instead of 21, and 2 on the map's grids, whose longitudes
    and latitudes are broadcast lines (_line). Same results to a few nanometres."""
    shape = np.broadcast_shapes(np.shape(lon), np.shape(lat))
    lon = _line(np.asarray(lon, dtype=np.float64))
    lat = _line(np.asarray(lat, dtype=np.float64))
    s = np.sin(np.radians(lat))
    t = np.sinh(np.arctanh(s) - _C * np.arctanh(_C * s))
    dl = np.radians(lon - central_meridian(zone))
    c = np.cos(dl)
    u = np.sin(dl) / np.sqrt(1 + t * t)  # tanh(eta')
    xi_p, eta_p = np.arctan2(t, c), np.arctanh(u)
    d, w = c * c + t * t, 1 - u * u
    # sin and cos of 2j xi', cosh and sinh of 2j eta' (j = 1, 2, 3) by the double- and triple-angle identities
    s1, c1, h1, k1 = 2 * t * c / d, (c * c - t * t) / d, (1 + u * u) / w, 2 * u / w
    s2, c2, h2, k2 = 2 * s1 * c1, 2 * c1 * c1 - 1, 2 * h1 * h1 - 1, 2 * h1 * k1
    s3, c3, h3, k3 = s2 * c1 + c2 * s1, c2 * c1 - s2 * s1, h2 * h1 + k2 * k1, k2 * h1 + h2 * k1
    a1, a2, a3 = _ALPHA
    xi = xi_p + a1 * s1 * h1 + a2 * s2 * h2 + a3 * s3 * h3
    eta = eta_p + a1 * c1 * k1 + a2 * c2 * k2 + a3 * c3 * k3
    e = E0 + K0 * _A * eta
    n = K0 * _A * xi + (N0_SOUTH if south else 0.0)
    if e.shape != shape:  # both inputs repeated along the same axis
        e, n = np.broadcast_to(e, shape).copy(), np.broadcast_to(n, shape).copy()
    return e, n


def _line(a: np.ndarray) -> np.ndarray:
    """A 2-D grid whose values repeat along an axis (a broadcast view, stride 0: the map's longitudes repeat down
    its columns and its latitudes along its rows, View.lonlat_grid) as one line along that axis: what depends on
    longitude alone or latitude alone is then computed once per column or row, not per pixel."""
    if a.ndim == 2 and a.strides[1] == 0:
        return a[:, :1]
    if a.ndim == 2 and a.strides[0] == 0:
        return a[:1, :]
    return a


def utm_to_lonlat(e, n, zone: int, south: bool):
    """(lon, lat) in degrees of UTM easting/northing in `zone`."""
    e = np.asarray(e, dtype=np.float64)
    n = np.asarray(n, dtype=np.float64) - (N0_SOUTH if south else 0.0)
    xi = n / (K0 * _A)
    eta = (e - E0) / (K0 * _A)
    xi_p, eta_p = xi.copy(), eta.copy()
    for j, b in enumerate(_BETA, start=1):
        xi_p -= b * np.sin(2 * j * xi) * np.cosh(2 * j * eta)
        eta_p -= b * np.cos(2 * j * xi) * np.sinh(2 * j * eta)
    chi = np.arcsin(np.sin(xi_p) / np.cosh(eta_p))
    phi = chi.copy()
    for j, d in enumerate(_DELTA, start=1):
        phi += d * np.sin(2 * j * chi)
    lon = central_meridian(zone) + np.degrees(np.arctan2(np.sinh(eta_p), np.cos(xi_p)))
    return lon, np.degrees(phi)


def utm_bbox_lonlat(bbox, zone: int, south: bool, densify: int = 16):
    """(west, south, east, north) in degrees enclosing a UTM box (edges densified)."""
    e0, n0, e1, n1 = bbox
    t = np.linspace(0, 1, densify)
    es = np.concatenate([e0 + (e1 - e0) * t, np.full(densify, e1), e1 - (e1 - e0) * t, np.full(densify, e0)])
    ns = np.concatenate([np.full(densify, n0), n0 + (n1 - n0) * t, np.full(densify, n1), n1 - (n1 - n0) * t])
    lon, lat = utm_to_lonlat(es, ns, zone, south)
    return float(lon.min()), float(lat.min()), float(lon.max()), float(lat.max())
