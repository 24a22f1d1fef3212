"""Pure HTML views of the tools' states (every user or store text escaped by app/views.html)."""
from __future__ import annotations

import numpy as np

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


def legend_html(rows: list[tuple[str, str, int, float]], ident: str = "class-legend") -> str:
    """A class layer's legend (a class map's, the clusters' key), as table `ident`: colour, class, pixels and area
    shown."""
    if not rows:
        return ""
    body = "".join(html("<tr><td><span class='swatch' style='background:{}'>&nbsp;&nbsp;</span></td><td>{}</td>"
                        "<td>{:,}</td><td>{:.4f}</td></tr>", c, n, k, a) for n, c, k, a in rows)
    return (f"<table class='legend' id='{ident}'><tr><th></th><th>class</th><th>pixels</th><th>km²</th></tr>"
            f"{body}</table>")


def evaluation_html(ev: dict | None) -> str:
    """The held-out report (app/tools/evaluate.py): accuracy, per-class precision/recall/F1, confusion matrix and
    learning curve, or why there is none; then the score against the ground truth when there is one."""
    if not ev:
        return ""
    gt = ground_truth_html(ev.get("ground_truth"))
    if "error" in ev:
        return html("<p class='evaluation'><i>{}</i></p>", ev["error"]) + gt
    head = html("<p class='evaluation'>{} held-out ({}-fold, seed {}, {} labels): accuracy <b>{:.3f}</b></p>",
                ev["method"], ev["folds"], ev["seed"], ev["labels"], ev["accuracy"])
    return (head + scores_html(ev["classes"], ev["confusion"], "labels", "evaluation") +
            curve_html(ev["learning_curve"], "accuracy", "accuracy") + gt)


def scores_html(classes: list[dict], confusion: list[list[int]], support: str, ids: str) -> str:
    """Per-class precision, recall, F1 and support (titled `support`), and the confusion matrix (rows: true class);
    the tables' ids are `ids`-table and `ids`-confusion (the held-out report's: evaluation-table, confusion-table)."""
    rows = "".join(html("<tr><td>{}</td><td>{:.2f}</td><td>{:.2f}</td><td>{:.2f}</td><td>{}</td></tr>",
                        c["name"], c["precision"], c["recall"], c["f1"], c["support"]) for c in classes)
    table = (f"<table class='evaluation' id='{ids}-table'><tr><th>class</th><th>precision</th><th>recall</th>"
             f"<th>F1</th><th>{support}</th></tr>{rows}</table>")
    cm = "".join("<tr>" + html("<th>{}</th>", c["name"][:12]) + "".join(html("<td>{}</td>", x) for x in row) + "</tr>"
                 for c, row in zip(classes, confusion))
    cid = "confusion-table" if ids == "evaluation" else f"{ids}-confusion"
    return table + f"<table class='confusion' id='{cid}'><caption>true (rows) x predicted</caption>{cm}</table>"


def ground_truth_html(gt: dict | None) -> str:
    """The class map against the ground truth (app/tools/truth.py): accuracy over its pixels, per-class scores,
    confusion matrix and the unmatched classes; or the one line why there is none."""
    if not gt:
        return ""
    out = html("<p class='ground-truth'><i>Against ground truth ({} truth): {}</i></p>", gt["year"], gt["error"]) \
        if "error" in gt else \
        html("<p class='ground-truth'>Against ground truth: accuracy <b>{:.3f}</b> over {:,} pixels ({} truth)</p>",
             gt["accuracy"], gt["pixels"], gt["year"]) + scores_html(gt["classes"], gt["confusion"], "pixels",
                                                                     "ground-truth")
    um = gt.get("unmatched")
    if um and (um["map"] or um["truth"]):
        sides = [f"{side}: {', '.join(um[side])[:300]}" for side in ("map", "truth") if um[side]]
        out += html("<p class='ground-truth-unmatched'>Classes without a match, not scored ({:,} pixels): {}</p>",
                    um["pixels"], "; ".join(sides))
    if gt.get("merged"):
        out += html("<p class='ground-truth-merged'>Scored as one class: {}</p>",
                    "; ".join(" = ".join(n.strip() for n in m) for m in gt["merged"])[:300])
    return out


def curve_html(curve: list[dict], key: str, score: str) -> str:
    """The learning curve (app/tools/evaluate.py): the held-out score `key` (shown as `score`) at each number of
    training labels."""
    return html("<p class='learning-curve'>learning curve (training labels: {}): {}</p>", score,
                ", ".join(f"{p['labels']}: {p[key]:.3f}" for p in curve))


def regression_html(ev: dict | None, layer=None) -> str:
    """The regression's held-out R² and RMSE, its predicted-against-actual pairs as a small SVG plot (with the
    1:1 line), its learning curve, and the colour bar's range of the map."""
    if not ev:
        return ""
    if "error" in ev:
        return html("<p class='evaluation'><i>{}</i></p>", ev["error"])
    a, p = ev["actual"], ev["predicted"]
    lo, hi = min(a + p), max(a + p)
    span = (hi - lo) or 1.0
    xy = lambda v: 10 + 180 * (v - lo) / span
    dots = "".join(f"<circle cx='{xy(x):.1f}' cy='{200 - xy(y):.1f}' r='2.5' fill='#377eb8'/>" for x, y in zip(a, p))
    plot = (f"<svg id='predicted-vs-actual' width='200' height='200' style='border:1px solid #ccc'>"
            f"<line x1='10' y1='190' x2='190' y2='10' stroke='#999'/>{dots}</svg>")
    bar = ""
    if layer is not None:
        vals = layer.values_all()
        bar = html("<p class='colour-bar'>map: {:.4g} (dark) to {:.4g} (bright)</p>", float(np.nanmin(vals)),
                   float(np.nanmax(vals)))
    return html("<p class='evaluation'>{} held-out ({}-fold, seed {}, {} labels): R² <b>{:.3f}</b>, RMSE <b>{:.4g}"
                "</b>; predicted (up) against actual ({:.4g} to {:.4g}):</p>", ev["method"], ev["folds"], ev["seed"],
                ev["labels"], ev["r2"], ev["rmse"], lo, hi) + plot + curve_html(ev["learning_curve"], "r2", "R²") + bar


def import_problems_html(problems: list[str]) -> str:
    """One list item per bad label file (its one line, escaped)."""
    if not problems:
        return ""
    return "<ul class='import-problems'>" + "".join(html("<li>{}</li>", p) for p in problems) + "</ul>"
