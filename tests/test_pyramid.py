"""global_rgb: sparse level 0 reprojected from the zone previews, 2x2 mean levels, multiscales metadata."""
from __future__ import annotations

import numpy as np
import pytest
import zarr
from pyproj import Transformer

from builder.pyramid import projected


def test_multiscales_layout(store):
    g = zarr.open_group(store / "global_rgb", mode="r")
    layout = g.attrs["multiscales"]["layout"]
    assert layout[0]["spatial:shape"] == [1_800_000, 3_600_000]
    assert layout[0]["spatial:transform"] == [0.0001, 0.0, -180.0, 0.0, -0.0001, 90.0]
    for k in range(1, len(layout)):
        assert layout[k]["derived_from"] == str(k - 1) and layout[k]["resampling_method"] == "mean"
        assert layout[k]["transform"] == {"scale": [2.0, 2.0], "translation": [0.0, 0.0]}
        assert g[f"{k}/rgb"].shape[:2] == tuple(layout[k]["spatial:shape"])
    assert g.attrs["proj:code"] == "EPSG:4326"


def _chunk_keys(level_dir) -> set[tuple[int, int]]:
    return {(int(p.parts[-3]), int(p.parts[-2])) for p in (level_dir / "c").rglob("*") if p.is_file()}


def test_level0_is_sparse(store):
    """Level-0 chunk files exist exactly where a valid zone pixel lies (to within the chunk next door)."""
    root = zarr.open_group(store, mode="r")
    level = store / "global_rgb" / "0" / "rgb"
    files = _chunk_keys(level)
    want: set[tuple[int, int]] = set()
    for name in ("utm30", "utm31", "utm34"):
        z = root[name]
        t = z.attrs["spatial:transform"]
        rows, cols = np.nonzero(z["rgb"][..., 3] == 255)
        lon, lat = Transformer.from_crs(z.attrs["proj:code"], 4326, always_xy=True).transform(
            t[2] + (cols + 0.5) * 10, t[5] - (rows + 0.5) * 10)
        want |= set(zip((np.floor((90 - lat) / 0.0001).astype(int) // 256).tolist(),
                        (np.floor((lon + 180) / 0.0001).astype(int) // 256).tolist()))
    near = {(i + di, j + dj) for i, j in want for di in (-1, 0, 1) for dj in (-1, 0, 1)}
    assert want <= files <= near, (sorted(want - files)[:5], sorted(files - near)[:5])
    assert len(files) < 200  # of 98 million possible chunks
    assert sum(p.stat().st_size for p in level.rglob("*") if p.is_file()) < 10**6
    lvl = root["global_rgb/0/rgb"]
    for i, j in sorted(files):  # no chunk file without a visible pixel
        assert lvl[i * 256:(i + 1) * 256, j * 256:(j + 1) * 256, 3].any(), (i, j)
    assert not lvl[0:256, 0:256].any()  # and no colour where no zone is


def test_each_level_records_exactly_the_chunks_it_has_files_for(store):
    """The readers ask only for the chunks a level records (chunks_present: [row, col0, col1) runs): a chunk
    missing from the record would never be drawn, one recorded without a file is a failed request."""
    levels = sorted((store / "global_rgb").glob("[0-9]*"), key=lambda p: int(p.name))
    assert len(levels) >= 8
    for level in levels:
        runs = zarr.open_array(level / "rgb", mode="r").attrs["chunks_present"]
        listed = [(i, j) for i, a, b in runs for j in range(a, b)]
        assert len(listed) == len(set(listed)) and listed == sorted(listed), level.name
        assert set(listed) == _chunk_keys(level / "rgb"), level.name
        assert listed, level.name


def test_level0_pixels_come_from_the_zone_preview(store):
    root = zarr.open_group(store, mode="r")
    z = root["utm34"]
    t = z.attrs["spatial:transform"]
    rgb = z["rgb"][:]
    valid = rgb[..., 3] == 255
    interior = valid.copy()  # pixels whose 3x3 neighbourhood is valid: away from coast and tile edges
    for dy in (-1, 0, 1):
        for dx in (-1, 0, 1):
            interior &= np.roll(np.roll(valid, dy, 0), dx, 1)
    rows, cols = np.nonzero(interior)
    pick = np.linspace(0, len(rows) - 1, 50).astype(int)
    e = t[2] + (cols[pick] + 0.5) * 10
    n = t[5] - (rows[pick] + 0.5) * 10
    lon, lat = Transformer.from_crs(32734, 4326, always_xy=True).transform(e, n)
    i = np.floor((90 - lat) / 0.0001).astype(int)
    j = np.floor((lon + 180) / 0.0001).astype(int)
    lvl = root["global_rgb/0/rgb"]
    got = np.array([lvl[a, b] for a, b in zip(i, j)])
    # the level-0 pixel containing a zone pixel centre shows a zone pixel within one pixel of it
    assert (got[:, 3] == 255).all()
    diffs = np.abs(got[:, :3].astype(int) - rgb[rows[pick], cols[pick], :3].astype(int)).max(axis=1)
    assert np.median(diffs) <= 40


def test_each_level_is_the_alpha_weighted_2x2_mean_of_the_one_below(store):
    g = zarr.open_group(store / "global_rgb", mode="r")
    files = sorted(p for p in (store / "global_rgb" / "1" / "rgb" / "c").rglob("*") if p.is_file())
    ci, cj = int(files[0].parts[-3]), int(files[0].parts[-2])
    up = g["1/rgb"][ci * 256:(ci + 1) * 256, cj * 256:(cj + 1) * 256]
    below = g["0/rgb"][ci * 512:(ci + 1) * 512, cj * 512:(cj + 1) * 512].astype(np.float64)
    a = below[..., 3]
    for y, x in np.argwhere(up[..., 3] > 0)[:200]:
        blk = below[2 * y:2 * y + 2, 2 * x:2 * x + 2]
        w = a[2 * y:2 * y + 2, 2 * x:2 * x + 2]
        want = (blk[..., :3] * w[..., None]).sum(axis=(0, 1)) / w.sum()
        assert np.abs(up[y, x, :3] - want).max() <= 0.5 + 1e-9
        assert abs(up[y, x, 3] - w.sum() / 4) <= 0.5 + 1e-9


@pytest.mark.parametrize("lon0, lat0, epsg", [(0.55, 52.05, 32631), (11.05, 0.05, 32632), (18.4, -33.9, 32734),
                                              (5.9, 70.0, 32631), (6.5, 60.0, 32631)])
def test_level0_pixel_centres_are_placed_within_a_centimetre_of_pyproj(lon0, lat0, epsg):
    """Level 0 interpolates the UTM positions of a chunk's pixel centres between reprojected knots
    (builder.pyramid.projected): every centre, here at 52 N, the equator, 34 S, near a zone's edge at 70 N
    and half a degree outside it, lies within 1 cm of where pyproj puts it (zone pixels are 10 m)."""
    lon = lon0 + (np.arange(256) + 0.5) * 0.0001
    lat = lat0 - (np.arange(256) + 0.5) * 0.0001
    to_utm = Transformer.from_crs(4326, epsg, always_xy=True)
    e, n = projected(to_utm, lon, lat)
    want_e, want_n = to_utm.transform(*np.meshgrid(lon, lat))
    assert e.shape == n.shape == (256, 256)
    assert np.hypot(e - want_e, n - want_n).max() < 0.01
