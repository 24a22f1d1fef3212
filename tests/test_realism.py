"""The demo data behaves like real TESSERA embeddings, and its ground truth is what the world says.

Calibration (docs/demo.md): on 128 x 128 windows of demo tiles, read back from the .npy files
`builder demo` writes, the first 16 principal components hold at most about 60 % of the variance, a 16-d PCA
summary keeps at most half of each pixel's 100 nearest cosine neighbours, and the int8 vectors compress by at most
1.5x with the store's codec.  The earlier generator (`--easy`) fails every one of these: it is what the figures
were measured on before.
"""
from __future__ import annotations

import json

import numpy as np
import pytest
import tifffile
from pyproj import Transformer

from builder import demo
from builder.geotiff import read_geoinfo
from builder.synth.landscape import CHANGE_SHARE, CLASSES
from builder.tiles import EMBEDDINGS_DIR, grid_name
from realism import deflate_ratio, neighbour_overlap, pc_share, store_codec_ratio

WINDOW = 128
# One window in each demo zone: Sussex west and east of the meridian (utm30, utm31), the Cape (utm34 south).
SITES = [(-0.05, 50.95), (0.05, 50.85), (18.45, -33.95)]


def windows(root, world, year=2024):
    """(int8 (128, 128, B), float32 scales) of a 128 x 128 window of land in each site's tile, written by
    builder.demo and read back from its files."""
    out = []
    for lon, lat in SITES:
        demo.write_tile(root, year, lon, lat, WINDOW + 32, world=world, gap=False)
        name = grid_name(lon, lat)
        d = root / EMBEDDINGS_DIR / str(year) / name
        q, s = np.load(d / f"{name}.npy"), np.load(d / f"{name}_scales.npy")
        q, s = q[16:16 + WINDOW, 16:16 + WINDOW], s[16:16 + WINDOW, 16:16 + WINDOW]
        assert (s > 0).all(), f"{name}: the calibration window must be land"
        out.append((q, s))
    return out


def measures(q, s):
    f = q.astype(np.float32).reshape(-1, q.shape[-1]) * s.reshape(-1, 1)
    return pc_share(f, 16), neighbour_overlap(f, 16), store_codec_ratio(q), deflate_ratio(q)


@pytest.fixture(scope="module")
def realistic(tmp_path_factory):
    return [measures(*w) for w in windows(tmp_path_factory.mktemp("real"), demo.World())]


def test_the_demo_vectors_are_as_high_dimensional_and_incompressible_as_real_ones(realistic):
    for (share, overlap, ratio, deflate), site in zip(realistic, SITES):
        assert share <= 0.61, f"{site}: the first 16 components hold {share:.1%} of the variance"
        assert overlap <= 0.5, f"{site}: a 16-d summary keeps {overlap:.1%} of the 100 nearest neighbours"
        assert ratio <= 1.5 and deflate <= 1.5, f"{site}: compresses {ratio:.2f}x (store codec), {deflate:.2f}x (DEFLATE)"
    # not pure noise either: most of the variance is spatially structured, as in real data (DEFLATE finds some)
    assert np.median([m[3] for m in realistic]) >= 1.1


def test_the_earlier_easy_generator_fails_the_calibration(tmp_path):
    """What the figures were measured on before: nearly low-rank, so every summary looked nearly exact."""
    for (share, overlap, _, _), site in zip([measures(*w) for w in windows(tmp_path, demo.EasyWorld())], SITES):
        assert share > 0.9 and overlap > 0.8, (site, share, overlap)


def test_scales_and_norms_spread_like_a_quantised_float32_field(tmp_path):
    """Per-pixel scales are distinct float32 values (no handful of levels), and vector norms vary pixel to pixel
    by more than a few percent, as real per-pixel quantisation gives."""
    for q, s in windows(tmp_path, demo.World()):
        assert len(np.unique(s)) > 0.9 * s.size
        norms = np.linalg.norm(q.astype(np.float32) * s[..., None], axis=-1)
        assert np.std(norms) / np.mean(norms) > 0.05
        assert np.abs(q).max(axis=-1).min() == 127  # every vector's largest value is at the int8 edge


def test_the_ground_truth_is_written_beside_the_tiles_and_is_the_worlds(tmp_path):
    """Class and parcel rasters per year, change rasters between years and reference labels, from `demo`."""
    root = tmp_path / "tiles"
    world = demo.World()
    places = [(-0.05, 50.85), (18.45, -33.95)]
    demo.write_demo_tiles(root, years=(2023, 2024), px=192, places=places, dense=False)
    truth = root / demo.TRUTH_DIR
    assert [c["name"] for c in json.loads((truth / "classes.json").read_text())] == list(CLASSES)
    changed_parcels, all_parcels = set(), set()
    for lon, lat in places:
        name = grid_name(lon, lat)
        path = truth / "2024" / f"{name}_classes.tiff"
        info = read_geoinfo(str(path))
        cls24 = tifffile.imread(path)
        cls23 = tifffile.imread(truth / "2023" / f"{name}_classes.tiff")
        parcels = tifffile.imread(truth / "2024" / f"{name}_parcels.tiff")
        change = tifffile.imread(truth / "change_2023_2024" / f"{name}.tiff")
        # the class raster is the world's class at each pixel's centre (the tile's own CRS and grid)
        rows, cols = np.mgrid[0:cls24.shape[0]:7, 0:cls24.shape[1]:7]
        e, n = info.origin_x + (cols + 0.5) * 10, info.origin_y - (rows + 0.5) * 10
        glon, glat = Transformer.from_crs(info.epsg, 4326, always_xy=True).transform(e, n)
        land = cls24[rows, cols] != demo.NO_DATA
        assert land.any()
        np.testing.assert_array_equal(cls24[rows, cols][land], world.classes(glon, glat, 2024)[land])
        np.testing.assert_array_equal(cls23[rows, cols][land], world.classes(glon, glat, 2023)[land])
        ok = cls24 != demo.NO_DATA
        np.testing.assert_array_equal(change[ok], (cls24 != cls23)[ok].astype(np.uint8))
        assert (change[~ok] == demo.NO_DATA).all()
        for p in np.unique(parcels[ok]):
            all_parcels.add(int(p))
            inside = ok & (parcels == p)
            if change[inside].mean() > 0.5:
                changed_parcels.add(int(p))
    share = len(changed_parcels) / len(all_parcels)
    assert 0.25 * CHANGE_SHARE < share < 3 * CHANGE_SHARE, share  # a known share of parcels changes class
    labels = json.loads((truth / "labels_2024.geojson").read_text())
    assert labels["type"] == "FeatureCollection" and labels["features"]
    for f in labels["features"][::25]:  # each reference label's class is the world's there
        lon, lat = f["geometry"]["coordinates"]
        assert CLASSES[int(world.classes(np.array([lon]), np.array([lat]), 2024)[0])] == f["properties"]["class"]
