"""The page's export buttons: a layer as GeoTIFF or PNG, the view's region as .npy + JSON (zip), the preview across
the store's years as an animated PNG with its sidecars (zip).

The bytes come from the same functions as tesseraApi's exports (app/layers.py, app/raster.py,
app/region.py); the browser saves them through a Blob link. Status lines say what was exported,
its size and time, and for a region which window of which zone (capped at budgets.MAX_REGION). A layer
over a view that spans UTM zones is saved as one file per zone, each in its own CRS, in one zip.
"""
from __future__ import annotations

import time

import panel as pn

from app import layers, page, region, views
from app.tools import animation
from app.layout import PANE_W
from app.budgets import MAX_REGION
from builder.core.source import SourceError

REGION_NOTE = (f"Region: the view's part of one zone, at most {MAX_REGION} x {MAX_REGION} px around the view's "
               "centre, at 10 m or, zoomed out, the view's overview level's vectors (float32, NaN where no data; "
               "up to 302 MB).")


def save(data: bytes, filename: str, mime: str) -> None:
    """Hand `data` to the browser as a download named `filename` (the page saves it through a Blob link)."""
    page.download(data, filename, mime)


class ExportButtons(pn.viewable.Viewer):
    def __init__(self, state, **params):
        super().__init__(**params)
        self.state = state
        # description=None: not the parameter's doc (for developers) as a tooltip (app/main.py ExplorerUI)
        self.layer = pn.widgets.Select.from_param(state.param.export_layer, width=110, description=None)
        self.buttons = {kind: pn.widgets.Button(name=label, width=100) for kind, label in (
            ("tif", "GeoTIFF"), ("png", "PNG"), ("gis", "GIS (.zip)"), ("region", "Region (.npy + JSON)"),
            ("years", "Years (APNG)"))}
        for kind, b in self.buttons.items():
            b.on_click(lambda event, kind=kind: state.spawn(self.export(kind)))

    def __panel__(self):
        b = self.buttons
        return pn.Column(pn.Row(self.layer, b["tif"], b["png"]), pn.Row(b["gis"], b["region"]), b["years"],
                         pn.pane.HTML(views.html("<small>{}</small>", REGION_NOTE), width=PANE_W))

    async def export(self, kind: str) -> None:
        s = self.state
        t0 = time.perf_counter()
        try:
            if kind == "region":
                zone, (r0, r1, c0, c1), full = region.export_window(s)
                data = await region.export(s)
                name, mime = f"tessera-{s.model.year}-{zone.name}-region.zip", "application/zip"
                what = views.html("rows {}-{}, cols {}-{} of {} at {:g} m (level {}; {} x {} px of the view's {} x {}, "
                                  "capped at {} x {})", r0, r1, c0, c1, zone.name, zone.pixel, zone.level, r1 - r0,
                                  c1 - c0, full[1] - full[0], full[3] - full[2], MAX_REGION, MAX_REGION)
            elif kind == "years":  # the preview across the store's years (app/tools/animation.py)
                name, data = await animation.export(s)
                mime, what = "application/zip", "the preview over the view, a frame per year"
            else:
                name, data, mime, lays = await layers.download(s, s.export_layer, kind)
                what = "; ".join(views.html("rows {}-{}, cols {}-{} of {}", *lay.window, lay.zone.name) for lay in lays)
        except (ValueError, SourceError) as e:
            s.status = views.html("<b>Export failed:</b> {}", e)
            return
        save(data, name, mime)
        s.status = views.html("Exported {}: {:,} bytes in {:.0f} ms; ", name, len(data),
                              (time.perf_counter() - t0) * 1000) + what + "."
