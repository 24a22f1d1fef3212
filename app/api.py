"""window.tesseraApi: what tests and embedding pages call, through the same state as the UI."""
from __future__ import annotations

import asyncio
import time

import numpy as np

from app.model import cosine_map
from app.session import Explorer
from app.tools import api as tools_api
from builder.convention import dequantise


def expose(state: Explorer, tools_ui=None) -> None:
    import js
    from pyodide.ffi import create_proxy, to_js

    def obj(d: dict):
        return to_js(d, dict_converter=js.Object.fromEntries)

    def select(lon, lat):
        async def run():
            px = await state.select(float(lon), float(lat))
            await state.settle()
            return None if px is None else obj({"zone": px.zone, "row": px.row, "col": px.col, "valid": px.valid,
                                                "scale": px.scale})
        return state.spawn(run())

    def similarity(on):
        async def run():
            if on and state.similarity_on:
                await state.compute_similarity()  # again, for the current selection and view
            state.similarity_on = bool(on)
            await state.settle()
            return True
        return state.spawn(run())

    def pin():
        state.pin()
        return len(state.pins)

    def view(lon, lat, span):
        state.centre_view(float(lon), float(lat), float(span))
        return state.spawn(state.settle())

    def time_similarity(zone_name, r0, r1, c0, c1):
        async def run():
            zone = state.model.zones[str(zone_name)]
            t0 = time.perf_counter()
            emb, scl = await asyncio.gather(state.model.region(zone, "embeddings", r0, r1, c0, c1),
                                            state.model.region(zone, "scales", r0, r1, c0, c1))
            t1 = time.perf_counter()
            v = dequantise(emb, scl)
            valid = np.argwhere(np.isfinite(scl))
            sim = cosine_map(v, v[tuple(valid[len(valid) // 2])])
            t2 = time.perf_counter()
            return obj({"fetch_ms": (t1 - t0) * 1000, "compute_ms": (t2 - t1) * 1000,
                        "valid": int(np.isfinite(sim).sum())})
        return state.spawn(run())

    def goto(text):
        """Go to lon,lat or a country name, as the go-to box does; resolves to {kind, message}."""
        async def run():
            if state.geography is not None:
                await state.geography  # the place names arrive after start-up
            result = state.goto(str(text))
            await state.settle()
            return obj({"kind": result[0], "message": str(state.status)})
        return state.spawn(run())

    def layers(settings):
        """Set layer toggles and opacities: {show_coast, show_borders, show_tiles, geo_opacity, tiles_opacity, ...}."""
        allowed = {"show_coast", "show_borders", "show_tiles", "geo_opacity", "tiles_opacity", "embedding_opacity"}
        state.param.update(**{k: v for k, v in settings.to_py().items() if k in allowed})
        return True

    api = {"goto": goto, "layers": layers, "select": select, "timeSimilarity": time_similarity, "similarity": similarity, "pin": pin,
           "simAt": state.sim_at, "view": view, "redraw": lambda: state.spawn(state.redraw())}
    tools = tools_api.entries(state, tools_ui, obj)  # label, classify, cluster, change, value, ...
    view_sim = tools.pop("similarity")
    api.update(tools, similarity=lambda on=True, mode="mean", threshold=None: similarity(on) if isinstance(on, bool)
               else view_sim(on, mode, threshold))
    js.window.tesseraApi = obj({k: create_proxy(v) for k, v in api.items()})
