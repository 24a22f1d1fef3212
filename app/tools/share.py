"""The shown tool layer in the URL hash, so a reload or a shared link re-runs it on the same view.

    #...&tool=cluster,k:5,seed:0,win:120_888_40_808,zone:utm31,lvl:2
    tool=class,method:k-NN,k:5,seed:0,threshold:0.5,win:...   (trained on the labels, which the URL also holds;
        train_year:2023,test_year:2024 when trained on one year's labels and applied to another year's store)
    tool=change,y0:2023,y1:2024,threshold:0.05,win:...
    tool=scatter,max_points:20000,seed:0,method:UMAP,n_neighbors:15,min_dist:0.1,sel:3-7;10;12,win:...
        (PCA or UMAP and its settings; the brushed points, as index ranges)

`win`, `zone` and `lvl` are the zone window (r0_r1_c0_c1, on the grid of overview level `lvl`, 0 when left
out) the tool ran on; a layer over several UTM zones adds the others' as `also:zone~lvl~r0_r1_c0_c1;...`.  The
re-run reads exactly those windows,
whatever the view (the map may have moved after the tool ran), so a scatter's brushed points are the same
sample's; a window outside the zone's grid or over the region cap is refused (a link without `zone` runs on
the view's zone). Anything unknown, out of range or malformed is ignored with one line in the status
(escaped), never a traceback.
"""
from __future__ import annotations

import traceback

from app import budgets
from app import views
from builder.core.source import SourceError
from app.state import SHOWN
from app.tools import region, registry
from app.tools.urlvalues import integer

MAX_TEXT = 2000  # longest tool= value read; a tool's extra parts (a long brush) are left out of a longer one


def _tools_in_url() -> dict:
    """layer name -> tool class, of the tools whose layer goes in the URL (their url_settings, the registry's)."""
    return {t.layer_name: t for t in registry.TOOLS if t.url_settings}


def encode(tools) -> str | None:
    """The `tool=` value for the tool layer shown now, or None (no tool layer, or not computed, or not in URLs)."""
    name = tools.shown
    tool = tools.tool(name)
    layer = tool.layer if tool is not None and tool.url_settings else None
    if layer is None:
        return None
    parts = [name] + [f"{k}:{getattr(tool, k)}" for k in tool.url_settings if getattr(tool, k) is not None]
    win = "win:" + "_".join(str(int(x)) for x in layer.window) + f",zone:{layer.zone.name}"
    if getattr(layer.zone, "level", 0):  # a window on an overview level's grid (app/tools/region.py plan)
        win += f",lvl:{layer.zone.level}"
    if layer.parts:  # the view's other zones
        win += ",also:" + ";".join(f"{p.zone.name}~{getattr(p.zone, 'level', 0)}~" +
                                   "_".join(str(int(x)) for x in p.window) for p in layer.parts)
    extra = tool.url_extra()
    if extra:  # extra parts too long for a URL are left out; the tool and its settings stay
        text = ",".join(parts + extra + [win])
        if len(text) <= MAX_TEXT:
            return text
    return ",".join(parts + [win])


def parse(text: str) -> tuple[str, dict, tuple | None, dict, str | None, int, list]:
    """(tool layer, settings, window or None, the tool's extra parts {key: text}, zone or None, overview level, the
    other zones' [(zone, level, window)]); ValueError naming what is wrong."""
    if len(text) > MAX_TEXT:
        raise ValueError(f"tool= is longer than {MAX_TEXT} characters")
    name, *parts = text.split(",")
    known = _tools_in_url()
    if name not in known:
        raise ValueError(f"unknown tool {name[:SHOWN]!r} (tools: {', '.join(known)})")
    tool = known[name]
    fields, settings, window, extra, zone, level, also = tool.url_settings, {}, None, {}, None, 0, []
    for part in parts:
        key, sep, value = part.partition(":")
        try:
            if key == "win":
                window = tuple(integer(x) for x in value.split("_"))
                if len(window) != 4:
                    raise ValueError
            elif key == "zone" and sep:
                zone = value
            elif key == "lvl" and sep:
                level = integer(value)
            elif key == "also" and sep:
                for one in value.split(";"):
                    z, lv, win = one.split("~")
                    w = tuple(integer(x) for x in win.split("_"))
                    if len(w) != 4:
                        raise ValueError
                    also.append((z, integer(lv), w))
            elif key in tool.url_extra_keys:
                extra[key] = value
            elif key in fields and sep:
                settings[key] = fields[key](value)
            else:
                raise ValueError
        except ValueError:
            raise ValueError(f"{name}: bad setting {part[:SHOWN]!r}") from None
    return name, settings, window, extra, zone, level, also


def checked_window(state, name: str, window: tuple, zone: str | None, level: int = 0,
                   model=None) -> tuple[str, int, tuple]:
    """(zone name, overview level, window) of a link's tool layer, inside that level's grid of `model` (None: the
    store shown) and the region cap (region.use_for: full vectors up to MAX_REGION per side, the compact code up
    to MAX_CODE_SIDE); else ValueError."""
    model = model or state.model
    if zone is None:  # a link without its zone: the view's
        w = region.view_window(model, state.render_view())
        if w is None:
            raise ValueError(f"{name}: the view shows no zone of this store")
        zone = w[0].name
    z = model.zones.get(zone)
    if z is None:
        raise ValueError(f"{name}: no zone {zone[:SHOWN]!r} in this store")
    coded = region.overviews(z)
    if level < 0 or (level and not (coded and level < len(z.levels))):
        raise ValueError(f"{name}: no overview level {level} in {zone}")
    if coded:
        z = z.at_level(level)
    r0, r1, c0, c1 = window
    text = "_".join(map(str, window))
    if not (0 <= r0 < r1 <= z.height and 0 <= c0 < c1 <= z.width):
        raise ValueError(f"{name}: window {text[:SHOWN]} is not inside {zone}'s grid ({z.height} x {z.width} px)")
    cap = budgets.MAX_CODE_SIDE if coded and region.use_for(z, window) == "code" else budgets.MAX_REGION
    if max(r1 - r0, c1 - c0) > cap:
        raise ValueError(f"{name}: window {text[:SHOWN]} is larger than the region cap ({cap} px per side)")
    return zone, level, window


async def restore(state, text: str | None):
    """Re-run the tool layer `text` (a tool= value) on its window; returns its layer or None."""
    if not text:
        return None
    try:
        name, settings, window, extra, zone, level, also = parse(text)
        tool = state.tools.tool(name)
        grid = await tool.link_store(settings)  # another year's store for a model applied to that year
        where = None if window is None else [checked_window(state, name, window, zone, level, grid),
                                             *(checked_window(state, name, w, z, lv, grid) for z, lv, w in also)]
        named = [w[0] for w in where or []]
        if len(set(named)) != len(named):  # a zone read twice would count its pixels twice
            raise ValueError(f"{name}: a zone given twice ({', '.join(n[:SHOWN] for n in named)})")
        tool.param.update(**settings)  # param refuses values out of bounds or not among the choices
    except (ValueError, TypeError, SourceError) as e:
        state.status = views.html("<b>Tool layer in the URL ignored:</b> {}", str(e).splitlines()[0][:200])
        return None
    state.tool_window = where  # the tools read the link's windows, not the view's (app/tools/region.py tool_plans)
    try:
        return await tool.rerun(extra)
    except Exception as e:  # a link must never stop the page: one line here, the traceback in the console
        traceback.print_exception(e)
        state.status = views.html("<b>Tool layer in the URL failed:</b> {}",
                                  (str(e).splitlines() or [type(e).__name__])[0][:200])
        return None
    finally:
        state.tool_window = None


def watch(tools, callback) -> None:
    """Call `callback()` whenever what `encode` or an overlay's url_parts writes may have changed (the page rewrites its
    URL)."""
    tools.param.watch(lambda *e: callback(), ["shown"])
    for tool in tools.all:  # the tool layers' tool= settings, and the overlays' own parts (app/state.py UrlState.parts)
        tool.param.watch(lambda *e: callback(), list(tool.url_watch))
