"""Embedding scatter on CPython: the projection against scikit-learn's PCA on the same pixels (zarr-python
reads), and the links between points and map pixels (brushing, hovering, labelling)."""
from __future__ import annotations

import numpy as np

from conftest import run_async
from tools_util import centre_of_data, opened, pixel_lonlat, zone_vectors

HOSTILE = "<img src=x onerror=alert(1)>"


def aligned(got: np.ndarray, want: np.ndarray) -> np.ndarray:
    """`want` with each column's sign flipped to match `got` (a principal component's sign is arbitrary)."""
    return want * np.sign((got * want).sum(axis=0))


def sklearn_fit(X):
    from sklearn.decomposition import PCA
    return PCA(n_components=2).fit(X.astype(np.float64))


def test_projection_matches_sklearn_pca_on_every_pixel(store):
    async def run():
        state = await opened(store)
        state.centre_view(*centre_of_data(store, "utm31"), 2500)
        p = await state.tools.scatter.compute(max_points=100_000)
        r0, r1, c0, c1 = p.region.primary.window
        sub = zone_vectors(store, "utm31")[r0:r1, c0:c1]
        valid = np.isfinite(sub[..., 0])
        assert len(p.rows) == valid.sum() > 1000  # every valid pixel: no sample
        rows, cols = np.nonzero(valid)  # row-major, like the tool's points
        np.testing.assert_array_equal(p.rows, rows)
        np.testing.assert_array_equal(p.cols, cols)
        pca = sklearn_fit(sub[valid])
        want = pca.transform(sub[valid].astype(np.float64))
        scale = np.abs(want).max()
        np.testing.assert_allclose(p.xy, aligned(p.xy, want), rtol=0, atol=1e-4 * scale)
        np.testing.assert_allclose(p.explained, pca.explained_variance_ratio_, rtol=1e-4)
        assert "sample" not in state.status
    run_async(run())


def test_sample_brush_hover_and_label(store):
    async def run():
        state = await opened(store)
        state.centre_view(*centre_of_data(store, "utm31"), 2500)
        sc = state.tools.scatter
        p = await sc.compute(max_points=400, seed=5)
        r0, r1, c0, c1 = p.region.primary.window
        zv = zone_vectors(store, "utm31")
        n_valid = int(np.isfinite(zv[r0:r1, c0:c1, 0]).sum())
        assert len(p.rows) == 400 and p.n_valid == n_valid > 400
        assert f"400 points drawn, a seeded sample (seed 5) of {n_valid:,} valid pixels" in state.status
        pts = {(int(r), int(c)) for r, c in zip(p.rows, p.cols)}
        assert len(pts) == 400  # distinct pixels
        X = np.stack([zv[r0 + r, c0 + c] for r, c in zip(p.rows, p.cols)])
        assert np.isfinite(X).all()
        pca = sklearn_fit(X)  # fitted on the same sampled pixels, read independently
        want = aligned(p.xy, pca.transform(X.astype(np.float64)))
        scale = np.abs(want).max()
        np.testing.assert_allclose(p.xy, want, rtol=0, atol=1e-4 * scale)

        # brushing a box: the points inside (by scikit-learn's coordinates) and nothing else light up on the map
        xs = np.sort(want[:, 0])
        ys = np.sort(want[:, 1])
        box = ((xs[100] + xs[101]) / 2, (xs[300] + xs[301]) / 2, (ys[50] + ys[51]) / 2, (ys[350] + ys[351]) / 2)
        inside = np.nonzero((want[:, 0] > box[0]) & (want[:, 0] < box[1]) & (want[:, 1] > box[2])
                            & (want[:, 1] < box[3]))[0]
        assert 20 < len(inside) < 200
        layer = sc.select(p.in_box(*box))
        assert sc.selected == inside.tolist() and state.tools.shown == "scatter"
        assert int((layer.values == 1).sum()) == len(inside)
        valid_here = np.isfinite(zv[r0:r1, c0:c1, 0])
        np.testing.assert_array_equal(np.isfinite(layer.values), valid_here)  # 0 on the other pixels with data
        for i in inside:
            lon, lat = pixel_lonlat(store, "utm31", r0 + int(p.rows[i]), c0 + int(p.cols[i]))
            assert layer.value_at(lon, lat) == 1.0
            assert state.tools.layer("scatter").value_at(lon, lat) == 1.0
        outside = next(i for i in range(400) if i not in set(inside))
        assert layer.value_at(*pixel_lonlat(store, "utm31", r0 + int(p.rows[outside]), c0 + int(p.cols[outside]))) == 0.0
        nr, nc = np.argwhere(~valid_here)[0]
        assert layer.value_at(*pixel_lonlat(store, "utm31", r0 + int(nr), c0 + int(nc))) is None

        # hovering a map pixel: a drawn point -> its index; an undrawn valid pixel -> its projection; no data -> None
        k = int(inside[0])
        got = sc.hover_at(*pixel_lonlat(store, "utm31", r0 + int(p.rows[k]), c0 + int(p.cols[k])))
        assert got["index"] == k and np.allclose([got["x"], got["y"]], want[k], atol=1e-4 * scale)
        vr, vc = next((r, c) for r, c in zip(*np.nonzero(np.isfinite(zv[r0:r1, c0:c1, 0]))) if (r, c) not in pts)
        got = sc.hover_at(*pixel_lonlat(store, "utm31", r0 + int(vr), c0 + int(vc)))
        v = zv[r0 + vr, c0 + vc].astype(np.float64)[None]
        exp = pca.transform(v)[0] * np.sign((p.xy * pca.transform(X.astype(np.float64))).sum(axis=0))
        assert got["index"] is None and np.allclose([got["x"], got["y"]], exp, atol=1e-4 * scale)
        nr, nc = np.argwhere(~np.isfinite(zv[..., 0]))[0]
        assert sc.hover_at(*pixel_lonlat(store, "utm31", int(nr), int(nc))) is None

        # the brushed points -> a label class (its name is data: escaped in the status)
        name = await sc.to_class(HOSTILE, count=10)
        labelled = [q for q in state.tools.labels.points if q.cls == HOSTILE]
        assert name == HOSTILE and len(labelled) == 10
        assert HOSTILE not in state.status and "&lt;img" in state.status
        for q in labelled:
            assert layer.value_at(q.lon, q.lat) == 1.0
            hit = state.model.locate(q.lon, q.lat)
            np.testing.assert_array_equal(q.vector, zv[hit[1], hit[2]])

        # clearing the brush removes the layer
        sc.select([])
        assert sc.highlight is None and state.tools.shown == "none"
    run_async(run())


def test_scatter_commands_refuse_bad_input_in_one_line(store):
    import pytest
    from app.tools.api import commands

    async def run():
        state = await opened(store)
        cmds = commands(state)
        with pytest.raises(ValueError, match="^scatterSelect: run the scatter first$"):
            cmds["scatterSelect"]({"box": [0, 1, 0, 1]})
        assert cmds["scatterPoints"]() is None and cmds["scatterAt"](0.0, 50.0) is None
        assert await cmds["scatterToClass"]() is None and "Brush points in the scatter first" in state.status
        state.centre_view(*centre_of_data(store, "utm31"), 2500)
        res = await cmds["scatter"]("PCA", {"max_points": 300, "seed": 1})
        assert res["points"] == 300 and res["valid"] > 300
        with pytest.raises(ValueError, match="^scatterSelect takes"):
            cmds["scatterSelect"]([1, 2])
        assert await cmds["scatterSelect"]({"indices": [5, 7, 7, 10_000]}) == {"selected": 2, "highlighted": 2}
    run_async(run())


def test_brushed_points_export_as_geotiff_and_png_and_read_back(store):
    import io

    import pytest
    import zarr
    from PIL import Image

    from app import layers
    from test_exports import read_tif, utm_epsg

    async def run():
        state = await opened(store)
        with pytest.raises(layers.ExportError, match="^no scatter map yet: brush points in the scatter first$"):
            await layers.layer(state, "scatter")
        lon, lat = centre_of_data(store, "utm31")
        state.centre_view(lon, lat, 2500)
        await state.tools.scatter.compute(max_points=100_000)  # every valid pixel, in row-major order
        state.tools.scatter.select([3, 40, 41, 500])
        return state, lon, lat, await layers.layer(state, "scatter")
    state, lon, lat, lay = run_async(run())
    arr, tags, geo, page = read_tif(lay.geotiff())
    epsg = geo["ProjectedCSTypeGeoKey"]
    assert int(getattr(epsg, "value", epsg)) == utm_epsg(lon, lat)
    t = zarr.open_group(store / "utm31", mode="r").attrs["spatial:transform"]
    assert tuple(tags[33550][:2]) == (10.0, 10.0)
    r0, c0 = int((t[5] - tags[33922][4]) / 10), int((tags[33922][3] - t[2]) / 10)
    h, w = arr.shape
    valid = np.isfinite(zone_vectors(store, "utm31")[r0:r0 + h, c0:c0 + w, 0])
    rows, cols = np.nonzero(valid)
    want = np.where(valid, 0, 255).astype(np.uint8)
    want[rows[[3, 40, 41, 500]], cols[[3, 40, 41, 500]]] = 1
    assert arr.dtype == np.uint8 and tags[42113].strip("\x00") == "255"
    np.testing.assert_array_equal(arr, want)
    assert (arr == 1).sum() == 4 and (arr == 255).any() and (arr == 0).sum() > 1000
    # the value reader agrees at the brushed pixels (lon/lat by pyproj from the store's grid)
    for k in (3, 500):
        plon, plat = pixel_lonlat(store, "utm31", r0 + int(rows[k]), c0 + int(cols[k]))
        assert state.tools.layer("scatter").value_at(plon, plat) == 1.0
    img = np.asarray(Image.open(io.BytesIO(lay.png())))
    assert img.shape == (h, w, 4)
    np.testing.assert_array_equal(img[..., 3] > 0, want == 1)
    assert tuple(img[rows[3], cols[3]]) == (255, 0, 255, 255)


def test_tapping_a_point_selects_its_pixel_on_the_map(store):
    import pytest

    async def run():
        state = await opened(store)
        state.centre_view(*centre_of_data(store, "utm31"), 2500)
        sc = state.tools.scatter
        assert await sc.tap([0], 0.0, 0.0) is None and state.selected is None  # nothing projected yet
        p = await sc.compute(max_points=500, seed=3)
        r0, _, c0, _ = p.region.primary.window
        # a tap hitting points 7 and 9 at point 9's place: point 9's pixel is selected, ringed in the scatter
        k = await sc.tap([7, 9, 10_000], float(p.xy[9, 0]), float(p.xy[9, 1]))
        await state.settle()
        assert k == 9
        want = pixel_lonlat(store, "utm31", r0 + int(p.rows[9]), c0 + int(p.cols[9]))
        assert (state.selected.zone, state.selected.row, state.selected.col) == \
            ("utm31", r0 + int(p.rows[9]), c0 + int(p.cols[9]))
        assert (state.selected.lon, state.selected.lat) == pytest.approx(want, abs=1e-6)
        np.testing.assert_array_equal(state.selected.vector, zone_vectors(store, "utm31")[r0 + p.rows[9], c0 + p.cols[9]])
        assert sc.hover_at(*want)["index"] == 9
        assert await sc.tap([], 0.0, 0.0) is None
    run_async(run())


def test_umap_settings_out_of_range_are_refused_in_one_line_and_kept(store):
    """A UMAP setting out of param's bounds (or not a number, or an unknown method) is refused before anything runs:
    the command raises that one line, the status line says it (escaped), and the settings are those before."""
    import pytest
    from app.tools.api import commands

    async def run():
        state = await opened(store)
        cmds = commands(state)
        state.centre_view(*centre_of_data(store, "utm31"), 2500)
        sc = state.tools.scatter
        for bad, line in [({"n_neighbors": 1}, "must be at least 2, not 1."),
                          ({"seed": 4, "n_neighbors": 201}, "must be at most 200, not 201."),
                          ({"min_dist": float("nan")}, "must be at most 1.0, not nan."),
                          ({"min_dist": HOSTILE}, "only takes numeric values")]:
            with pytest.raises(ValueError) as e:
                await cmds["scatter"]("UMAP", bad)
            assert line in str(e.value) and "\n" not in str(e.value)
            assert state.status.startswith("<b>Scatter refused:</b> ") and "\n" not in state.status
            assert HOSTILE not in state.status
            assert (sc.method, sc.seed, sc.n_neighbors, sc.min_dist, sc.result) == ("PCA", 0, 15, 0.1, None)
        with pytest.raises(ValueError, match="does not accept 't-SNE'"):
            await cmds["scatter"]("t-SNE")
        # UMAP is the browser's (umap-js in a Web Worker): here, one line too
        assert await cmds["scatter"]("UMAP", {"max_points": 300}) is None
        assert state.status == "<b>UMAP failed:</b> UMAP runs in the browser (umap-js in a Web Worker), not in this " \
                               "Python" and sc.result is None
    run_async(run())
