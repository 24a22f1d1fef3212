"""The parsers of a tool's settings in the URL's tool= part (app/tools/share.py): ValueError for anything else."""
from __future__ import annotations

import math


def integer(text: str) -> int:
    x = int(text)
    if abs(x) >= 2 ** 31:  # seeds go to numpy/scikit-learn, which take 32-bit ones
        raise ValueError
    return x


def number(text: str) -> float:
    x = float(text)
    if not math.isfinite(x):
        raise ValueError
    return x
