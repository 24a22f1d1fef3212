"""The mirror's manifest: which files hold the tiles meeting a bbox, with their sizes and hashes.

A manifest is checked before it is decoded: its row count, from the Parquet footer, against
`Limits.manifest_rows` (fetch.py bounds its bytes).  Then its rows are decoded BATCH at a time, only the
columns used, its pages streamed from the temporary file, and only the rows of the tiles wanted are kept:
memory follows the bbox, not the manifest (a whole-world manifest of 10^7 rows, 0.9 GB: about 0.3 GB).
"""
from __future__ import annotations

import urllib.parse
from pathlib import Path

import numpy as np

from builder.errors import BuildError
from builder.mirror.fetch import LANDMASKS, MANIFEST, REGISTRY, RETRIES, Remote, check_size, fetch_table
from builder.mirror.limits import FLAGS, Limits
from builder.tiles import EMBEDDINGS_DIR, LANDMASKS_DIR, TILE_DEG, grid_name

BATCH = 1 << 16  # manifest rows decoded at a time
READ_BUFFER = 1 << 20  # bytes of a manifest read at a time (a whole-world manifest's column chunk is ~100 MB)
MAX_PATH = 4096  # characters of a path in a manifest
GRID = ["year", "lon", "lat", "grid_path", "scales_path", "grid_size", "scales_size", "grid_sha256", "scales_sha256",
        "landmask_path", "landmask_size"]
REGISTRY_NAMES = {"file_size": "grid_size", "hash": "grid_sha256", "scales_hash": "scales_sha256"}  # -> GRID's


def parse_bbox(s: str) -> tuple[float, float, float, float]:
    try:
        w, so, e, n = (float(v) for v in s.split(","))
    except ValueError:
        raise BuildError(f"--bbox {s!r}: expected four numbers W,S,E,N (degrees)") from None
    if not all(np.isfinite([w, so, e, n])) or not (-180 <= w <= e <= 180 and -90 <= so <= n <= 90):
        raise BuildError(f"--bbox {s!r}: need -180 <= W <= E <= 180 and -90 <= S <= N <= 90")
    return w, so, e, n


def cell_meets_bbox(lon, lat, bbox):
    """Does the 0.1 degree cell centred at (lon, lat) share area with the bbox (or contain a point bbox)?
    lon and lat may be arrays (NaN meets nothing)."""
    w, s, e, n = bbox
    h = TILE_DEG / 2
    cw, ce, cs, cn = lon - h, lon + h, lat - h, lat + h
    ok_x = ((cw <= e) & (w <= ce)) if w == e else ((cw < e) & (w < ce))
    ok_y = ((cs <= n) & (s <= cn)) if s == n else ((cs < n) & (s < cn))
    return ok_x & ok_y


# -------------------------------------------------------------- manifest --
def _open(f, url: str, limits: Limits, required: set[str]):
    """The Parquet file `f` (open), its row count checked from the footer before any row is read."""
    import pyarrow.parquet as pq
    try:
        pf = pq.ParquetFile(f, buffer_size=READ_BUFFER, pre_buffer=False)  # pages streamed, not whole column chunks
    except Exception as e:
        raise BuildError(f"not a readable Parquet file ({str(e)[:300]})", url) from None
    rows = pf.metadata.num_rows
    if rows > limits.manifest_rows:
        raise BuildError(f"{rows} rows, more than the limit of {limits.manifest_rows} ({FLAGS['manifest_rows']})", url)
    _require(set(pf.schema_arrow.names), required, url)
    return pf


def _numbers(batch, column: str, url: str) -> np.ndarray:
    try:
        return np.asarray(batch.column(column).to_numpy(zero_copy_only=False), dtype=np.float64)
    except Exception:  # strings, lists, structs: pyarrow and numpy raise several types
        raise BuildError(f"column {column} is not numeric", url) from None


def _select(pf, url: str, columns: list[str], wanted) -> list[dict]:
    """The rows for which wanted(batch) (a bool array) holds, as dicts of `columns` (those the file has)."""
    import pyarrow as pa
    names = set(pf.schema_arrow.names)
    out: list[dict] = []
    try:
        for batch in pf.iter_batches(batch_size=BATCH, columns=[c for c in columns if c in names]):
            mask = wanted(batch)
            if mask.any():
                out.extend(batch.filter(pa.array(mask)).to_pylist())
    except BuildError:
        raise
    except Exception as e:
        raise BuildError(f"not a readable Parquet file ({str(e)[:300]})", url) from None
    return out


def _cell(lon, lat):
    """A tile's cell as one number (its centre in hundredths of a degree), comparable across arrays."""
    with np.errstate(invalid="ignore", over="ignore"):  # NaN and inf (no cell) stay so, quietly
        return np.rint(np.asarray(lon, dtype=np.float64) * 100) * 100_000 + np.rint(np.asarray(lat, dtype=np.float64) * 100)


def _require(names: set[str], cols: set[str], url: str) -> None:
    missing = sorted(cols - names)
    if missing:
        raise BuildError(f"missing column(s) {', '.join(missing)}", url)


def _rel(path: str, base: str, url: str, column: str) -> str:
    """A manifest path as a path relative to the mirror root."""
    p, q = str(path), None
    if len(p) > MAX_PATH:
        raise BuildError(f"{column} {p[:100]!r}... is longer than {MAX_PATH} characters", url)
    while q != p:  # every layer of percent-encoding: "%2e%2e" is ".." to a server
        q, p = p, urllib.parse.unquote(p)
    if ".." in p:
        raise BuildError(f"{column} {str(path)[:300]!r} contains '..'", url)
    p = str(path)
    if p.startswith(base + "/"):
        return p[len(base) + 1:]
    for anchor in (EMBEDDINGS_DIR + "/", LANDMASKS_DIR + "/"):
        i = p.find(anchor)
        if i >= 0 and (i == 0 or p[i - 1] == "/"):
            return p[i:]
    if "://" in p or p.startswith("/"):
        raise BuildError(f"{column} {p[:300]!r} is outside the mirror layout", url)
    return p


def _opt(row, col):
    v = row.get(col)
    if v is None or (isinstance(v, float) and np.isnan(v)):
        return None
    return v


def _lonlat(name: str) -> tuple[float, float]:
    lon, lat = name.split("_")[1:]
    return float(lon), float(lat)


def plan(base: str, bbox, years: list[int], limits: Limits, tmpdir: Path, retries: int = RETRIES,
         keep: dict[int, set[str]] | None = None) -> tuple[list[Remote], list[tuple[int, str]]]:
    """The files to fetch for the tiles of `years` meeting `bbox` (plus the tiles `keep[year]` names:
    those already in the year's store), and the (year, name) tiles.  Manifests are held in `tmpdir`."""
    keep = keep or {}
    keep_cells = {y: _cell(*np.array([_lonlat(n) for n in names]).T) for y, names in keep.items() if names}
    murl, rename = f"{base}/{MANIFEST}", {}
    f = fetch_table(murl, limits, tmpdir, retries)
    if f is None:
        rurl = f"{base}/{REGISTRY}"
        f = fetch_table(rurl, limits, tmpdir, retries)
        if f is None:
            raise BuildError(f"no {MANIFEST} (nor {REGISTRY}) on the mirror", murl)
        murl, rename = rurl, REGISTRY_NAMES
        required = {"year", "lon", "lat", "file_size", "scales_size"}
    else:
        required = {"year", "lon", "lat", "grid_path", "scales_path", "grid_size", "scales_size"}

    def wanted(batch):
        year, lon, lat = (_numbers(batch, c, murl) for c in ("year", "lon", "lat"))
        mask = np.isin(year, years) & cell_meets_bbox(lon, lat, bbox)
        for y, cells in keep_cells.items():
            mask |= (year == y) & np.isin(_cell(lon, lat), cells)
        return mask
    with f:
        columns = [{v: k for k, v in REGISTRY_NAMES.items()}.get(c, c) for c in GRID] if rename else GRID
        rows = [{rename.get(k, k): v for k, v in row.items()}
                for row in _select(_open(f, murl, limits, required), murl, columns, wanted)]

    lurl = f"{base}/{LANDMASKS}"
    lm_info: dict[str, tuple[int | None, str | None]] = {}
    lm = fetch_table(lurl, limits, tmpdir, retries)
    if lm is not None:
        cells = _cell([r["lon"] for r in rows], [r["lat"] for r in rows])
        with lm:
            lpf = _open(lm, lurl, limits, {"lon", "lat", "file_size"})
            for row in _select(lpf, lurl, ["lon", "lat", "file_size", "hash"],
                               lambda b: np.isin(_cell(_numbers(b, "lon", lurl), _numbers(b, "lat", lurl)), cells)):
                lm_info[grid_name(float(row["lon"]), float(row["lat"]))] = (_int(row["file_size"], "file_size", lurl),
                                                                             _opt(row, "hash"))

    remotes: dict[str, Remote] = {}
    tiles: list[tuple[int, str]] = []
    for row in rows:
        year, lon, lat = int(row["year"]), float(row["lon"]), float(row["lat"])
        name = grid_name(lon, lat)
        tdir = f"{EMBEDDINGS_DIR}/{year}/{name}"
        files = [(f"{tdir}/{name}.npy", "grid"), (f"{tdir}/{name}_scales.npy", "scales")]
        for rel, key in files:
            src = _rel(row[f"{key}_path"], base, murl, f"{key}_path") if _opt(row, f"{key}_path") else rel
            remotes[rel] = Remote(f"{base}/{src}", rel, _int(_opt(row, f"{key}_size"), f"{key}_size", murl),
                                  _opt(row, f"{key}_sha256"), "npy")
        lrel = f"{LANDMASKS_DIR}/{name}.tiff"
        lsrc = _rel(row["landmask_path"], base, murl, "landmask_path") if _opt(row, "landmask_path") else lrel
        lsize, lsha = lm_info.get(name, (_int(_opt(row, "landmask_size"), "landmask_size", murl), None))
        remotes[lrel] = Remote(f"{base}/{lsrc}", lrel, lsize, lsha, "tiff")
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
    out = sorted(remotes.values(), key=lambda r: r.rel)
    for r in out:
        check_size(r, limits)
    return out, sorted(set(tiles))


def _int(v, column: str, url: str) -> int | None:
    """A size from the manifest: a whole number of bytes, or None when not listed."""
    if v is None or (isinstance(v, float) and np.isnan(v)):
        return None
    try:
        n = int(v)
    except (TypeError, ValueError, OverflowError):
        n = -1
    if n < 0 or n != v:
        raise BuildError(f"{column} {str(v)[:40]!r} is not a size in bytes", url)
    return n
