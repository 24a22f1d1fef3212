"""The analysis tools, in the order of their map layers ("Tool layer", exports): adding a tool is writing its module
(app/tools/tool.py says what it declares) and naming its class here."""
from __future__ import annotations

from app.tools.change import Change
from app.tools.classify import Classifier
from app.tools.cluster import Clusters
from app.tools.examples import Examples
from app.tools.regress import Regressor
from app.tools.scatter import Scatter

TOOLS = [Classifier, Clusters, Change, Scatter, Regressor, Examples]


def layers() -> list[str]:
    """The tool layers the map can show: "none", then each tool's."""
    return ["none"] + [t.layer_name for t in TOOLS]

