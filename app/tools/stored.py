"""Where a label set is kept: in the link while it is short, else in the browser's storage under an id.

A label set's compact text (app/tools/labels.py `saved`) goes in the URL hash (`labels=[[...]]`) while it is at most
URL_BUDGET characters. A larger set is written to storage as the entry `tessera-labels-<id>` (id: the first 16 hex
digits of the text's SHA-256) and the link holds `labels=stored:<id>`; a reload, or the link opened again in this
browser, reads the set back from there. The label file export (GeoJSON, CSV, KML) is the copy for another browser.

Storage is bounded: at most MAX_SETS stored sets of at most MAX_STORED characters together (the oldest set is dropped
first, by the index entry `tessera-labels-index`), and a single set larger than that is not stored at all (the status says
to export it). What is read back is data like any label file: an entry over MAX_STORED characters is refused before
it is parsed, and the rest goes through labels.from_saved within app/documents.py's limits.
"""
from __future__ import annotations

import hashlib
import json
import re

from app.state import SHOWN

URL_BUDGET = 2000  # characters of a label set's text in the URL hash (links stay well under browsers' limits)
MAX_STORED = 4_000_000  # characters of all stored sets together (Chromium's localStorage holds 5 M per origin)
MAX_SETS = 8  # sets kept (each change of a large set stores a new one: the links of the last few still work)
PREFIX = "tessera-labels-"
INDEX = PREFIX + "index"  # JSON list of the stored ids, oldest first
MAX_INDEX = 4096  # characters of the index entry read (it holds a few ids)
REFERENCE = re.compile(r"stored:([0-9a-f]{16})")


def reference(text: str) -> str:
    return "stored:" + hashlib.sha256(text.encode()).hexdigest()[:16]


def place(storage, text: str) -> str | None:
    """Keep the label set `text`: the value for the link's `labels=` (the text itself, or `stored:<id>` once it is
    written to `storage`), or None when it is too large for storage too."""
    if len(text) <= URL_BUDGET:
        return text
    if len(text) > MAX_STORED:
        return None
    ref = reference(text)
    new = REFERENCE.fullmatch(ref).group(1)
    ids = [i for i in index(storage) if i != new]
    if storage.get_item(PREFIX + new) != text:
        storage.set_item(PREFIX + new, text)
    ids.append(new)
    sizes = [len(storage.get_item(PREFIX + i) or "") for i in ids]
    while sum(sizes) > MAX_STORED or len(ids) > MAX_SETS:  # the oldest go first; the new set fits alone
        storage.remove_item(PREFIX + ids.pop(0))
        sizes.pop(0)
    storage.set_item(INDEX, json.dumps(ids))
    return ref


def index(storage) -> list[str]:
    """The stored ids, oldest first (an index that is not a short JSON list of ids counts as empty)."""
    text = storage.get_item(INDEX)
    if not text or len(text) > MAX_INDEX:
        return []
    try:
        ids = json.loads(text)
    except ValueError:
        return []
    return [i for i in ids if isinstance(i, str) and REFERENCE.fullmatch("stored:" + i)] if isinstance(ids, list) else []


def resolve(storage, value: str) -> str:
    """The label set's text a `labels=` value stands for: the value itself, or the stored set it refers to.
    ValueError with one line: not a reference, not in this browser's storage, or larger than storage holds."""
    if not value.startswith("stored:"):
        return value
    m = REFERENCE.fullmatch(value)
    if m is None:
        raise ValueError(f"{value[:SHOWN]!r} is not a stored label set (stored: and 16 hex digits)")
    text = storage.get_item(PREFIX + m.group(1))
    if text is None:
        raise ValueError(f"the label set {value} is not in this browser's storage "
                         "(a link from another browser: import its label file)")
    if len(text) > MAX_STORED:
        raise ValueError(f"the stored label set {value} is {len(text):,} characters; at most {MAX_STORED:,} are read")
    return text


def note(link: str | None, points: int) -> str:
    """Where a label set of `points` labels went, for the status line (plain text: the caller escapes it)."""
    if not points or (link is not None and not link.startswith("stored:")):
        return ""
    if link is None:
        return " Too many for the link and for this browser's storage: export them to a file (Labels, Export)."
    return (f" Too many for the link: kept in this browser's storage ({link}); "
            "export them to a file for another browser.")
