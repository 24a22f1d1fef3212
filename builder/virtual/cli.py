"""`python -m builder index`."""
from __future__ import annotations

import argparse


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("kind", choices=["tiles", "years", "pyramid"])


def run(a) -> int:
    from builder.errors import BuildError
    raise BuildError("index is not available yet")
