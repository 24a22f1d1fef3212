import math

import numpy as np
import pytest

from builder.core import convention as conv


def test_dequantise_is_int8_times_scale_and_nan_is_no_data():
    e = np.array([[[1, -2, 127]], [[5, 5, 5]]], dtype=np.int8)  # (2, 1, 3)
    s = np.array([[0.5], [np.nan]], dtype=np.float32)
    out = conv.dequantise(e, s)
    assert out.dtype == np.float32
    np.testing.assert_array_equal(out[0, 0], [0.5, -1.0, 63.5])
    assert np.isnan(out[1, 0]).all()
    zero = conv.dequantise(np.array([3, 4], dtype=np.int8), np.float32(0.0))
    np.testing.assert_array_equal(zero, [0.0, 0.0])
    with pytest.raises(TypeError):
        conv.dequantise(np.zeros(3, dtype=np.int16), np.float32(1))


def test_zone_names_and_epsg_codes():
    assert conv.zone_group_name(7) == "utm07"
    assert conv.parse_zone_group_name("utm30") == 30
    assert conv.parse_zone_group_name("utm3") is None
    assert conv.proj_code(30, False) == "EPSG:32630"
    assert conv.proj_code(34, True) == "EPSG:32734"
    assert conv.zone_from_epsg(32734) == (34, True)
    for bad in (4326, 3857, 32600, 32661):
        with pytest.raises(ValueError):
            conv.zone_from_epsg(bad)


def test_coordinates_follow_the_pixel_centre_formula():
    np.testing.assert_array_equal(conv.easting_coords(500000.0, 3), [500005.0, 500015.0, 500025.0])
    np.testing.assert_array_equal(conv.northing_coords(6200000.0, 2), [6199995.0, 6199985.0])
    a = conv.spatial_attrs(500000.0, 6200000.0, 5000, 6000)
    assert a["spatial:bbox"] == [500000.0, 6150000.0, 560000.0, 6200000.0]  # the convention's example


def test_registration_and_fill_rules():
    attrs = conv.zone_attrs(year=2024, zone=30, south=False, n_bands=128, n_tiles=1, model_version="1.0",
                            build_version="x", has_rgb=True, origin_e=0.0, origin_n=0.0, height=256, width=256)
    assert conv.registered(attrs, conv.ZONE_CONVENTIONS) == []
    assert conv.registered({"zarr_conventions": []}, conv.ZONE_CONVENTIONS) == ["tessera:", "proj:", "spatial:"]
    assert math.isnan(conv.ZONE_ARRAYS["scales"]["fill"])


def test_the_zone_pixel_formulas_invert_each_other():
    from builder.core.grid import ZoneGrid
    g = ZoneGrid(30, False, 500000.0, 5800000.0, 512, 768)
    # pixel (2, 3) covers easting [500030, 500040) and northing (5799970, 5799980]: by hand from the convention
    assert tuple(map(float, g.corner(2, 3))) == (500030.0, 5799980.0)
    assert tuple(map(float, g.centre(2, 3))) == (500035.0, 5799975.0)
    row, col = g.rowcol([500030.0, 500039.999, 500040.0, np.nan], [5799980.0, 5799970.001, 5799970.0, 1.0])
    assert row.tolist() == [2, 2, 3, -1] and col.tolist() == [3, 3, 4, -1]
    assert g.contains(row, col).tolist() == [True, True, True, False]
    rr, cc = np.meshgrid(np.arange(0, 512, 37), np.arange(0, 768, 41), indexing="ij")
    back = g.rowcol(*g.centre(rr, cc))
    assert (back[0] == rr).all() and (back[1] == cc).all()
    assert g.window(500005.0, 5799000.0, 500021.0, 5799995.0) == (0, 100, 0, 3)
    assert g.window(400000.0, 5799000.0, 400010.0, 5799995.0) is None


def test_global_level_chunks_match_a_brute_force_count():
    res, chunk, shape = 0.0016, 256, (112500, 225000)  # a coarse global level
    box = (-1.3, 50.2, 0.7, 51.9)
    got = set(conv.global_chunks(box, res, shape, chunk))
    lon = np.arange(box[0], box[2] + 1e-9, res / 4)  # brute force: every point of the box, quarter-pixel steps
    lat = np.arange(box[1], box[3] + 1e-9, res / 4)
    lo, la = np.meshgrid(lon, lat)
    row, col = conv.global_rowcol(lo.ravel(), la.ravel(), res)
    assert got == set(zip((row // chunk).tolist(), (col // chunk).tolist()))
    lon_c, lat_c = conv.global_centres(10, 20, 3, 0.5)
    assert lon_c.tolist() == [-180 + 10.25, -180 + 10.75, -180 + 11.25] and lat_c.tolist() == [90 - 5.25, 90 - 5.75, 90 - 6.25]


def test_where_zones_overlap_the_nearest_central_meridian_wins_and_the_first_listed_of_equals():
    """builder.core.geometry.NearestZone: zone 30's meridian is -3, zone 31's is 3 (UTM: -183 + 6 n)."""
    from builder.core.geometry import NearestZone, meridian_distance
    lon = np.array([-1.0, 1.0, 0.0, 2.0, 50.0])
    pick = NearestZone(lon)
    in30 = np.array([True, True, True, False, False])
    in31 = np.array([True, True, True, True, False])
    assert pick.offer(0, 30, in30).tolist() == [True, True, True, False, False]
    assert pick.offer(1, 31, in31).tolist() == [False, True, False, True, False]  # 0.0: equal, the first keeps it
    assert pick.which.tolist() == [0, 1, 0, 1, -1]
    assert meridian_distance([-1.0, 4.5], 31).tolist() == [4.0, 1.5]
