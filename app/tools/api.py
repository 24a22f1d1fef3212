"""The labels' and tools' commands (app/api.py adds them to window.tesseraApi and postMessage): plain Python
values; a coroutine resolves once the state settled. Each tool's own verbs are its `verbs` (app/tools/tool.py),
taken from the registry."""
from __future__ import annotations

import json

import numpy as np

from app.tools import labelfiles, labels as lab, polygon
from app.tools.verbs import Verbs


def commands(state, ui=None) -> dict:
    t = state.tools
    api = Verbs(state)
    run = api.run

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
            return run(lambda: t.labels.import_geojson(geojson, str(filename)))
        text = geojson if isinstance(geojson, str) else json.dumps(geojson)

        async def go():
            if ui is None:
                raise ValueError("CSV and KML label files are read by the explorer's page (its tools' panel)")
            task = ui.import_labels(text, str(filename))
            if task is not None:
                await task
            return len(t.labels.points)
        return run(go)

    def value(layer, lon, lat):
        """A tool layer's value under lon/lat (similarity: the cosine, class: index into names, cluster, change,
        scatter: 1 brushed, 0 not); null where none."""
        got = t.layer(str(layer))
        return None if got is None else got.value_at(float(lon), float(lat))

    def layer_array(layer):
        """The layer's values over its (primary) zone window, row-major (NaN as null), and under "parts" every
        zone's, for checks against CPython."""
        got = t.layer(str(layer))
        if got is None:
            return None

        def one(p):
            return {"zone": p.zone.name, "level": p.zone.level, "pixel": p.zone.pixel, "window": list(p.window),
                    "read": p.read, "values": [None if not np.isfinite(x) else float(x) for x in p.values.ravel()]}
        return json.dumps(dict(one(got), parts=[one(p) for p in got.all]))

    out = {"label": label, "labelPolygon": label_polygon, "labels": labels, "importLabels": import_labels,
           "exportLabels": lambda: json.dumps(lab.to_geojson(t.labels.classes, t.labels.points)),
           "exportLabelsCSV": lambda: labelfiles.to_csv(t.labels.points),
           "exportLabelsKML": lambda: labelfiles.to_kml(t.labels.classes, t.labels.points),
           "clearLabels": lambda: t.labels.clear(), "value": value,
           "layerArray": layer_array, "show": lambda name: setattr(t, "shown", str(name))}
    for tool in t.all:
        verbs = tool.verbs(api)
        taken = set(verbs) & set(out)
        if taken:  # a tool's verb never hides another's
            raise ValueError(f"the {tool.tool_name} tool's verbs {sorted(taken)} are taken")
        out.update(verbs)
    return out
