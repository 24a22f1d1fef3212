"""The `sample` command: points from a CSV or Parquet file to a table of their embeddings."""
from __future__ import annotations

from pathlib import Path

import pandas as pd

from builder.reader.points import lonlat
from builder.reader.store import open_store


def sample_file(store_url: str, points_path: str, out_path: str, year=None, storage_options=None,
                allow=None) -> pd.DataFrame:
    """The `sample` command: points from CSV or Parquet (lon, lat columns) to a Parquet (or .csv) table."""
    p = Path(points_path)
    if not p.is_file():
        raise ValueError(f"{points_path}: no such file")
    try:
        pts = pd.read_parquet(p) if p.suffix == ".parquet" else pd.read_csv(p)
    except (ValueError, OSError) as e:
        raise ValueError(f"{points_path}: cannot read points ({e})".replace("\n", " ")) from None
    lonlat(pts, points_path)  # column check before opening anything remote
    df = open_store(store_url, allow=allow, **(storage_options or {})).sample_points(pts, year)
    if out_path.endswith(".csv"):
        df.to_csv(out_path, index=False)
    else:
        df.to_parquet(out_path, index=False)
    return df
