"""The queue that runs commands from scripts on the page (window.tesseraApi) and from host pages (postMessage).

A command resolves once the explorer has settled: it awaits `Explorer.settle`, which waits for every action the
state set off. Commands used to run as such actions themselves, so two commands sent without awaiting the first
waited on each other for ever, and every later command waited behind them. Here a command is not an action of the
state: no command's settle waits for another command. Commands run one at a time, in the order they came, from
both sources alike, so each starts from the state the one before it left and the last one sent sets the state last.
"""
from __future__ import annotations

import asyncio


class CommandQueue:
    def __init__(self):
        self._turn = asyncio.Lock()  # asyncio.Lock wakes its waiters first come, first served
        self._queued: set = set()  # the tasks of commands queued or running (the loop keeps weak references only)

    def submit(self, command) -> asyncio.Task:
        """Run the coroutine `command` after every command submitted before it; its task."""
        async def in_turn():
            async with self._turn:
                return await command

        task = asyncio.ensure_future(in_turn())
        self._queued.add(task)
        task.add_done_callback(self._done)
        return task

    def _done(self, task) -> None:
        self._queued.discard(task)
        if not task.cancelled() and task.exception() is not None:  # a command answers its own failures: a bug
            import traceback
            traceback.print_exception(task.exception())
