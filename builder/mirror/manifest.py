"""The mirror's manifest: which files hold the tiles meeting a bbox, with their sizes and hashes."""
from __future__ import annotations

import io

import numpy as np

from builder.errors import BuildError
from builder.mirror.fetch import LANDMASKS, MANIFEST, REGISTRY, RETRIES, Remote, fetch_bytes
from builder.tiles import EMBEDDINGS_DIR, LANDMASKS_DIR, TILE_DEG, grid_name


def parse_bbox(s: str) -> tuple[float, float, float, float]:
    try:
        w, so, e, n = (float(v) for v in s.split(","))
    except ValueError:
        raise BuildError(f"--bbox {s!r}: expected four numbers W,S,E,N (degrees)") from None
    if not all(np.isfinite([w, so, e, n])) or not (-180 <= w <= e <= 180 and -90 <= so <= n <= 90):
        raise BuildError(f"--bbox {s!r}: need -180 <= W <= E <= 180 and -90 <= S <= N <= 90")
    return w, so, e, n


def cell_meets_bbox(lon: float, lat: float, bbox) -> bool:
    """Does the 0.1 degree cell centred at (lon, lat) share area with the bbox (or contain a point bbox)?"""
    w, s, e, n = bbox
    h = TILE_DEG / 2
    cw, ce, cs, cn = lon - h, lon + h, lat - h, lat + h
    ok_x = (cw <= e and w <= ce) if w == e else (cw < e and w < ce)
    ok_y = (cs <= n and s <= cn) if s == n else (cs < n and s < cn)
    return ok_x and ok_y



# -------------------------------------------------------------- manifest --
def _table(data: bytes, url: str):
    import pyarrow.parquet as pq
    try:
        return pq.read_table(io.BytesIO(data)).to_pandas()
    except Exception as e:
        raise BuildError(f"not a readable Parquet file ({e})", url) from None


def _require(df, cols: set[str], url: str) -> None:
    missing = sorted(cols - set(df.columns))
    if missing:
        raise BuildError(f"missing column(s) {', '.join(missing)}", url)


def _rel(path: str, base: str, url: str) -> str:
    """A manifest path as a path relative to the mirror root."""
    p = str(path)
    if p.startswith(base + "/"):
        return p[len(base) + 1:]
    for anchor in (EMBEDDINGS_DIR + "/", LANDMASKS_DIR + "/"):
        i = p.find(anchor)
        if i >= 0 and (i == 0 or p[i - 1] == "/"):
            return p[i:]
    if "://" in p or p.startswith("/") or ".." in p.split("/"):
        raise BuildError(f"path {p!r} is outside the mirror layout", url)
    return p


def _opt(row, col):
    v = row.get(col)
    if v is None or (isinstance(v, float) and np.isnan(v)):
        return None
    return v


def _lonlat(name: str) -> tuple[float, float]:
    lon, lat = name.split("_")[1:]
    return float(lon), float(lat)


def plan(base: str, bbox, years: list[int], retries: int = RETRIES,
         keep: dict[int, set[str]] | None = None) -> tuple[list[Remote], list[tuple[int, str]]]:
    """The files to fetch for the tiles of `years` meeting `bbox` (plus the tiles `keep[year]` names:
    those already in the year's store), and the (year, name) tiles."""
    keep = keep or {}
    murl = f"{base}/{MANIFEST}"
    data = fetch_bytes(murl, retries, missing_ok=True)
    if data is None:
        rurl = f"{base}/{REGISTRY}"
        data = fetch_bytes(rurl, retries, missing_ok=True)
        if data is None:
            raise BuildError(f"no {MANIFEST} (nor {REGISTRY}) on the mirror", murl)
        df, murl = _table(data, rurl), rurl
        _require(df, {"year", "lon", "lat", "file_size", "scales_size"}, murl)
        df = df.rename(columns={"file_size": "grid_size", "hash": "grid_sha256", "scales_hash": "scales_sha256"})
    else:
        df = _table(data, murl)
        _require(df, {"year", "lon", "lat", "grid_path", "scales_path", "grid_size", "scales_size"}, murl)
    lm = fetch_bytes(f"{base}/{LANDMASKS}", retries, missing_ok=True)
    lm_info: dict[str, tuple[int | None, str | None]] = {}
    if lm is not None:
        ldf = _table(lm, f"{base}/{LANDMASKS}")
        _require(ldf, {"lon", "lat", "file_size"}, f"{base}/{LANDMASKS}")
        for row in ldf.to_dict("records"):
            lm_info[grid_name(float(row["lon"]), float(row["lat"]))] = (int(row["file_size"]), _opt(row, "hash"))

    remotes: dict[str, Remote] = {}
    tiles: list[tuple[int, str]] = []
    for row in df.to_dict("records"):
        year, lon, lat = int(row["year"]), float(row["lon"]), float(row["lat"])
        name = grid_name(lon, lat)
        if year not in years or not (cell_meets_bbox(lon, lat, bbox) or name in keep.get(year, ())):
            continue
        tdir = f"{EMBEDDINGS_DIR}/{year}/{name}"
        files = [(f"{tdir}/{name}.npy", "grid"), (f"{tdir}/{name}_scales.npy", "scales")]
        for rel, key in files:
            src = _rel(row[f"{key}_path"], base, murl) if f"{key}_path" in row else rel
            size = _opt(row, f"{key}_size")
            remotes[rel] = Remote(f"{base}/{src}", rel, None if size is None else int(size),
                                  _opt(row, f"{key}_sha256"), "npy")
        lrel = f"{LANDMASKS_DIR}/{name}.tiff"
        lsrc = _rel(row["landmask_path"], base, murl) if _opt(row, "landmask_path") else lrel
        lsize, lsha = lm_info.get(name, (_opt(row, "landmask_size"), None))
        remotes[lrel] = Remote(f"{base}/{lsrc}", lrel, None if lsize is None else int(lsize), lsha, "tiff")
        tiles.append((year, name))
    for y in years:
        gone = sorted(keep.get(y, set()) - {n for yy, n in tiles if yy == y})
        if gone:
            raise BuildError(f"the {y} store holds {len(gone)} tile(s) the manifest does not list ({gone[0]}, ...); "
                             "build into a new store", murl)
    in_bbox = [t for t in tiles if cell_meets_bbox(*_lonlat(t[1]), bbox)]
    if not in_bbox:
        raise BuildError(f"no tiles for year(s) {', '.join(map(str, years))} meet bbox "
                         f"{','.join(f'{v:g}' for v in bbox)}", murl)
    return sorted(remotes.values(), key=lambda r: r.rel), sorted(set(tiles))


