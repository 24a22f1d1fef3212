"""Classification on CPython against scikit-learn fitted independently on zarr-python reads of the same pixels."""
from __future__ import annotations

import numpy as np
import pytest

from app import budgets
from app.tools import classify, labels as lab, panes, region
from conftest import run_async
from tools_util import centre_of_data, opened, pixel_lonlat, training_pixels, zone_vectors


async def labelled(store, world, zone="utm30"):
    state = await opened(store)
    state.centre_view(*centre_of_data(store, zone), 2500)
    await state.settle()
    train = training_pixels(store, zone, world, 2024)
    for r, c, k in train:
        await state.tools.labels.add(*pixel_lonlat(store, zone, r, c), cls=f"class {k}")
    return state, train


@pytest.mark.parametrize("method", ["k-NN", "logistic regression"])
def test_class_map_agrees_with_scikit_learn(store, world, method):
    from sklearn.linear_model import LogisticRegression
    from sklearn.neighbors import KNeighborsClassifier

    async def run():
        state, train = await labelled(store, world)
        layer = await state.tools.classify.classify(method, seed=3)
        assert layer is not None and state.tools.shown == "class"
        v = zone_vectors(store, "utm30")
        X = np.stack([v[r, c] for r, c, _ in train])
        names = [n for n in state.tools.labels.names()]
        y = np.array([names.index(f"class {k}") for _, _, k in train])
        est = KNeighborsClassifier(n_neighbors=5) if method == "k-NN" else LogisticRegression(max_iter=1000,
                                                                                              random_state=3)
        est.fit(X, y)
        r0, r1, c0, c1 = layer.window
        sub = v[r0:r1, c0:c1]
        valid = np.isfinite(sub[..., 0])
        want = est.predict(sub[valid])
        got = layer.values[valid]
        assert np.isfinite(got).all() and np.isnan(layer.values[~valid]).all()
        agree = float((got.astype(int) == want).mean())
        assert agree >= 0.99, agree
        assert valid.sum() > 1000
        # read back at a lon/lat, as tesseraApi.value does
        rr, cc = np.argwhere(valid)[len(want) // 2]
        assert layer.value_at(*pixel_lonlat(store, "utm30", r0 + rr, c0 + cc)) == got[len(want) // 2]
        # legend: counts and areas (10 m pixels) of the classes shown, escaped names
        rows = state.tools.classify.legend()
        assert sum(k for _, _, k, _ in rows) == valid.sum()
        assert all(a == pytest.approx(k * 1e-4) for _, _, k, a in rows)  # 10 m pixels: 1e-4 km²
        assert "class-legend" in panes.legend_html(rows)
        # a confidence threshold hides the doubtful pixels
        assert not state.tools.classify.result.parts  # this view lies in utm30 only
        conf = state.tools.classify.conf.values
        cut = float(np.nanmax(conf)) if method == "k-NN" else float(np.nanmedian(conf))
        state.tools.classify.threshold = cut
        shown = state.tools.classify.result.rgba[..., 3] > 0
        assert (shown == (np.nan_to_num(conf, nan=-1) >= cut)).all()
        assert sum(k for _, _, k, _ in state.tools.classify.legend()) == shown.sum()
        if method == "logistic regression":
            assert 0 < shown.sum() < valid.sum()
    run_async(run())


def test_random_forest_and_too_few_classes(store, world):
    async def run():
        state = await opened(store)
        state.centre_view(*centre_of_data(store, "utm30"), 2500)
        assert await state.tools.classify.classify() is None and "at least two classes" in state.status
        state, train = await labelled(store, world)
        layer = await state.tools.classify.classify("random forest", seed=1)
        assert layer is not None and np.isfinite(layer.values).sum() > 1000
        with pytest.raises(ValueError, match="unknown classification method"):
            classify.estimator("svm", 10)
    run_async(run())


def test_a_zoomed_out_view_is_capped_and_says_so(store, plain_store, world, monkeypatch):
    """Without overviews a view wider than MAX_REGION is cut around its centre, and the status says so; with
    them the view is read whole, from the compact code once its full vectors pass the cap."""
    monkeypatch.setattr(budgets, "MAX_REGION", 40)

    async def run():
        state = await opened(plain_store)
        state.centre_view(*centre_of_data(plain_store, "utm30"), 5000)
        reg = (await region.read(state.model, state.render_view())).primary
        r0, r1, c0, c1 = reg.window
        assert reg.capped and r1 - r0 <= 40 and c1 - c0 <= 40
        assert "capped at 40 px per side" in region.describe(reg) and "overview" not in region.describe(reg)
        state2, _ = await labelled(plain_store, world)
        await state2.tools.classify.classify()
        assert "capped at 40 px per side" in state2.status
        state3, _ = await labelled(store, world)
        await state3.tools.classify.classify()
        r0, r1, c0, c1 = state3.tools.classify.result.window
        assert "capped" not in state3.status and "overview level 0 (10 m pixels), the 8-d compact code" in state3.status
        assert r1 - r0 > 40 and c1 - c0 > 40
    run_async(run())


def test_the_legend_counts_an_overview_levels_pixels_at_their_own_area(store, world):
    """Zoomed out, the class map lies on overview level 2 (40 m pixels): each pixel is 0.0016 km², not 10 m's
    1e-4 km² (the legend gave a 16th of the area before)."""
    async def run():
        state, _ = await labelled(store, world)
        state.centre_view(*centre_of_data(store, "utm30"), 20_000)
        layer = await state.tools.classify.classify("k-NN")
        assert {p.zone.pixel for p in layer.all} == {40.0}
        rows = state.tools.classify.legend()
        assert sum(k for _, _, k, _ in rows) == sum(int(np.isfinite(p.values).sum()) for p in layer.all) > 300
        assert all(a == pytest.approx(k * 0.04 * 0.04) for _, _, k, a in rows)
    run_async(run())


class HeldRegions:
    """A store's source whose region reads (a tool's, not a click's) wait until `release` is set."""

    def __init__(self, source):
        import asyncio
        self.source, self.waiting, self.release = source, asyncio.Event(), asyncio.Event()

    def __getattr__(self, name):
        return getattr(self.source, name)

    async def read(self, path, box, hint="pixel"):
        if hint == "region":
            self.waiting.set()
            await self.release.wait()
        return await self.source.read(path, box, hint)


def test_a_classification_running_while_an_import_replaces_the_classes_stops_in_one_line(store, world):
    """An import that replaced the classes while a classification read its region ended it in a bare KeyError
    naming a class that was gone. The classification now stops, says so in one line, and runs on the new classes."""
    import asyncio

    async def run():
        state, _ = await labelled(store, world)
        held = HeldRegions(state.model.source)
        state.model.source = held
        running = asyncio.ensure_future(state.tools.classify.classify("k-NN"))
        await asyncio.wait_for(held.waiting.wait(), 60)  # it reads its region now
        feats = [{"type": "Feature", "geometry": {"type": "Point",
                                                  "coordinates": list(pixel_lonlat(store, "utm30", r, c))},
                  "properties": {"class": name}} for (r, c, _), name in zip(training_pixels(store, "utm30", world, 2024),
                                                                           ["new a", "new b"])]
        await state.tools.labels.load(*lab.from_geojson({"type": "FeatureCollection", "features": feats}))
        held.release.set()
        assert await running is None
        assert "the label classes changed while it ran" in state.status and "\n" not in state.status
        layer = await state.tools.classify.classify("k-NN")
        assert layer is not None and state.tools.classify.names == ["new a", "new b"]
    run_async(run())


def test_a_class_given_another_colour_is_redrawn_in_it_at_once_and_a_run_goes_on(store, world):
    """Class colours could not be chosen. Labels.recolour takes any CSS colour; the class map follows without a new
    run, and a classification under way is not stopped (the class set is the same)."""
    async def run():
        state, _ = await labelled(store, world)
        L, c = state.tools.labels, state.tools.classify
        layer = await c.classify("k-NN", seed=3)
        first = c.names[0]
        mine = layer.values == 0  # the pixels of the first class
        assert mine.any()
        revision = L.revision
        L.recolour(first, "rgb(18, 52, 86)")
        assert L.colour(first) == "#123456" and L.revision == revision
        rgba = c.result.rgba
        shown = rgba[..., 3] > 0
        assert (mine & shown).any() and (rgba[mine & shown][:, :3] == [0x12, 0x34, 0x56]).all()
        assert not (rgba[~mine & shown][:, :3] == [0x12, 0x34, 0x56]).all(axis=1).any()
        for bad in ("not a colour", None):
            with pytest.raises(ValueError):
                L.recolour(first, bad)
        with pytest.raises(ValueError):
            L.recolour("no such class", "#000000")
    run_async(run())
