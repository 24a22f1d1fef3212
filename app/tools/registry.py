"""The analysis tools, in the order of their map layers ("Layer to export"): adding a tool is writing its module
(app/tools/tool.py says what it declares) and naming its class here: under OVERLAYS when it is a tool.Overlay (drawn
under the tool layer while on), else under TOOLS (the "Tool layer" choices)."""
from __future__ import annotations

from app.tools.change import Change
from app.tools.classify import Classifier
from app.tools.cluster import Clusters
from app.tools.examples import Examples
from app.tools.regress import Regressor
from app.tools.scatter import Scatter
from app.tools.similarity import Similarity

OVERLAYS = [Similarity]
TOOLS = [Classifier, Clusters, Change, Scatter, Regressor, Examples]


def every() -> list:
    """Every tool class: the overlays, then the tool layers."""
    return OVERLAYS + TOOLS


def layers() -> list[str]:
    """The tool layers the map can show: "none", then each tool's."""
    return ["none"] + [t.layer_name for t in TOOLS]
