"""The kinds of failure a store read can have, with the title the explorer shows for each.

One list for both sides of the bridge: app/js/errors.json, bundled into the browser's JavaScript
(app/js/fetching.js refuses any other kind) and read here, so Python raises and titles exactly the
kinds JavaScript reports.  builder/site.py ships the file inside the app wheel.
"""
from __future__ import annotations

import json
from pathlib import Path

KINDS: dict[str, str] = json.loads((Path(__file__).parent / "js" / "errors.json").read_text())
GENERIC = "error"


class SourceError(Exception):
    """A store that cannot be read, with the kind of failure (a key of KINDS)."""

    def __init__(self, kind: str, message: str):
        self.kind = kind if kind in KINDS else GENERIC
        super().__init__(message)

    @property
    def title(self) -> str:
        return KINDS[self.kind]
