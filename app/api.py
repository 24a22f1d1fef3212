"""The explorer's commands: window.tesseraApi for scripts on the page, and the same commands for host
pages through postMessage (app/messages.py).

`commands(state)` is the one list: plain Python callables taking plain values (numbers, strings,
dicts) and returning a plain value or a coroutine. `expose` serves them to the page, where Python
does not run (it runs in a Web Worker): each window.tesseraApi command is a Promise of the result
(dicts as objects, bytes as Uint8Array) that rejects with one line.
"""
from __future__ import annotations

import asyncio
import time

import numpy as np

from app import documents, layers, messages, raster, region
from app.commands import CommandQueue
from builder.core.quant import cosine_map
from app.session import Explorer
from app.tools import animation, api as tools_api
from builder.core.convention import dequantise


def commands(state: Explorer, tools_ui=None) -> dict:
    """Every scripting command as plain Python: window.tesseraApi and postMessage both call these."""
    async def select(lon, lat):
        px = await state.select(float(lon), float(lat))
        await state.settle()
        return None if px is None else {"zone": px.zone, "row": px.row, "col": px.col, "valid": px.valid,
                                        "scale": px.scale}

    def pin():
        state.pin()
        return len(state.pins)

    async def view(lon, lat, span):
        state.centre_view(float(lon), float(lat), float(span))
        await state.settle()

    async def time_similarity(zone_name, r0, r1, c0, c1):
        zone = state.model.zones[str(zone_name)]
        t0 = time.perf_counter()
        emb, scl = await asyncio.gather(state.model.region(zone, "embeddings", r0, r1, c0, c1),
                                        state.model.region(zone, "scales", r0, r1, c0, c1))
        t1 = time.perf_counter()
        v = dequantise(emb, scl)
        valid = np.argwhere(np.isfinite(scl))
        sim = cosine_map(v, v[tuple(valid[len(valid) // 2])])
        t2 = time.perf_counter()
        return {"fetch_ms": (t1 - t0) * 1000, "compute_ms": (t2 - t1) * 1000, "valid": int(np.isfinite(sim).sum())}

    async def goto(text):
        """Go to lon,lat or a country name, as the go-to box does; resolves to {kind, message}."""
        if state.geography is not None:
            await state.geography  # the place names arrive after start-up
        result = state.goto(str(text))
        await state.settle()
        return {"kind": result[0], "message": str(state.status)}

    def layers_(settings):
        """Set layer toggles and opacities: {show_coast, show_borders, show_tiles, geo_opacity, tiles_opacity, ...}."""
        allowed = {"show_coast", "show_borders", "show_tiles", "geo_opacity", "tiles_opacity", "embedding_opacity"}
        if not isinstance(settings, dict):
            raise layers.ExportError("layers takes an object of settings")
        state.param.update(**{k: v for k, v in settings.items() if k in allowed})
        return True

    async def redraw():
        await state.redraw()

    async def export_geotiff(name="similarity", zone=None):
        """The layer as GeoTIFF bytes, in one zone (default: the view's primary zone; tifffile is loaded on the
        first call)."""
        await raster.ensure_writer("tif")
        return (await layers.layer(state, name, zone)).geotiff()

    async def export_png(name="similarity", zone=None):
        """The layer as PNG bytes, in one zone (Pillow is awaited if its background load is still under way)."""
        await raster.ensure_writer("png")
        return (await layers.layer(state, name, zone)).png()

    async def export_gis(name="similarity"):
        """The layer's GIS bundle (zip: GeoTIFF with colour table and class names, .tif.aux.xml, PNG, .pgw,
        .png.aux.xml per zone; app/layers.py gis_files)."""
        return (await layers.download(state, name, "gis"))[1]

    async def export_animation():
        """The preview over the view across the store's years: zip of an APNG, .pgw, .png.aux.xml and .json
        (app/tools/animation.py)."""
        return (await animation.export(state))[1]

    async def export_region():
        """region.npy + region.json of the view's window at its overview level (capped at budgets.MAX_REGION per
        side), zipped."""
        return await region.export(state)

    cmds = {"goto": goto, "layers": layers_, "select": select, "timeSimilarity": time_similarity,
            "pin": pin, "view": view, "redraw": redraw,
            "exportGeoTIFF": export_geotiff, "exportPNG": export_png, "exportRegion": export_region,
            "exportGIS": export_gis, "exportAnimation": export_animation,
            "layerZones": lambda name="similarity": layers.zones(state, str(name))}
    cmds.update(tools_api.commands(state, tools_ui))  # label, similarity, classify, cluster, change, value, ...
    return cmds


def expose(state: Explorer, origins: list[str], tools_ui=None) -> None:
    """Serve window.tesseraApi (the page defines each command as a Promise of the answer, app/web/boot.js)
    and a host page's messages from `origins`: both run in one queue (app/commands.py), one command at a time."""
    from app import page
    cmds = commands(state, tools_ui)
    queue = CommandQueue()

    async def run(msg) -> None:  # run as a host page's message is (one rule), answered to the page
        try:
            args = documents.plain(msg.args, f"the arguments of {msg.name}")
        except ValueError as e:  # nested too deeply to convert
            reply = {"ok": False, "error": str(e)}
        else:
            reply = await messages.answer(cmds, {"tessera": messages.PROTOCOL, "cmd": str(msg.name), "args": args})
        page.post_answer({"type": "api-reply", "id": msg.id, "ok": reply["ok"], "value": reply.get("result"),
                          "error": reply.get("error")},
                         lambda e: {"type": "api-reply", "id": msg.id, "ok": False, "value": None,
                                    "error": f"{msg.name}: its result cannot be sent to the page ({messages.one_line(e)})"})

    page.on("api", lambda msg: queue.submit(run(msg)))
    page.post({"type": "api", "names": list(cmds)})
    messages.install(state, cmds, origins, queue)
