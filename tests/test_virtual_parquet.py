"""Virtual indexes in every container and layout: JSON and Parquet, Zarr v2 and v3, absolute and templated.

Every value is compared with the source stores as zarr-python and xarray read them (never with what the
index writer computed), on real stores built by the CLI.
"""
from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
import xarray as xr
import zarr

from builder.virtual.parsers import PyramidParser, SparseChunkManifest, YearsParser
from builder.virtual.writer import open_index, write_tile_index
from test_virtual import ESCAPES, two_years  # noqa: F401  (the module-scoped two-year stores fixture)

MATRIX = [(ext, fmt, templated) for ext in ("json", "parquet") for fmt in (2, 3) for templated in (False, True)]
# xarray reads a Zarr v2 fill_value as CF _FillValue and masks it (int8 embeddings 0 -> NaN); v3 does not.
# (open_zarr's use_zarr_fill_value_as_mask=False does not reach the backend in xarray 2026.9.)
XR = {2: dict(mask_and_scale=False), 3: {}}
IDS = [f"{ext}-v{fmt}-{'templated' if t else 'absolute'}" for ext, fmt, t in MATRIX]


def _write_and_open(store, out: Path, fmt: int, templated: bool, src: Path, moved: Path, allow, **kw):
    """Write `store` to `out`; a templated index is opened after moving `src` to `moved` (base = the new place)."""
    write_tile_index(store, str(out), zarr_format=fmt, template_base="{{base}}" if templated else None, **kw)
    if templated:
        shutil.move(str(src), str(moved))
        return open_index(str(out), base=f"{moved}/"), moved
    return open_index(str(out), allow=allow), src


def _source_zone(data: Path, year: int, zone: str = "utm30"):
    return zarr.open_group(data / f"{year}.zarr" / zone, mode="r")


# ------------------------------------------------------------------ years --
@pytest.mark.parametrize("ext,fmt,templated", MATRIX, ids=IDS)
def test_years_index_reads_the_year_stores(two_years, tmp_path, ext, fmt, templated):  # noqa: F811
    _, stores = two_years
    data = tmp_path / "data"
    shutil.copytree(stores, data)
    parsed = YearsParser()([str(data / "2023.zarr"), str(data / "2024.zarr")])
    g, data = _write_and_open(parsed, tmp_path / f"years.{ext}", fmt, templated, data, tmp_path / "moved",
                              [str(data)])
    zones = {y: _source_zone(data, y) for y in (2023, 2024)}
    # The stack spans the union of the years' grids (from the source stores' own transforms).
    top = max(z.attrs["spatial:transform"][5] for z in zones.values())
    left = min(z.attrs["spatial:transform"][2] for z in zones.values())
    emb, scl = g["utm30/embeddings"], g["utm30/scales"]
    assert list(g["utm30/year"][:]) == [2023, 2024]
    ds = xr.open_zarr(g.store, group="utm30", zarr_format=fmt, consolidated=False, chunks=None, **XR[fmt])
    for i, (year, z) in enumerate(zones.items()):
        t = z.attrs["spatial:transform"]
        r0, c0 = round((top - t[5]) / 10), round((t[2] - left) / 10)
        # a 64 x 64 window (256 inner chunks) from this year's first valid pixel, found in its first shard file
        sr, sc = min((int(p.parts[-2]), int(p.parts[-1])) for p in
                     (data / f"{year}.zarr" / "utm30" / "scales" / "c").glob("*/*"))
        va, vb = np.argwhere(~np.isnan(z["scales"][sr * 256:(sr + 1) * 256, sc * 256:(sc + 1) * 256]))[0]
        a, b = sr * 256 + int(va) // 4 * 4, sc * 256 + int(vb) // 4 * 4
        win = (slice(a, a + 64), slice(b, b + 64))
        at = (i, slice(r0 + a, r0 + a + 64), slice(c0 + b, c0 + b + 64))
        assert not np.isnan(z["scales"][win]).all()
        np.testing.assert_array_equal(emb[at], z["embeddings"][win])
        np.testing.assert_array_equal(scl[at], z["scales"][win])
        np.testing.assert_array_equal(g["utm30/northing"][r0:r0 + z["northing"].shape[0]], z["northing"][:])
        north = (i, slice(max(r0 - 64, 0), r0), slice(c0, c0 + 64))  # nothing north of this year's grid
        assert np.isnan(scl[north]).all() and not emb[north].any()
        # xarray, by coordinate value: the same window of the index's year equals the year's store
        want = xr.open_zarr(data / f"{year}.zarr", group="utm30", drop_variables=["rgb"], chunks=None).isel(
            northing=win[0], easting=win[1])
        n, e = want.northing.values, want.easting.values
        got = ds.sel(year=year, northing=slice(n[0], n[-1]), easting=slice(e[0], e[-1]))
        np.testing.assert_array_equal(got.northing.values, n)
        np.testing.assert_array_equal(got["embeddings"].values, want["embeddings"].values)
        np.testing.assert_array_equal(got["scales"].values, want["scales"].values)
    assert any(r0 > 0 for r0 in [round((top - z.attrs["spatial:transform"][5]) / 10) for z in zones.values()])


# ---------------------------------------------------------------- pyramid --
def _chunk_files(store: Path, level: str) -> list[tuple[int, int]]:
    base = store / "global_rgb" / level / "rgb" / "c"
    return sorted((int(p.parts[-3]), int(p.parts[-2])) for p in base.rglob("*") if p.is_file())


@pytest.mark.parametrize("ext,fmt,templated", MATRIX, ids=IDS)
def test_pyramid_index_reads_the_store(store, tmp_path, ext, fmt, templated):
    copy = tmp_path / "2024.zarr"
    shutil.copytree(store, copy)
    parsed = PyramidParser()(str(copy))
    # a templated index is relative to the sources' common directory: here the pyramid group
    g, where = _write_and_open(parsed, tmp_path / f"pyr.{ext}", fmt, templated, copy / "global_rgb",
                               tmp_path / "moved_rgb", [str(copy)])
    src = zarr.open_group(where, mode="r")
    assert g.attrs["multiscales"] == src.attrs["multiscales"]
    levels = [item["asset"] for item in src.attrs["multiscales"]["layout"]]
    assert sorted(g.group_keys()) == sorted(levels)
    for level in levels:
        assert list(g[level].array_keys()) == ["rgb"]  # a level's group metadata is not an array
        a, b = g[f"{level}/rgb"], src[f"{level}/rgb"]
        assert a.shape == b.shape
        files = sorted((int(p.parts[-3]), int(p.parts[-2])) for p in (where / level / "rgb" / "c").rglob("*")
                       if p.is_file())
        assert files
        for i, j in files + [(files[0][0], files[0][1] + 3)]:  # every written chunk, and one that is absent
            box = (slice(i * 256, (i + 1) * 256), slice(j * 256, (j + 1) * 256))
            np.testing.assert_array_equal(a[box], b[box])
    top = levels[-1]
    ds = xr.open_zarr(g.store, group=top, zarr_format=fmt, consolidated=False, chunks=None, **XR[fmt])
    np.testing.assert_array_equal(ds["rgb"].values, src[f"{top}/rgb"][:])


# ------------------------------------------------------ Parquet containers --
def _refs_of(store, fmt: int, tmp_path: Path) -> dict:
    out = tmp_path / f"refs-v{fmt}.json"
    write_tile_index(store, str(out), zarr_format=fmt)
    return json.loads(out.read_text())["refs"]


def _kerchunk_positional(refs: dict, out: Path, engine: str) -> None:
    """A Parquet index exactly as fsspec/kerchunk write one (positional records), with the given engine."""
    from fsspec.implementations.reference import LazyReferenceMapper
    m = LazyReferenceMapper.create(root=str(out), record_size=100_000, engine=engine)
    for k in sorted(refs):
        m[k] = refs[k]
    m.flush()


def _check_pyramid(g, store: Path) -> None:
    src = zarr.open_group(store / "global_rgb", mode="r")
    levels = [item["asset"] for item in src.attrs["multiscales"]["layout"]]
    assert sorted(g.group_keys()) == sorted(levels)
    for level in ("0", levels[-1]):
        assert list(g[level].array_keys()) == ["rgb"]
        files = _chunk_files(store, level)
        i, j = files[0]
        box = (slice(i * 256, (i + 1) * 256), slice(j * 256 - 256, (j + 2) * 256))  # written and absent chunks
        np.testing.assert_array_equal(g[f"{level}/rgb"][box], src[f"{level}/rgb"][box])


@pytest.mark.parametrize("engine", ["pyarrow", "fastparquet"])
@pytest.mark.parametrize("fmt", [2, 3])
def test_parquet_index_reads_the_same_whichever_engine_wrote_it(store, tmp_path, engine, fmt):
    out = tmp_path / f"pyr-{engine}.parquet"
    write_tile_index(PyramidParser()(str(store)), str(out), zarr_format=fmt, parquet_engine=engine)
    _check_pyramid(open_index(str(out), allow=[str(store)]), store)
    # inline chunks (coordinates) are rows with a null path: a one-year stack of the store has them
    out = tmp_path / f"one-{engine}.parquet"
    write_tile_index(YearsParser()([str(store)]), str(out), zarr_format=fmt, parquet_engine=engine)
    g = open_index(str(out), allow=[str(store)])
    for zone in ("utm30", "utm34"):
        z = zarr.open_group(store / zone, mode="r")
        for coord in ("easting", "northing", "band"):
            np.testing.assert_array_equal(g[f"{zone}/{coord}"][:], z[coord][:])
        np.testing.assert_array_equal(g[f"{zone}/scales"][0, :64, :64], z["scales"][:64, :64])


@pytest.mark.parametrize("engine", ["pyarrow", "fastparquet"])
def test_kerchunk_written_parquet_decodes_nulls_and_lists_levels(store, tmp_path, engine):
    """Indexes written by fsspec/kerchunk (positional records, either engine): absent chunks are null rows,
    which the two engines decode differently through pandas; each must read as the fill value."""
    out = tmp_path / f"kerchunk-{engine}.parquet"
    _kerchunk_positional(_refs_of(PyramidParser()(str(store)), 2, tmp_path), out, engine)
    _check_pyramid(open_index(str(out), allow=[str(store)]), store)


@pytest.mark.parametrize("fmt", [2, 3])
def test_parquet_index_stores_only_the_written_chunks(store, tmp_path, fmt):
    """A sparse level costs its chunks, not its chunk slots: level 0's references spread one per 100,000-slot
    record over its 98 M slots are written as exactly that many rows, and read back as the source chunk."""
    parsed = PyramidParser()(str(store))
    arr = parsed._group.groups["0"].arrays["rgb"]
    entries = arr.manifest.dict()
    (key0, ref0), = list(entries.items())[:1]
    grid = arr.manifest.shape_chunk_grid
    spread = dict(entries)
    for n in range(0, grid[0] * grid[1], grid[0] * grid[1] // 400):  # 400 chunks far apart
        spread[f"{n // grid[1]}.{n % grid[1]}.0"] = ref0
    from virtualizarr.manifests import ManifestArray, ManifestGroup, ManifestStore
    levels = dict(parsed._group.groups)
    levels["0"] = ManifestGroup(arrays={"rgb": ManifestArray(arr.metadata, SparseChunkManifest(spread, grid))})
    parsed = ManifestStore(ManifestGroup(groups=levels, attributes=dict(parsed._group.metadata.attributes)))
    out = tmp_path / "spread.parquet"
    write_tile_index(parsed, str(out), zarr_format=fmt)
    n_refs = sum(len(g.arrays["rgb"].manifest) for g in levels.values())
    assert n_refs > 400
    files = list(out.rglob("*.parq"))
    assert len([f for f in files if f.parent.parent.name == "0"]) >= 400  # one record file per touched record
    assert sum(pq.ParquetFile(f).metadata.num_rows for f in files) == n_refs
    g = open_index(str(out), allow=[str(store)])
    i0, j0 = (int(x) for x in key0.split(".")[:2])
    src = zarr.open_group(store / "global_rgb", mode="r")["0/rgb"][i0 * 256:(i0 + 1) * 256, j0 * 256:(j0 + 1) * 256]
    n = grid[0] * grid[1] // 400 * 123
    i, j = n // grid[1], n % grid[1]
    np.testing.assert_array_equal(g["0/rgb"][i * 256:(i + 1) * 256, j * 256:(j + 1) * 256], src)


def test_templated_parquet_needs_base(two_years, tmp_path):  # noqa: F811
    _, stores = two_years
    out = tmp_path / "rel.parquet"
    write_tile_index(YearsParser()([str(stores / "2023.zarr"), str(stores / "2024.zarr")]), str(out),
                     template_base="{{base}}")
    with pytest.raises(ValueError, match="pass base") as e:
        open_index(str(out))
    assert "\n" not in str(e.value)


def _parquet_record_files(out: Path) -> list[Path]:
    return sorted(p for p in out.rglob("refs.*.parq"))


@pytest.mark.parametrize("case", list(ESCAPES))
def test_parquet_references_outside_base_are_refused_unless_allowed(two_years, tmp_path, case):  # noqa: F811
    _, stores = two_years
    moved = tmp_path / "moved"
    shutil.copytree(stores, moved)
    out = tmp_path / "rel.parquet"
    write_tile_index(YearsParser()([str(moved / "2023.zarr"), str(moved / "2024.zarr")]), str(out),
                     template_base="{{base}}", zarr_format=3)
    victim = next(f for f in _parquet_record_files(out) if "embeddings" in str(f))
    t = pq.read_table(victim)
    paths = t.column("path").to_pylist()
    row = next(i for i, p in enumerate(paths) if p)
    url, prefix = ESCAPES[case]
    paths[row] = url
    pq.write_table(t.set_column(t.column_names.index("path"), "path", pa.array(paths, pa.string())), victim)
    with pytest.raises(ValueError) as e:
        open_index(str(out), base=str(moved) + "/")
    msg = str(e.value)
    assert "utm30/embeddings/c/" in msg and url in msg and "allow" in msg and "\n" not in msg, msg
    g = open_index(str(out), base=str(moved) + "/", allow=[prefix])  # the caller's explicit consent
    assert list(g["utm30/year"][:]) == [2023, 2024]


@pytest.mark.parametrize("how", ["bytes", "rows"])
def test_an_oversized_parquet_record_file_is_refused_in_one_line(store, tmp_path, how):
    """A record file is data the index's writer may not have bounded, as its .zmetadata: one larger than the read
    of a record file (INDEX_RECORD_MAX), or claiming more rows than its record holds, is refused before it is
    decoded, in one line naming the file, instead of being read whole into memory."""
    from builder.core.bounds import INDEX_RECORD_MAX
    out = tmp_path / "big.parquet"
    write_tile_index(PyramidParser()(str(store)), str(out), zarr_format=3)
    victim = next(f for f in _parquet_record_files(out) if f.parent.parent.name == "0")
    if how == "bytes":
        with open(victim, "r+b") as f:  # a sparse file: no 64 MiB written to disk
            f.truncate(INDEX_RECORD_MAX + 1)
    else:
        size = json.loads((out / ".zmetadata").read_text())["sparse_record_size"]
        t = pq.read_table(victim)
        pq.write_table(pa.concat_tables([t] * (size // t.num_rows + 1)), victim)
    with pytest.raises(ValueError) as e:
        open_index(str(out), allow=[str(store)])
    msg = str(e.value)
    assert str(victim.relative_to(out)) in msg and "\n" not in msg, msg
    assert ("bytes" in msg) if how == "bytes" else ("rows" in msg), msg


@pytest.mark.parametrize("encoding", ["dictionary", "delta"])
def test_a_parquet_record_file_that_expands_on_decoding_is_refused_in_one_line(store, tmp_path, encoding):
    """A record file small on disk and in its footer's sizes whose `raw` column expands on decoding (one value
    a dictionary page holds once, or that DELTA_BYTE_ARRAY repeats as a shared prefix, on every row) is refused
    in one line naming the file, before its values are materialised."""
    from builder.core.bounds import INDEX_RECORD_MAX
    out = tmp_path / "bomb.parquet"
    write_tile_index(PyramidParser()(str(store)), str(out), zarr_format=3)
    victim = next(f for f in _parquet_record_files(out) if f.parent.parent.name == "0")
    rows = json.loads((out / ".zmetadata").read_text())["sparse_record_size"]  # as many rows as a record holds
    first = int(victim.name.split(".")[1]) * rows
    value = b"x" * (INDEX_RECORD_MAX // rows + 64)  # rows x value: more than INDEX_RECORD_MAX decoded
    table = pa.table({"chunk": pa.array(range(first, first + rows), pa.int64()),
                      "path": pa.array([None] * rows, pa.string()),
                      "offset": pa.array([0] * rows, pa.int64()), "size": pa.array([0] * rows, pa.int64()),
                      "raw": pa.array([value] * rows, pa.binary())})
    if encoding == "dictionary":
        pq.write_table(table, victim, compression="zstd")
    else:
        pq.write_table(table, victim, compression="zstd", use_dictionary=False,
                       column_encoding={"raw": "DELTA_BYTE_ARRAY"})
    assert victim.stat().st_size < INDEX_RECORD_MAX // 64  # small on disk: only decoding expands it
    with pytest.raises(ValueError) as e:
        open_index(str(out), allow=[str(store)])
    msg = str(e.value)
    assert str(victim.relative_to(out)) in msg and "\n" not in msg, msg
    if encoding == "dictionary":
        assert "decoded" in msg, msg


@pytest.mark.parametrize("size", [0, -1, 2.5, "100000", 10**12])
def test_a_parquet_index_whose_record_size_is_not_a_bounded_count_is_refused_in_one_line(store, tmp_path, size):
    """`.zmetadata`'s record size decides which record holds a chunk and how many rows a record file may have:
    one that is not a whole number from 1 to INDEX_RECORD_ROWS_MAX is refused in one line naming the file,
    never truncated (2.5 -> 2) or believed (rows bounded by 10**12 are not bounded)."""
    out = tmp_path / "size.parquet"
    write_tile_index(PyramidParser()(str(store)), str(out), zarr_format=3)
    met = json.loads((out / ".zmetadata").read_text())
    met["sparse_record_size"] = size
    (out / ".zmetadata").write_text(json.dumps(met))
    with pytest.raises(ValueError) as e:
        open_index(str(out), allow=[str(store)])
    msg = str(e.value)
    assert ".zmetadata" in msg and "record_size" in msg and "\n" not in msg, msg


@pytest.mark.parametrize("column", [pa.array([[None]], pa.list_(pa.string())), pa.array([7], pa.int64())],
                         ids=["list", "int"])
def test_a_parquet_record_file_whose_path_is_not_text_is_refused_in_one_line(store, tmp_path, column):
    """A path column of another type than text (whose size a nested list's values could multiply) is refused in
    one line naming the file, never handed on as a URL."""
    out = tmp_path / "typed.parquet"
    write_tile_index(PyramidParser()(str(store)), str(out), zarr_format=3)
    victim = next(f for f in _parquet_record_files(out) if f.parent.parent.name == "0")
    t = pq.read_table(victim).slice(0, 1)
    pq.write_table(t.set_column(t.column_names.index("path"), "path", column), victim)
    with pytest.raises(ValueError) as e:
        open_index(str(out), allow=[str(store)])
    msg = str(e.value)
    assert str(victim.relative_to(out)) in msg and "path" in msg and "\n" not in msg, msg
