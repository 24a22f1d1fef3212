"""The synthetic landscape: what is on the ground at a world position in a year, as land-cover classes.

- Gradients: elevation and moisture, smooth fields of a few kilometres.
- Parcels: Voronoi fields of about 220 m.  Each takes a class from the land-use zone it lies in (a smooth
  field of ~3 km: farmland, woodland, town, heath) and from the gradients (wet low ground: wetland and
  pasture; high ground: heath and conifers); within a zone the class is drawn per parcel from its hash.
- Linear features: roads and rivers along the zero lines of smooth fields (roads a few metres wide, rivers
  wider), and hedges along a share of the farmland parcels' edges.  At 10 m they are mostly sub-pixel: each
  pixel carries the feature's cover fraction, so its vector mixes the feature's and the field's.
- Change: between two years a known share of parcels changes class (a crop rotation, a felled wood, a new
  estate); the others keep their class and only drift (see builder/synth/embedding.py).

Water (sea, large lakes) is not a class here: it is no data, from the land mask, as in the real tiles.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from builder.synth.noise import Fractal, Parcels, lattice_hash, unit

CLASSES = ("cereal crop", "other crop", "grassland", "broadleaf wood", "conifer wood", "built-up",
           "heath and scrub", "wetland and inland water")
CEREAL, CROP, GRASS, BROADLEAF, CONIFER, BUILT, HEATH, WET = range(len(CLASSES))
N_CLASSES = len(CLASSES)
CLASS_COLOURS = ("#e6c229", "#f17105", "#8fd14f", "#1b7f3a", "#0b4f2c", "#b0306a", "#a37c5b", "#2b7bba")
# Classes whose vectors lie close together (as fields of different crops do): a group's classes share most of
# their mean vector (builder/synth/embedding.py), so telling them apart takes more labels than telling groups.
GROUPS = ((CEREAL, CROP, GRASS), (BROADLEAF, CONIFER), (BUILT,), (HEATH,), (WET,))

PARCEL_M = 220.0
CHANGE_SHARE = 0.08  # of parcels change class from one year to the next

# Land-use zones, and the classes their parcels take (probabilities in that order).
_ZONE_CLASSES = {
    "farmland": ((CEREAL, CROP, GRASS, BROADLEAF, BUILT), (0.38, 0.27, 0.25, 0.06, 0.04)),
    "woodland": ((BROADLEAF, CONIFER, GRASS, HEATH), (0.5, 0.3, 0.12, 0.08)),
    "town": ((BUILT, GRASS, BROADLEAF), (0.7, 0.2, 0.1)),
    "upland": ((HEATH, CONIFER, GRASS), (0.55, 0.2, 0.25)),
    "wet": ((WET, GRASS, BROADLEAF), (0.55, 0.35, 0.1)),
}
# What a parcel that changes becomes, per class it was.
_CHANGES_TO = {CEREAL: CROP, CROP: CEREAL, GRASS: CEREAL, BROADLEAF: HEATH, CONIFER: HEATH, BUILT: BUILT,
               HEATH: GRASS, WET: GRASS}


@dataclass
class Ground:
    """What covers each pixel: its parcel and class, linear features' cover fractions, gradients."""
    parcel: np.ndarray  # uint64 parcel id
    base: np.ndarray  # int class of the parcel
    edge: np.ndarray  # metres to the parcel's boundary
    road: np.ndarray  # cover fraction 0..1
    river: np.ndarray
    hedge: np.ndarray
    elevation: np.ndarray  # about N(0, 1)
    moisture: np.ndarray

    def classes(self) -> np.ndarray:
        """The land-cover class of each pixel: a feature covering more than half of it wins."""
        out = self.base.copy()
        out[self.hedge > 0.5] = BROADLEAF
        out[self.river > 0.5] = WET
        out[self.road > 0.5] = BUILT
        return out


class Landscape:
    def __init__(self, seed: int):
        self.seed = seed
        self.gradients = Fractal(6000.0, 3, 2, seed + 1)  # elevation, moisture
        self.zones = Fractal(3000.0, 2, 4, seed + 2)
        self.lines = Fractal(2500.0, 2, 2, seed + 3)  # roads, rivers: their zero lines
        self.parcels = Parcels(PARCEL_M, seed + 4)

    def ground(self, x: np.ndarray, y: np.ndarray, year_index: int) -> Ground:
        g = self.gradients(x, y)
        elevation, moisture = g[..., 0], g[..., 1] - 0.6 * g[..., 0]
        parcel, edge = self.parcels(x, y)
        base = self._parcel_class(parcel, self._zone(x, y, elevation, moisture))
        if year_index:
            changed = self.changes(parcel, year_index)
            for c, to in _CHANGES_TO.items():
                base[changed & (base == c)] = to
        lines = self.lines(x, y)
        road = _cover(np.abs(lines[..., 0]) * 900.0, 6.0)  # ~900 m per unit of the field near its zero line
        river = _cover(np.abs(lines[..., 1]) * 900.0, 14.0 + 10.0 * np.clip(-elevation, 0, 2))
        farm = np.isin(base, (CEREAL, CROP, GRASS))
        hedged = unit(lattice_hash(parcel.astype(np.int64), 0, self.seed + 5)) < 0.6
        hedge = np.where(farm & hedged, _cover(edge, 4.0), 0.0)
        return Ground(parcel, base, edge, road, river, hedge, elevation, moisture)

    def changes(self, parcel: np.ndarray, year_index: int) -> np.ndarray:
        """Which parcels change class in the year `year_index` years after the first (independently per year)."""
        return unit(lattice_hash(parcel.astype(np.int64), year_index, self.seed + 6)) < CHANGE_SHARE

    def _zone(self, x, y, elevation, moisture) -> np.ndarray:
        """Land-use zone of each pixel: 0 farmland, 1 woodland, 2 town, 3 upland, 4 wet."""
        z = self.zones(x, y)
        score = np.stack([z[..., 0] + 0.8,  # farmland is the commonest
                          z[..., 1],
                          z[..., 2] - 0.9,
                          z[..., 3] - 0.5 + 0.9 * elevation,
                          -0.7 + 1.1 * moisture - 0.6 * elevation])
        return score.argmax(0)

    def _parcel_class(self, parcel: np.ndarray, zone: np.ndarray) -> np.ndarray:
        u = unit(lattice_hash(parcel.astype(np.int64), 1, self.seed + 7))
        out = np.zeros(parcel.shape, np.int16)
        for k, (classes, probs) in enumerate(_ZONE_CLASSES.values()):
            here = zone == k
            edges = np.cumsum(probs)
            pick = np.searchsorted(edges, u[here] * edges[-1], side="right")
            out[here] = np.asarray(classes)[np.minimum(pick, len(classes) - 1)]
        return out


def _cover(distance: np.ndarray, width: float) -> np.ndarray:
    """Cover fraction of a 10 m pixel by a line feature `width` metres wide at `distance` from its centre line
    (a box of the feature's width convolved with the pixel's)."""
    half = width / 2
    lo, hi = distance - 5.0, distance + 5.0
    return np.clip((np.minimum(hi, half) - np.maximum(lo, -half)) / 10.0, 0.0, 1.0).astype(np.float32)
