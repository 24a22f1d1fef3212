"""The tools' commands (app/api.py adds them to window.tesseraApi and postMessage): plain Python values;
a coroutine resolves once the state settled."""
from __future__ import annotations

import json
import time

import numpy as np

from app.tools import labelfiles, labels as lab, polygon


def zones(parts) -> dict:
    """Where a tool ran: the primary zone's name, level, pixel and window, and under "zones" every zone's."""
    one = [{"zone": p.zone.name, "level": p.zone.level, "pixel": p.zone.pixel, "window": [int(x) for x in p.window]}
           for p in parts]
    return dict(one[0], zones=one)


def layer_summary(layer) -> dict:
    """zones() of a Layer, and its pixels with a value (all zones)."""
    return dict(zones(layer.all), valid=int(np.isfinite(layer.values_all()).sum()))


def commands(state, ui=None) -> dict:
    t = state.tools

    async def run(coro_fn):
        out = await coro_fn()
        await state.settle()
        return out

    def summary(layer, extra=None):
        if layer is None:
            return None
        return dict(layer_summary(layer), status=str(state.status), **(extra or {}))

    def label(lon, lat, cls=None):
        async def go():
            p = await t.labels.add(float(lon), float(lat), None if cls is None else str(cls))
            return p is not None
        return run(go)

    def label_polygon(coords, cls=None, seed=0):
        """Label the valid pixels inside the polygon [[lon, lat], ...] (app/tools/polygon.py): {class, labelled, inside}."""
        return run(lambda: polygon.label(state, coords, None if cls is None else str(cls), int(seed)))

    def labels():
        return json.dumps({"classes": t.labels.classes, "points": [[p.cls, p.year, p.lon, p.lat]
                                                                   for p in t.labels.points]})

    def import_labels(geojson, filename="labels.geojson"):
        """Load a label file's text: GeoJSON (its text or the object: the labels replace the labels; rejects with the
        line the status shows when it is refused), or CSV / KML by `filename`'s extension (app/tools/labelfiles.py)."""
        if not str(filename).lower().endswith((".csv", ".kml")):
            return run(lambda: t.labels.import_geojson(geojson))
        text = geojson if isinstance(geojson, str) else json.dumps(geojson)

        async def go():
            if ui is None:
                raise ValueError("CSV and KML label files are read by the explorer's page (its tools' panel)")
            task = ui.import_labels(text, str(filename))
            if task is not None:
                await task
            return len(t.labels.points)
        return run(go)

    def classify(method="k-NN", params=None):
        p = dict(params or {})
        async def go():
            t0 = time.perf_counter()
            layer = await t.classify.classify(str(method), **{k: v for k, v in p.items() if k in (
                "k", "seed", "threshold", "train_year", "test_year")})
            return summary(layer, {"ms": (time.perf_counter() - t0) * 1000, "names": t.classify.names,
                                   "evaluation": t.classify.evaluation,
                                   **getattr(t.classify, "timing", {})})
        return run(go)

    def regress(method="ridge", params=None):
        p = dict(params or {})
        async def go():
            t0 = time.perf_counter()
            layer = await t.regress.regress(str(method), **{k: int(v) for k, v in p.items() if k == "seed"})
            return summary(layer, {"ms": (time.perf_counter() - t0) * 1000, "range": list(t.regress.range),
                                   "evaluation": t.regress.evaluation})
        return run(go)

    def examples(positive, negative="all other classes"):
        """Similarity to q = 2 x mean(positives) - mean(negatives): the labels of class `positive`, and of class
        `negative` (or "all other classes", or "none")."""
        async def go():
            layer = await t.examples.search(str(positive), str(negative))
            return summary(layer, {"positives": t.examples.counts[0], "negatives": t.examples.counts[1]})
        return run(go)

    def cluster(k=5, seed=0):
        async def go():
            layer = await t.cluster.cluster(int(k), int(seed))
            return summary(layer, {"inertia": t.cluster.inertia})
        return run(go)

    def cluster_to_class(which, name=None, count=None):
        return run(lambda: t.cluster.to_class(int(which), name, None if count is None else int(count)))

    def change(y0, y1):
        async def go():
            return summary(await t.change.compute(int(y0), int(y1)))
        return run(go)

    def similarity(source="selection", mode="mean", threshold=None):
        """Similarity over the view from the selection and/or pins (mean or max); resolves to its summary."""
        async def go():
            t0 = time.perf_counter()
            state.param.update(sim_from=str(source), sim_mode=str(mode),
                               **({} if threshold is None else {"threshold": float(threshold)}))
            await state.compute_similarity()
            state.similarity_on = True
            ms = (time.perf_counter() - t0) * 1000
            return dict(layer_summary(state.sim), ms=ms, status=str(state.status))
        return run(go)

    def scatter(method="PCA", params=None):
        """Project the view's valid pixels to 2-D (method "PCA" or "UMAP"; params max_points, seed, n_neighbors,
        min_dist); resolves to its summary (points drawn, variance explained by PCA's axes, UMAP's settings)."""
        if not isinstance(params or {}, dict):
            raise ValueError("scatter takes its settings as {max_points, seed, n_neighbors, min_dist}")
        p = {k: v for k, v in dict(params or {}).items() if k in ("max_points", "seed", "n_neighbors", "min_dist")}
        async def go():
            t0 = time.perf_counter()
            res = await t.scatter.compute(str(method), **p)
            if res is None:
                return None
            return {**zones(res.region.parts), "status": str(state.status),
                    "ms": (time.perf_counter() - t0) * 1000, "method": res.method, "points": len(res.rows),
                    "valid": res.n_valid, "explained": [float(x) for x in res.explained],
                    **res.fit.settings}
        return run(go)

    def scatter_points():
        """The drawn points as JSON: their pixels (zone rows/cols) and 2-D coordinates, for checks against CPython."""
        res = t.scatter.result
        if res is None:
            return None
        parts = res.region.parts
        r0 = np.array([p.window[0] for p in parts])[res.part]
        c0 = np.array([p.window[2] for p in parts])[res.part]
        return json.dumps({"zone": parts[0].zone.name, "zones": [parts[i].zone.name for i in res.part],
                           "rows": (res.rows + r0).tolist(), "cols": (res.cols + c0).tolist(),
                           "x": res.xy[:, 0].tolist(), "y": res.xy[:, 1].tolist(), "selected": list(t.scatter.selected)})

    def scatter_select(which):
        """Brush points: {"box": [x0, x1, y0, y1]} in scatter coordinates, or {"indices": [...]}; resolves to the
        number of points selected and of pixels highlighted on the map."""
        res = t.scatter.result
        if res is None:
            raise ValueError("scatterSelect: run the scatter first")
        if not isinstance(which, dict) or not ({"box", "indices"} & set(which)):
            raise ValueError('scatterSelect takes {"box": [x0, x1, y0, y1]} or {"indices": [...]}')
        idx = res.in_box(*map(float, which["box"])) if "box" in which else list(which["indices"])
        async def go():
            hl = t.scatter.select(idx)
            return {"selected": len(t.scatter.selected),
                    "highlighted": 0 if hl is None else int((hl.values_all() == 1).sum())}
        return run(go)

    def value(layer, lon, lat):
        """A layer's value under lon/lat: similarity, class (index into names), cluster, change, scatter (1 brushed,
        0 not); null where none."""
        if layer == "similarity":
            return state.sim_at(float(lon), float(lat))
        got = t.layer(str(layer))
        return None if got is None else got.value_at(float(lon), float(lat))

    def layer_array(layer):
        """The layer's values over its (primary) zone window, row-major (NaN as null), and under "parts" every
        zone's, for checks against CPython."""
        got = state.sim if layer == "similarity" else t.layer(str(layer))
        if got is None:
            return None

        def one(p):
            return {"zone": p.zone.name, "level": p.zone.level, "pixel": p.zone.pixel, "window": list(p.window),
                    "values": [None if not np.isfinite(x) else float(x) for x in p.values.ravel()]}
        return json.dumps(dict(one(got), parts=[one(p) for p in got.all]))

    return {"label": label, "labelPolygon": label_polygon, "labels": labels, "importLabels": import_labels,
            "exportLabels": lambda: json.dumps(lab.to_geojson(t.labels.classes, t.labels.points)),
            "exportLabelsCSV": lambda: labelfiles.to_csv(t.labels.points),
            "exportLabelsKML": lambda: labelfiles.to_kml(t.labels.classes, t.labels.points),
            "clearLabels": lambda: t.labels.clear(), "classify": classify, "regress": regress, "cluster": cluster,
            "examples": examples,
            "clusterToClass": cluster_to_class, "change": change, "similarity": similarity, "value": value,
            "layerArray": layer_array, "scatter": scatter, "scatterPoints": scatter_points,
            "scatterSelect": scatter_select, "scatterAt": lambda lon, lat: t.scatter.hover_at(float(lon), float(lat)),
            "scatterToClass": lambda name=None, count=None: run(lambda: t.scatter.to_class(
                None if name is None else str(name), None if count is None else int(count))), "show": lambda name: setattr(t, "shown", str(name))}
