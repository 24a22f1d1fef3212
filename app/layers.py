"""The explorer's raster layers as exportable `RasterLayer`s, by name.

`providers()` maps a layer name to a coroutine function `(state) -> RasterLayer`; every tool of the registry
(app/tools/registry.py) has its layer's entry, and is then exported as GeoTIFF
and PNG by `tesseraApi.exportGeoTIFF(name)`, `exportPNG(name)` and the page's buttons.

  * "base": the embedding preview (the zone's rgb array) over the view's window of one zone;
  * each tool's layer (the overlay "similarity", listed before "base"; "class", "cluster", "change", "scatter",
    "regression", "examples"): float32 with NaN for no data, or, for a class layer (Tool.continuous False: class, cluster, scatter), uint8 values with 255 for no data
    and the tool's class names and colour table; the PNG in the map's colours. The scatter's is the pixels of the
    brushed points: 1 brushed, 0 the region's other pixels with data.

A GeoTIFF holds one CRS, so a layer over a view that spans UTM zones is exported one zone at a time: `zone`
names it (default: the view's primary zone, the one holding its centre); `zones(state, name)` lists them.
"""
from __future__ import annotations

import io
import json
import zipfile

import numpy as np

from app import gis, raster
from app.tools import region as tool_region
from app.tools import registry
from builder.core.zone import Zone
from app.raster import RasterLayer


class ExportError(ValueError):
    """An export that cannot be made now (nothing computed, no zone in view): one line for the user."""


def view_window(state) -> tuple[Zone, tuple[int, int, int, int]]:
    """The view's 10 m window in one zone, capped at budgets.MAX_REGION per side (app/tools/region.py
    view_window: the tools' region without overviews); tool layers export their own (level) window."""
    if state.model is None:
        raise ExportError("no store is open")
    got = tool_region.view_window(state.model, state.render_view())
    if got is None:
        raise ExportError("the view shows no zone of this store")
    return got[0], got[1]


def part(layer, zone: str | None):
    """The zone `zone` of a tool Layer (app/tools/region.py; None: its primary zone); ExportError when it has none."""
    if zone is None:
        return layer
    for p in layer.all:
        if p.zone.name == zone:
            return p
    raise ExportError(f"the {layer.name} map has no zone {str(zone)[:40]!r} "
                      f"(its zones: {', '.join(p.zone.name for p in layer.all)})")


async def base_layer(state, zone: str | None = None) -> RasterLayer:
    if zone is None:
        zone, (r0, r1, c0, c1) = view_window(state)
    else:
        got = [w for w in tool_region.view_windows(state.model, state.render_view()) if w[0].name == zone]
        if not got:
            raise ExportError(f"the view shows no zone {str(zone)[:40]!r}")
        zone, (r0, r1, c0, c1) = got[0][:2]
    if not zone.has_rgb:
        raise ExportError(f"{zone.name} has no rgb preview")
    rgba = await state.model.region(zone, "rgb", r0, r1, c0, c1)
    return RasterLayer("base", np.ascontiguousarray(rgba, np.uint8), zone, (r0, r1, c0, c1))


def tool_layer(name: str):
    """A provider for the map of the tool whose layer is `name` (app/tools/)."""
    async def provide(state, zone: str | None = None) -> RasterLayer:
        tool = state.tools.tool(name)
        layer = tool.layer
        if layer is None:
            raise ExportError(f"no {name} map yet: " + tool.missing.format(name=name))
        layer = part(layer, zone)
        if tool.continuous:
            return RasterLayer(name, layer.values.astype(np.float32), layer.zone, layer.window, float("nan"),
                               colours=lambda v: layer.rgba)
        idx = np.where(np.isfinite(layer.values), layer.values, 255).astype(np.uint8)
        names, colours = tool.classes()
        return RasterLayer(name, idx, layer.zone, layer.window, 255, colours=lambda v: layer.rgba,
                           palette=None if colours is None else np.array(gis.palette(colours), np.uint8),
                           names=names)
    return provide


def providers() -> dict:
    """Layer name -> provider: the overlays' (the similarity map), the base layer, then each tool's in the registry's
    order."""
    return {**{t.layer_name: tool_layer(t.layer_name) for t in registry.OVERLAYS}, "base": base_layer,
            **{t.layer_name: tool_layer(t.layer_name) for t in registry.TOOLS}}


async def layer(state, name: str, zone: str | None = None) -> RasterLayer:
    every = providers()
    provider = every.get(str(name))
    if provider is None:
        raise ExportError(f"unknown layer {name!r} (layers: {', '.join(every)})")
    return await provider(state, None if zone is None else str(zone))


def zones(state, name: str) -> list[str]:
    """The zones layer `name` covers, its primary zone first: for the base layer the view's zones with a preview
    ([] when there is nothing to export: the provider says why)."""
    if name == "base":
        if state.model is None:
            return []
        return [w[0].name for w in tool_region.view_windows(state.model, state.render_view()) if w[0].has_rgb]
    got = state.tools.layer(name)
    return [] if got is None else [p.zone.name for p in got.all]


def available(state) -> list[str]:
    """The names of the layers there is something to export of, in providers()' order: the base layer (the
    embedding preview), and each layer computed so far."""
    return [n for n in providers() if n == "base" or state.tools.layer(n) is not None]


def gis_files(lay: RasterLayer, stem: str) -> dict[str, bytes]:
    """The GIS bundle of one zone's layer (app/gis.py): the GeoTIFF (colour table and class names in it, and in its
    .tif.aux.xml for a class raster), the PNG with its world file (.pgw) and .png.aux.xml (its CRS)."""
    t = raster.georef(lay.zone, lay.window)
    files = {f"{stem}.tif": lay.geotiff(), f"{stem}.png": lay.png(),
             f"{stem}.pgw": gis.world_file(t["spatial:transform"]).encode(),
             f"{stem}.png.aux.xml": gis.aux_xml(t["epsg"]).encode()}
    if lay.names is not None:
        files[f"{stem}.tif.aux.xml"] = gis.aux_xml(None, lay.names, [tuple(c) for c in lay.palette]).encode()
    return files


async def download(state, name: str, kind: str) -> tuple[str, bytes, str, list[RasterLayer]]:
    """(file name, bytes, MIME type, the zones' RasterLayers) of the page's GeoTIFF ("tif"), PNG ("png") or GIS
    bundle ("gis": gis_files, zipped) export of layer `name`: the file itself for one zone; for a layer over
    several UTM zones one file per zone (each in its own CRS) in a zip."""
    year = state.model.year if state.model is not None else None
    for writer in ("tif", "png") if kind == "gis" else (kind,):
        await raster.ensure_writer(writer)
    lays = [await layer(state, name, z) for z in zones(state, name) or [None]]
    if kind == "gis":
        files = {f: data for lay in lays
                 for f, data in gis_files(lay, f"tessera-{year}-{lay.zone.name}-{lay.name}").items()}
        tool = state.tools.tool(name)
        report = tool.report() if tool is not None else None
        if report:  # the held-out report of the map's model
            files[f"tessera-{year}-{name}-evaluation.json"] = json.dumps(report, indent=1).encode()
    else:
        files = {f"tessera-{year}-{lay.zone.name}-{lay.name}.{kind}": lay.geotiff() if kind == "tif" else lay.png()
                 for lay in lays}
        if len(files) == 1:
            (file, data), = files.items()
            return file, data, "image/tiff" if kind == "tif" else "image/png", lays
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", zipfile.ZIP_STORED) as z:  # stored: GeoTIFF and PNG are compressed already
        for file, data in files.items():
            z.writestr(file, data)
    file = f"tessera-{year}-{lays[0].zone.name}-{lays[0].name}-gis.zip" if kind == "gis" and len(lays) == 1 else \
        f"tessera-{year}-{lays[0].name}-{len(lays)}-zones-{kind}.zip"
    return file, buf.getvalue(), "application/zip", lays
