"""Every tool's compute as one step (app/tools/steps.py), on CPython with the explorer's real state: the status
line's values over a run, as a watcher of the state sees them, and the step's name while it runs (`running`, which
the page counts the seconds of)."""
from __future__ import annotations

import asyncio
import re
import sys

from app.tools import lazy
from conftest import run_async
from tools_util import centre_of_data, opened, pixel_lonlat, training_pixels


async def numbered(store, world):
    """The explorer on 2.5 km of utm30, with labels of the demo's classes named by numbers."""
    state = await opened(store)
    state.centre_view(*centre_of_data(store, "utm30"), 2500)
    await state.settle()
    train = training_pixels(store, "utm30", world, 2024)
    for r, c, k in train:
        await state.tools.labels.add(*pixel_lonlat(store, "utm30", r, c), cls=str(10 * k + 5))
    return state, train


def watched(state):
    """The status lines and `running` values the state takes from now on."""
    lines, running = [], []
    state.param.watch(lambda e: lines.append(e.new), "status")
    state.param.watch(lambda e: running.append(e.new), "running")
    return lines, running


def counted(lines, what):
    return [(int(m[1]), int(m[2])) for t in lines if (m := re.search(rf"{what} (\d+) of (\d+)…", t))]


def test_a_regression_says_what_it_fits_counts_each_held_out_fit_and_ends_on_its_result(store, world):
    async def run():
        state, train = await numbered(store, world)
        lines, running = watched(state)
        layer = await state.tools.regress.regress("ridge", seed=0)
        assert layer is not None
        assert lines[0] == f"Regression (ridge): fitting on {len(train)} labels, 5-fold held-out evaluation…", lines
        fits = counted(lines, "held-out fit")
        assert [d for d, _ in fits] == sorted(d for d, _ in fits) and fits[0] == (0, 25) and fits[-1] == (25, 25), fits
        assert counted(lines, "pixel block")[-1][0] == counted(lines, "pixel block")[-1][1] >= 1, lines
        assert lines[-1].startswith("Regression (ridge, ") and "held-out R²" in lines[-1], lines
        assert running == ["Regression (ridge)", ""]
    run_async(run())


def test_k_means_counts_its_blocks_and_an_error_it_did_not_expect_ends_the_step_on_one_line(store, world):
    async def run():
        state, _ = await numbered(store, world)
        lines, running = watched(state)
        assert await state.tools.cluster.cluster(4, 0) is not None
        assert lines[0] == "k-means (k=4): reading the view…" and lines[1].startswith("k-means (k=4): fitting 4 "), lines
        blocks = counted(lines, "pixel block")
        assert blocks and blocks[-1][0] == blocks[-1][1], lines
        assert lines[-1].startswith("k-means (k=4, seed 0)") and running == ["k-means (k=4)", ""], (lines, running)

        ctx = state.tools.cluster.ctx

        async def broken():
            raise RuntimeError("the region could not be read\nsecond line")
        ctx.region = broken  # this instance's region read fails as nothing expects
        del lines[:], running[:]
        try:
            await state.tools.cluster.cluster(4, 0)
        except RuntimeError:
            pass
        else:
            raise AssertionError("the error was swallowed")
        assert state.status == "<b>k-means (k=4) failed:</b> the region could not be read", state.status
        assert running == ["k-means (k=4)", ""] and state.running == ""
    run_async(run())


def test_a_failed_scikit_learn_load_ends_the_step_on_its_failure_line(store, world, monkeypatch):
    """The first use's load of scikit-learn (Pyodide's loadPackage) fails: the step's failure line replaces the
    "loading" line, and no step stays under way."""
    async def run():
        state, _ = await numbered(store, world)
        lines, running = watched(state)

        async def refused():
            raise OSError("loadPackage: scikit-learn could not be fetched\nsecond line")
        monkeypatch.delitem(sys.modules, "sklearn.base", raising=False)  # its first use, as in Pyodide
        monkeypatch.setattr(lazy, "prefetch", refused)
        try:
            await state.tools.cluster.cluster(4, 0)
        except OSError:
            pass
        else:
            raise AssertionError("the error was swallowed")
        assert any("loading scikit-learn" in t for t in lines), lines
        assert state.status == "<b>k-means (k=4) failed:</b> loadPackage: scikit-learn could not be fetched", lines
        assert running == ["k-means (k=4)", ""] and state.running == ""
    run_async(run())


def test_a_step_cancelled_while_it_opens_is_not_left_under_way(store):
    """A task cancelled at the step's first yield (its line sent to the page) leaves no step running."""
    async def run():
        state = await opened(store)
        ctx = state.tools.cluster.ctx
        lines, running = watched(state)
        opened_body = []

        async def tool():
            async with ctx.step("Trial", "starting"):
                opened_body.append(True)

        task = asyncio.ensure_future(tool())
        await asyncio.sleep(0)  # the task runs up to the step's own yield
        assert state.running == "Trial" and lines == ["Trial: starting…"], (state.running, lines)
        task.cancel()
        try:
            await task
        except asyncio.CancelledError:
            pass
        else:
            raise AssertionError("the cancellation was swallowed")
        assert not opened_body and state.running == "" and running == ["Trial", ""], running
        assert state.status == "Trial cancelled.", state.status
    run_async(run())


def test_a_failed_load_is_not_kept_the_next_use_loads_again():
    """A load that fails (Pyodide's loadPackage refused once) is forgotten: the next use starts a new one, whose
    success is then kept and shared; a failure while no one awaits it (the first label's prefetch) is forgotten too."""
    async def run():
        calls = []

        async def loader():
            calls.append(len(calls))
            if len(calls) in (1, 3):
                raise OSError(f"load {len(calls)} refused")
            return "loaded"

        load = lazy.Load(loader)
        first = load()
        try:
            await first
        except OSError as e:
            assert str(e) == "load 1 refused"
        else:
            raise AssertionError("the failure was swallowed")
        second = load()
        assert second is not first and await second == "loaded" and calls == [0, 1]
        assert load() is second and calls == [0, 1]  # a success is kept: no second load

        unused = lazy.Load(loader)  # its first load fails with no one awaiting it
        started = unused()
        await asyncio.wait([started])
        assert isinstance(started.exception(), OSError) and calls == [0, 1, 2]
        assert await unused() == "loaded" and calls == [0, 1, 2, 3]
    run_async(run())


def test_one_tool_cancelled_while_it_waits_on_the_shared_load_leaves_the_load_to_the_others(monkeypatch):
    """Two tools wait on one scikit-learn load; the first is cancelled (its run stopped): the load goes on, the
    second tool gets it, and no second load starts."""
    calls, release = [], asyncio.Event()

    async def loader():
        calls.append(1)
        await release.wait()

    monkeypatch.setattr(lazy, "_sklearn", lazy.Load(loader))
    monkeypatch.setattr(lazy, "prefetch", lambda: lazy._sklearn())  # as in Pyodide
    monkeypatch.delitem(sys.modules, "sklearn.base", raising=False)

    async def run():
        first, second = asyncio.ensure_future(lazy.sklearn()), asyncio.ensure_future(lazy.sklearn())
        while not calls:  # both wait on the one load
            await asyncio.sleep(0)
        first.cancel()
        await asyncio.wait([first])
        assert first.cancelled()
        release.set()
        await second  # the load went on: the second tool imports scikit-learn
        assert "sklearn.base" in sys.modules and len(calls) == 1
    run_async(run())


def test_a_load_that_leaves_scikit_learn_unimportable_is_forgotten(monkeypatch):
    """Pyodide's loadPackage resolves when a fetch failed (it logs the failure on the console): the import that
    follows fails, in one line, and the next use loads again."""
    calls = []

    async def loader():  # resolves without bringing scikit-learn
        calls.append(1)

    monkeypatch.setattr(lazy, "_sklearn", lazy.Load(loader))
    monkeypatch.setattr(lazy, "prefetch", lambda: lazy._sklearn())  # as in Pyodide
    monkeypatch.delitem(sys.modules, "sklearn.base", raising=False)
    monkeypatch.setitem(sys.modules, "sklearn", None)  # `import sklearn.base` fails, as where it was not loaded

    async def run():
        for n in (1, 2):
            try:
                await lazy.sklearn()
            except ImportError as e:
                assert str(e).startswith("scikit-learn could not be loaded (") and "\n" not in str(e), str(e)
            else:
                raise AssertionError("the failed import was swallowed")
            assert len(calls) == n
    run_async(run())


def test_a_steps_failure_reaches_the_status_line_whatever_was_written_during_it(store):
    """Another status write during the step (a label import's lines, a link's message) does not hide its failure;
    a step that ends well, or is cancelled after another line replaced its own, leaves the last line alone."""
    async def run():
        state = await opened(store)
        ctx = state.tools.cluster.ctx
        lines, running = watched(state)

        async def failing():
            async with ctx.step("Trial", "starting"):
                state.status = "Labels: 12 imported from labels.geojson"  # another writer, mid-step
                raise RuntimeError("the region could not be read\nsecond line")
        try:
            await failing()
        except RuntimeError:
            pass
        else:
            raise AssertionError("the error was swallowed")
        assert state.status == "<b>Trial failed:</b> the region could not be read", lines
        assert running == ["Trial", ""] and state.running == ""

        del lines[:], running[:]

        async def superseded():  # a cancelled step is most often one a new run replaced: the new run's line stays
            async with ctx.step("Trial", "starting"):
                state.status = "Trial: again…"
                raise asyncio.CancelledError()
        try:
            await superseded()
        except asyncio.CancelledError:
            pass
        else:
            raise AssertionError("the cancellation was swallowed")
        assert state.status == "Trial: again…" and running == ["Trial", ""], lines

        async def fine():
            async with ctx.step("Trial", "starting"):
                state.status = "Trial: 3 classes."
        await fine()
        assert state.status == "Trial: 3 classes."
    run_async(run())
