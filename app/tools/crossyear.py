"""Across years: a model trained on the labels of one year (`train_year`, the vectors read where and when they were
labelled) applied to another year's store (`test_year`): the tool's region read from that year's store (opened
once and kept, as change opens its years: app/tools/change.py), on its own grid, over the same view or link
windows.  Both years are shown in the status and written in the URL (app/tools/share.py)."""
from __future__ import annotations

from app import views
from app.tools import region as reg


async def read(app, year: int | None) -> reg.Regions | None:
    """The tool's region in `year`'s store (None or the shown year: the shown store's, read_tool)."""
    if year is None or app.model is None or year == app.model.year:
        return await reg.read_tool(app)
    model = await app.tools.change._store(int(year))
    return await reg.read_plans(model, reg.tool_plans(app, model))


def describe(app, train_year: int | None, test_year: int | None) -> str:
    """' Trained on ... applied to ...' (escaped HTML)."""
    shown = app.model.year if app.model is not None else None
    return views.html(" Trained on the labels of {}, applied to {}.",
                      "every year" if train_year is None else train_year, shown if test_year is None else test_year)
