"""The classes a ground-truth store names (its root's "ground_truth" attribute, builder/truth.py): each a distinct
value in 0..254 (255 is no class) and a name, names told apart trimmed and case-insensitive, as the explorer matches
a class map's classes to them (app/tools/truth.py).  One rule for the builder that writes the list and the explorer
that reads it: the list is data, so `check_classes` bounds it and refuses anything odd in one line."""
from __future__ import annotations

KEY = "ground_truth"  # the root attribute naming a truth store's year and classes
NO_DATA = 255  # the class of a pixel without one
CLASSES_MAX = 255  # classes a truth store may name (0..254)
NAME_MAX = 200  # characters of a class name


class TruthError(ValueError):
    """A ground-truth store (or its class list) that cannot be used: one line."""


def key(name: str) -> str:
    """What tells class names apart: trimmed, case-insensitive."""
    return name.strip().casefold()


def check_classes(classes, where: str) -> dict[int, str]:
    """{class value: name} of a "ground_truth" attribute's `classes` list, checked; TruthError naming `where` and
    the first class that is wrong."""
    if not isinstance(classes, list) or not 0 < len(classes) <= CLASSES_MAX:
        raise TruthError(f"{where}: no ground_truth classes (a list of 1 to {CLASSES_MAX}) in its root")
    out: dict[int, str] = {}
    seen: dict[str, int] = {}  # key: the first class's position
    for i, c in enumerate(classes):
        v, name = (c.get("class"), c.get("name")) if isinstance(c, dict) else (None, None)
        if isinstance(v, bool) or not isinstance(v, int) or not 0 <= v < NO_DATA or v in out:
            raise TruthError(f"{where}: ground_truth class {i} has no distinct value in 0..{NO_DATA - 1}")
        if not isinstance(name, str) or not name.strip() or len(name) > NAME_MAX:
            raise TruthError(f"{where}: ground_truth class {i} has no name of 1 to {NAME_MAX} characters")
        if seen.setdefault(key(name), i) != i:
            raise TruthError(f"{where}: ground_truth class {i} has the name of class {seen[key(name)]}"
                             " (trimmed, case-insensitive)")
        out[v] = name
    return out
