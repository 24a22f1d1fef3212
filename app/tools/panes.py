"""Pure HTML views of the tools' states (every user or store text escaped by app/views.html)."""
from __future__ import annotations

from app.views import html


def labels_html(labels) -> str:
    """The classes: colour, name (escaped), number of labels; the active one in bold."""
    if not labels.classes:
        return "<i>No label classes yet: name one and click the map in label mode.</i>"
    counts = {n: 0 for n in labels.names()}
    for p in labels.points:
        counts[p.cls] = counts.get(p.cls, 0) + 1
    rows = "".join(html("<tr class='label-class'><td><span class='swatch' style='background:{}'>&nbsp;&nbsp;</span>"
                        "</td><td>{}</td><td>{}</td></tr>", c, n, counts[n]) if n != labels.active else
                   html("<tr class='label-class'><td><span class='swatch' style='background:{}'>&nbsp;&nbsp;</span>"
                        "</td><td><b>{}</b></td><td>{}</td></tr>", c, n, counts[n]) for n, c in labels.classes)
    return f"<table class='labels' id='labels-table'><tr><th></th><th>class</th><th>labels</th></tr>{rows}</table>"


def legend_html(rows: list[tuple[str, str, int, float]]) -> str:
    """Class map legend: colour, class, pixels and area at the confidence threshold."""
    if not rows:
        return ""
    body = "".join(html("<tr><td><span class='swatch' style='background:{}'>&nbsp;&nbsp;</span></td><td>{}</td>"
                        "<td>{:,}</td><td>{:.4f}</td></tr>", c, n, k, a) for n, c, k, a in rows)
    return f"<table class='legend' id='class-legend'><tr><th></th><th>class</th><th>pixels</th><th>km²</th></tr>{body}</table>"
