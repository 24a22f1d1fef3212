"""Similarity over the whole view from one or several pixels (mean, max) against plain numpy."""
from __future__ import annotations

import numpy as np
import pytest

from conftest import run_async
from tools_util import centre_of_data, cosines, opened, pin_three


@pytest.mark.parametrize("mode", ["mean", "max"])
def test_similarity_from_pins_over_the_view(store, mode):
    async def run():
        state = await opened(store)
        state.centre_view(*centre_of_data(store, "utm30"), 3000)
        v, rc = await pin_three(state, store)
        state.tools.similarity.param.update(sim_from="pins", sim_mode=mode, on=True)
        await state.settle()
        got = state.tools.similarity.result
        zone, (r0, r1, c0, c1), sim = got.zone, got.window, got.values
        sub = v[r0:r1, c0:c1].astype(np.float64)
        each = np.stack([cosines(sub, v[r, c].astype(np.float64)) for r, c in rc])
        want = each.mean(0) if mode == "mean" else each.max(0)
        np.testing.assert_allclose(sim, want, rtol=0, atol=1e-5, equal_nan=True)
        assert "of 3 pixels" in state.status and f"{mode} of 3" in state.status
        # the region is the view's part of the zone: the whole zone data in a 3 km view
        assert (r1 - r0) * (c1 - c0) > 5000
    run_async(run())


def test_similarity_runs_as_a_step_and_ends_on_its_own_line(store):
    """Its compute is a step like every tool's (app/tools/steps.py): the page's busy sign names it while it runs, its
    first line says so, and its result line ends it."""
    async def run():
        state = await opened(store)
        state.centre_view(*centre_of_data(store, "utm30"), 3000)
        await pin_three(state, store)
        lines, running = [], []
        state.param.watch(lambda e: lines.append(e.new), "status")
        state.param.watch(lambda e: running.append(e.new), "running")
        state.tools.similarity.param.update(sim_from="pins", sim_mode="max", on=True)
        await state.settle()
        assert state.tools.similarity.result is not None
        assert running == ["Similarity", ""], running
        assert lines[0] == "Similarity: reading the view…", lines
        assert lines[-1].startswith("Similarity to max of 3 pixels: ") and lines[-1].endswith(" ms)."), lines
    run_async(run())
