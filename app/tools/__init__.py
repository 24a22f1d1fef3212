"""The explorer's analysis tools: each is a small state (param.Parameterized) plus pure computations.

region.py reads the view's embeddings; labels.py, classify.py, cluster.py, change.py, similarity.py and
scatter.py are the tools; `Tools` bundles their states for the Explorer (app/session.py), ui.py draws them and
api.py exposes them on window.tesseraApi.
"""
from __future__ import annotations

import param

from app.tools.change import Change
from app.tools.classify import Classifier
from app.tools.cluster import Clusters
from app.tools.examples import Examples
from app.tools.labels import Labels
from app.tools.regress import Regressor
from app.tools.scatter import Scatter

LAYERS = ["none", "class", "cluster", "change", "scatter", "regression", "examples"]


class Tools(param.Parameterized):
    """The tools' states; `shown` is the tool layer drawn over the map."""

    shown = param.Selector(objects=LAYERS, default="none", label="Tool layer")

    def __init__(self, app, **kw):
        super().__init__(**kw)
        self.labels = Labels(app)
        self.classify = Classifier(app)
        self.cluster = Clusters(app)
        self.change = Change(app)
        self.scatter = Scatter(app)
        self.regress = Regressor(app)
        self.examples = Examples(app)
        for name, tool in (("class", self.classify), ("cluster", self.cluster), ("change", self.change),
                           ("regression", self.regress), ("examples", self.examples)):
            tool.param.watch(lambda e, name=name: setattr(self, "shown", name if e.new is not None else "none"),
                             "result")
        self.scatter.param.watch(self._on_highlight, "highlight")
        self.labels.param.watch(lambda e: self.classify.take_colours(self.labels), "classes")

    def _on_highlight(self, e) -> None:
        if e.new is not None:
            self.shown = "scatter"
        elif self.shown == "scatter":
            self.shown = "none"

    def layer(self, name: str):
        """The tool layer `name` (a region.Layer), or None when it has not been computed."""
        return {"class": self.classify.result, "cluster": self.cluster.result, "change": self.change.result,
                "scatter": self.scatter.highlight, "regression": self.regress.result,
                "examples": self.examples.result}.get(name)
