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
        r0, r1, c0, c1 = p.region.window
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
        r0, r1, c0, c1 = p.region.window
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
        assert int(np.isfinite(layer.values).sum()) == len(inside)
        for i in inside:
            lon, lat = pixel_lonlat(store, "utm31", r0 + int(p.rows[i]), c0 + int(p.cols[i]))
            assert layer.value_at(lon, lat) == 1.0
            assert state.tools.layer("scatter").value_at(lon, lat) == 1.0
        outside = next(i for i in range(400) if i not in set(inside))
        assert layer.value_at(*pixel_lonlat(store, "utm31", r0 + int(p.rows[outside]), c0 + int(p.cols[outside]))) is None

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
        cmds = commands(state, None)
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
