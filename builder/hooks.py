"""Test hooks at named phases of the commands that write (a build's phases, the index and publish commands):
kill the process there, interrupt it, or hold it until a test lets it go.  Set only by tests
(tests/test_kills.py, tests/test_build.py, tests/test_locks.py); without their environment variables a phase
costs one dictionary lookup."""
from __future__ import annotations

import os
import signal
import time
from pathlib import Path

KILL_ENV = "TESSERA_TEST_KILL_AT"
INTERRUPT_ENV = "TESSERA_TEST_INTERRUPT"  # "1": kill_point sends a Ctrl-C to the process group instead
PAUSE_ENV = "TESSERA_TEST_PAUSE"  # "phase=FILE[,phase=FILE...]": at a phase, wait until FILE exists
INTERRUPT_WAIT_S = 120.0  # how long the Ctrl-C hook waits for its own signal before it fails the build


def kill_point(phase: str) -> None:
    """Test hooks at a phase of the build (tests/test_kills.py, tests/test_build.py, tests/test_locks.py):
    - TESSERA_TEST_KILL_AT=phase: SIGKILL this process; with TESSERA_TEST_INTERRUPT=1 send this process's group a
      SIGINT instead, as a terminal's Ctrl-C, and wait here until it has been handled: the kernel may give the
      signal to any thread, and one not scheduled for a while (a loaded machine) would let the build run on
      and finish before Python sees it;
    - TESSERA_TEST_PAUSE=phase=FILE: write FILE.<pid>.waiting, then wait until FILE exists (a test holds the
      process at a known point, e.g. with its store lock taken, or several at once just before they take it)."""
    for item in filter(None, os.environ.get(PAUSE_ENV, "").split(",")):
        name, _, path = item.partition("=")
        if name == phase:
            Path(f"{path}.{os.getpid()}.waiting").touch()
            while not Path(path).exists():
                time.sleep(0.01)
    if os.environ.get(KILL_ENV) == phase:
        if os.environ.get(INTERRUPT_ENV) == "1":
            os.killpg(os.getpgrp(), signal.SIGINT)
            end = time.monotonic() + INTERRUPT_WAIT_S
            while time.monotonic() < end:  # the SIGINT's handler raises KeyboardInterrupt in this sleep
                time.sleep(0.01)
            raise RuntimeError(f"test hook: the SIGINT sent at {phase} was not handled")
        else:
            os.kill(os.getpid(), signal.SIGKILL)
