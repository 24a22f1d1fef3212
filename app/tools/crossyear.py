"""Across years: a model trained on the labels of one year (`train_year`, the vectors read where and when they were
labelled) applied to another year's store (`test_year`): the tool's region read from that year's store (opened
once and kept by the tools' context, app/tools/tool.py, as change opens its years), on its own grid, over the same
view or link windows.  Both years are shown in the status and written in the URL (app/tools/share.py)."""
from __future__ import annotations

from app import views
from app.tools import region as reg


async def read(ctx, year: int | None) -> reg.Regions | None:
    """The tool's region in `year`'s store (None or the shown year: the shown store's, ctx.region)."""
    if year is None or ctx.model is None or year == ctx.model.year:
        return await ctx.region()
    model = await ctx.store(int(year))
    return await reg.read_plans(model, ctx.plans(model))


def describe(ctx, train_year: int | None, test_year: int | None) -> str:
    """' Trained on ... applied to ...' (escaped HTML)."""
    shown = ctx.model.year if ctx.model is not None else None
    return views.html(" Trained on the labels of {}, applied to {}.",
                      "every year" if train_year is None else train_year, shown if test_year is None else test_year)
