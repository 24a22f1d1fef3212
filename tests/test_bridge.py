"""The Python side of the browser bridge, on CPython: one list of error kinds shared with the JavaScript,
and the Source protocol (boxes as tuples of slices, a read hint) on the CPython source."""
from __future__ import annotations

import json
import re
from pathlib import Path

import numpy as np
import pytest
import zarr

from conftest import run_async

REPO = Path(__file__).resolve().parent.parent
JS = REPO / "app" / "js"


def test_error_kinds_are_one_list_read_by_both_sides():
    from builder.core.source import ERROR_KINDS, SourceError
    from builder.site import CORE_ERRORS
    doc = json.loads((REPO / "builder" / "core" / "errors.json").read_text())
    assert ERROR_KINDS == doc and all(isinstance(t, str) and t for t in doc.values())
    # The JavaScript imports that same file (the site copies it beside the bundle's sources), and raises no kind
    # outside it.
    assert 'from "./errors.json"' in (JS / "fetching.js").read_text() and CORE_ERRORS.name == "errors.json"
    assert not (JS / "errors.json").exists()  # one list: no second copy beside the JavaScript
    js_kinds = {k for p in JS.glob("*.js") for k in re.findall(r'TesseraError\(\s*"(\w+)"', p.read_text())}
    assert js_kinds and js_kinds <= set(doc), js_kinds - set(doc)
    py_kinds = {k for d in ("app", "builder/core", "builder/reader") for p in (REPO / d).rglob("*.py")
                for k in re.findall(r'SourceError\(\s*"(\w+)"', p.read_text())}
    assert py_kinds and py_kinds <= set(doc), py_kinds - set(doc)
    assert SourceError("range", "x").title == doc["range"]
    assert SourceError("no such kind", "x").kind == "error"  # never a kind the other side does not know


def test_the_js_modules_stay_small():
    for p in JS.glob("*.js"):
        assert len(p.read_text().splitlines()) <= 300, p.name


def test_cpython_source_reads_boxes_of_slices_with_a_hint(store):
    from builder.core.source import PIXEL, REGION
    from builder.reader.source import ZarrSource
    z = zarr.open_array(store / "utm30" / "embeddings", mode="r")
    want = np.asarray(z[10:13, 20:21, :])
    src = ZarrSource(str(store))
    for hint in (PIXEL, REGION):
        got = run_async(src.read("utm30/embeddings", (slice(10, 13), slice(20, 21), slice(None)), hint))
        np.testing.assert_array_equal(got, want)
    # (start, stop) pairs and None, as the core's layout rules give them, read the same
    got = run_async(src.read("utm30/embeddings", [(10, 13), (20, 21), None], REGION))
    np.testing.assert_array_equal(got, want)
    with pytest.raises(ValueError, match="read hint"):
        run_async(src.read("utm30/embeddings", (slice(0, 1), slice(0, 1), slice(None)), "shard"))


def test_both_transports_declare_the_core_source_protocol_and_read_byte_ranges(store):
    """builder/core/source.py's Source: the browser's bridge and zarr-python declare it; byte ranges of a real shard
    file are its bytes; the read hint is the core's enum, its strings what the bridge takes."""
    from app.reader import JSSource
    from builder.reader.source import ZarrSource
    from builder.core.source import Hint, Source
    src = ZarrSource(str(store))
    assert isinstance(src, Source) and Source in JSSource.__mro__  # declared (issubclass: not for data members)
    assert (JSSource.prefetches, ZarrSource.prefetches) == (True, False)
    assert run_async(src.prefetch([("utm30/scales", [(0, 1), (0, 1)])])) is None
    shard = next(p for p in sorted((store / "utm30" / "embeddings" / "c").rglob("*")) if p.is_file())
    raw, key = shard.read_bytes(), shard.relative_to(store).as_posix()
    assert run_async(src.read_ranges(key, [(0, 16), (len(raw) - 20, 20), (5, 1)])) == [raw[:16], raw[-20:], raw[5:6]]
    assert [Hint.of("pixel"), Hint.of(Hint.REGION)] == [Hint.PIXEL, Hint.REGION] and Hint.REGION == "region"
    with pytest.raises(ValueError, match="read hint must be 'pixel' or 'region', not 'shard'"):
        Hint.of("shard")
