"""The explorer's line figures (Bokeh): spectra, the pixel across years, the change plot."""
from __future__ import annotations

from bokeh.models import FixedTicker, Range1d
from bokeh.plotting import figure


def anchor(fig, y: float = 0.0) -> None:
    """An invisible point at (0, y) (alpha 0: BokehJS leaves hidden renderers out of the bounds): a figure whose
    data are empty (no pixel selected yet) still has finite data ranges. Without it BokehJS logs "could not set
    initial ranges" at every repaint of an empty figure (hundreds in a session). Every figure anchored here shows 0
    anyway (band index, values about 0), or y (1: the least count a logarithmic axis shows)."""
    fig.scatter([0.0], [y], size=1, alpha=0.0, name=f"{fig.name}-anchor")


def lines_figure(source, name: str, title: str, height: int, width: int):
    fig = figure(width=width, height=height, title=title, name=name, x_axis_label="band", y_axis_label="value",
                 tools="pan,wheel_zoom,reset,save")
    fig.multi_line("xs", "ys", source=source, line_color="color", line_width=2, legend_field="label",
                   name=f"{name}-lines")
    # The legend goes below the plot area, where no line can reach it (inside, at top right, it covered the spectrum).
    legend = fig.legend[0]
    fig.center.remove(legend)
    legend.update(location="top_left", label_text_font_size="10px", glyph_height=10, label_height=10, spacing=0,
                  padding=2, margin=2, border_line_alpha=0, name=f"{name}-legend")
    fig.add_layout(legend, "below")
    anchor(fig)
    return fig


def change_figure(source, years: list[int], width: int):
    """Cosine to the previous year, at each year after the first: the x axis spans those years, ticks on whole
    years (a data range had ticks at 2023.5, and no bounds before a pixel was selected)."""
    shown = [int(y) for y in years[1:]] or [int(y) for y in years] or [0]
    fig = figure(width=width, height=240, title="Change: cosine similarity to the previous year", name="change",
                 x_axis_label="year", y_axis_label="cosine", tools="save", y_range=Range1d(-1.05, 1.05),
                 x_range=Range1d(min(shown) - 0.5, max(shown) + 0.5))
    fig.line("year", "cosine", source=source, line_width=2)
    fig.scatter("year", "cosine", source=source, size=9)
    fig.xaxis.ticker = FixedTicker(ticks=shown)
    return fig
