"""The explorer's line figures (Bokeh): spectra, the pixel across years, the change plot."""
from __future__ import annotations

from bokeh.models import Range1d
from bokeh.plotting import figure

from app.session import MAP_W


def lines_figure(source, name: str, title: str, height: int):
    fig = figure(width=MAP_W, height=height, title=title, name=name, x_axis_label="band", y_axis_label="value",
                 tools="pan,wheel_zoom,reset,save")
    fig.multi_line("xs", "ys", source=source, line_color="color", line_width=2, legend_field="label")
    fig.legend.location = "top_right"
    return fig


def change_figure(source):
    fig = figure(width=380, height=240, title="Change: cosine similarity to the previous year", name="change",
                 x_axis_label="year", y_axis_label="cosine", tools="save", y_range=Range1d(-1.05, 1.05))
    fig.line("year", "cosine", source=source, line_width=2)
    fig.scatter("year", "cosine", source=source, size=9)
    fig.xaxis.ticker.desired_num_ticks = 4
    return fig
