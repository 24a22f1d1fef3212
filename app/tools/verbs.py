"""What the tools' page-API verbs share: a command that resolves once the explorer settled, and summaries of where a
tool ran (plain values for window.tesseraApi and postMessage)."""
from __future__ import annotations

import numpy as np


def zones(parts) -> dict:
    """Where a tool ran: the primary zone's name, level, pixel and window, and under "zones" every zone's."""
    one = [{"zone": p.zone.name, "level": p.zone.level, "pixel": p.zone.pixel, "window": [int(x) for x in p.window]}
           for p in parts]
    return dict(one[0], zones=one)


def layer_summary(layer) -> dict:
    """zones() of a Layer, its pixels with a value (all zones) and what it was computed from (Layer.read)."""
    return dict(zones(layer.all), valid=int(np.isfinite(layer.values_all()).sum()), read=layer.read)


class Verbs:
    """Given to Tool.verbs: `run` a command's coroutine until the explorer settled; `summary` of a layer."""

    def __init__(self, state):
        self._state = state

    async def run(self, coro_fn):
        out = await coro_fn()
        await self._state.settle()
        return out

    @property
    def status(self) -> str:
        return str(self._state.status)

    def summary(self, layer, extra=None) -> dict | None:
        if layer is None:
            return None
        return dict(layer_summary(layer), status=self.status, **(extra or {}))
