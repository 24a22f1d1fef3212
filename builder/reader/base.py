"""What every opened store offers, whatever its layout (store.py opens them): years, zones, one zone of one
year (a ZoneView), and the point and region reads built on those (points.py, region.py)."""
from __future__ import annotations

from builder.reader import points as pts
from builder.reader import region
from builder.reader.layouts import Layout, Zone, ZoneView


class EmbeddingStore:
    """What every layout offers; `probe`, `sample_points` and `read_region` work on any of them."""

    url: str
    rules: Layout

    @property
    def layout(self) -> str:
        return self.rules.name

    @property
    def years(self) -> list[int]:
        raise NotImplementedError

    def zones(self, year: int | None = None) -> dict[str, Zone]:
        raise NotImplementedError

    def view(self, zone: str, year: int | None = None) -> ZoneView:
        raise NotImplementedError

    def year(self, year: int | None) -> int:
        ys = self.years
        if year is None:
            if len(ys) != 1:
                raise ValueError(f"{self.url} has {len(ys)} years {ys}; pass year=")
            return ys[0]
        if int(year) not in ys:
            raise ValueError(f"year {year} is not in {self.url} (years {ys})")
        return int(year)

    def views(self, year: int | None = None) -> list[ZoneView]:
        y = self.year(year)
        return [self.view(z, y) for z in self.zones(y)]

    def probe(self, lon: float, lat: float, year: int | None = None):
        """(float32 vector, "valid") or (None, "water" / "nodata" / "outside") at one point."""
        return pts.probe(self, lon, lat, year)

    def sample_points(self, points, year: int | None = None):
        """A DataFrame: lon, lat, zone, row, col, status, scale, b0..b{B-1} (see builder.reader.points)."""
        return pts.sample_points(self, points, year)

    def read_region(self, bbox, year: int | None = None, zone: str | None = None):
        """A lazy (dask) xarray.Dataset of one zone's window covering bbox (west, south, east, north)."""
        return region.read_region(self, bbox, year, zone)

    def __repr__(self) -> str:
        return f"<{type(self).__name__} {self.layout} {self.url} years {self.years}>"
