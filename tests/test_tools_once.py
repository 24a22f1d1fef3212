"""A tool run reads the view's bytes once: similarity search (the page API's verb, and the side bar's toggle with a
source or mode changed at once) fetches what k-means fetches for the same view, every byte range of it once.

Counted on the wire, by the logging proxy in front of `python -m builder serve`, while the explorer reads the
session's store over HTTP with Range (CPython, zarr-python Source); the view reads overview level 0's compact code
(the read budget is cut, as a real screen's code is over it)."""
from __future__ import annotations

import shutil
from collections import Counter

import pytest

from builder.reader.source import ZarrSource
from app.session import Explorer
from app.state import UrlState
from app.tools.verbs import Verbs
from browser_util import counting_proxy, static_server
from conftest import run_async
from tools_util import centre_of_data

CODE = "/utm30/overviews/0/code"  # the code and code_scales arrays of the view's level


@pytest.fixture(scope="module")
def served(store, tmp_path_factory):
    """The session's store (a copy: the server wants an index.html beside it) behind the logging proxy."""
    root = tmp_path_factory.mktemp("once")
    shutil.copytree(store, root / store.name)
    (root / "index.html").write_text("a store for tests/test_tools_once.py")
    with static_server(root) as base, counting_proxy(base) as (url, log):
        yield url + store.name, log


def code_reads(log, start: int) -> Counter:
    """(path, Range) of every request for the level's code arrays since log entry `start`, counted."""
    return Counter((path, rng) for path, rng, _status, _n in log[start:] if CODE in path)


async def viewed(url: str, store) -> Explorer:
    """The explorer on the store at `url`, the view 3 km wide on utm30's data, its centre pixel selected."""
    state = Explorer([{"year": 2024, "url": url, "label": "2024"}], UrlState(), source_factory=ZarrSource)
    await state.open_year(2024)
    state.year = 2024
    await state.settle()
    lonlat = centre_of_data(store, "utm30")
    state.centre_view(*lonlat, 3000)
    assert (await state.select(*lonlat)).valid
    await state.settle()
    return state


def test_similarity_reads_the_views_code_once(served, store, monkeypatch):
    monkeypatch.setattr("app.budgets.REGION_BYTES", 1000)
    url, log = served

    async def run():
        state = await viewed(url, store)
        start = len(log)
        layer = await state.tools.cluster.cluster(k=3, seed=0)
        assert (layer.zone.level, layer.read) == (0, "the 8-d compact code")
        once = code_reads(log, start)
        assert once and set(once.values()) == {1}  # k-means: every range of the code once
        search = state.tools.similarity.verbs(Verbs(state))["similarity"]
        for mode in ("mean", "max"):  # turned on by the verb; then, while on, a new search in another mode
            start = len(log)
            got = await search("selection", mode, -1.0)
            assert got["read"] == "the 8-d compact code" and state.tools.similarity.on
            assert code_reads(log, start) == once, mode
        sim = state.tools.similarity
        sim.on = False
        start = len(log)
        sim.param.update(on=True, sim_mode="mean")  # the side bar: on, with another mode, in one change
        await state.settle()
        assert sim.result is not None and code_reads(log, start) == once
    run_async(run())


@pytest.mark.parametrize("bad", [("selection", "mean", 1.5), ("selection", "median", 0.5), ("everything", "max", 0.5)])
def test_a_similarity_search_refused_changes_nothing_and_searches_nothing_later(served, store, bad):
    """A search the verb refuses (a threshold out of range, a mode or source unknown) is one line, and leaves the
    overlay and its settings as they were: off, with no search then or at the next unrelated change."""
    url, log = served

    async def run():
        state = await viewed(url, store)
        sim = state.tools.similarity
        settings = (sim.on, sim.sim_from, sim.sim_mode, sim.threshold)
        search = sim.verbs(Verbs(state))["similarity"]
        with pytest.raises(ValueError) as e:
            await search(*bad)
        assert "\n" not in str(e.value) and str(e.value)
        assert (sim.on, sim.sim_from, sim.sim_mode, sim.threshold) == settings
        start = len(log)
        sim.threshold = 0.25  # the slider moved: nothing to search while off
        await state.settle()
        assert not sim.on and sim.result is None and not code_reads(log, start)
    run_async(run())
