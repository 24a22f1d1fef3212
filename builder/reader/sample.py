"""The `sample` command: points from a CSV or Parquet file to a table of their embeddings.

The output is checked before anything is read (a .parquet or .csv name, not a directory, in a directory
that exists) and written whole or not at all (builder/atomic.py; an fsspec URL is one PUT)."""
from __future__ import annotations

import io
from pathlib import Path

import fsspec
import pandas as pd

from builder.atomic import write_bytes
from builder.reader.cache import is_url
from builder.reader.points import lonlat
from builder.reader.store import open_store

OUTPUTS = (".parquet", ".csv")


def output_kind(out_path: str) -> str:
    """".parquet" or ".csv": the table `out_path` names; ValueError (one line) for any other name, a
    directory, or a local directory that does not exist."""
    out = Path(out_path.removeprefix("file://"))
    kind = out.suffix.lower()
    if kind not in OUTPUTS:
        raise ValueError(f"{out_path}: the output must end in .parquet or .csv, not {out.suffix or '(no suffix)'!r}")
    if not is_url(out_path):
        if out.is_dir():
            raise ValueError(f"{out_path}: is a directory; name the output file")
        if not out.parent.is_dir():
            raise ValueError(f"{out_path}: no such directory {out.parent}")
    return kind


def sample_file(store_url: str, points_path: str, out_path: str, year=None, storage_options=None,
                allow=None) -> pd.DataFrame:
    """The `sample` command: points from CSV or Parquet (lon, lat columns) to a Parquet (or .csv) table."""
    kind = output_kind(out_path)
    p = Path(points_path)
    if not p.is_file():
        raise ValueError(f"{points_path}: no such file")
    try:
        pts = pd.read_parquet(p) if p.suffix == ".parquet" else pd.read_csv(p)
    except (ValueError, OSError) as e:
        raise ValueError(f"{points_path}: cannot read points ({e})".replace("\n", " ")) from None
    lonlat(pts, points_path)  # column check before opening anything remote
    df = open_store(store_url, allow=allow, **(storage_options or {})).sample_points(pts, year)
    if kind == ".csv":
        data = df.to_csv(index=False).encode()
    else:
        buf = io.BytesIO()
        df.to_parquet(buf, index=False)
        data = buf.getvalue()
    if is_url(out_path):
        with fsspec.open(out_path, "wb", **(storage_options or {})) as f:
            f.write(data)
    else:
        write_bytes(Path(out_path.removeprefix("file://")), data)
    return df
