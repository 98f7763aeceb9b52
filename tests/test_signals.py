"""Stop signals always stop: also one that arrives while a child process is being forked, whose exception
CPython's at-fork callbacks print and drop ("Exception ignored in ... _releaseLock")."""

from __future__ import annotations

import os
import signal
import subprocess
import time

import pytest

from rtscope.signals import Terminated, sigterm_raises
from rtscope.targets import LocalTarget

pytestmark = pytest.mark.fast


class _SwallowsASignal:
    """Its __del__ gets SIGTERM and, like an at-fork callback, drops the exception the handler raises."""

    def __del__(self):
        os.kill(os.getpid(), signal.SIGTERM)
        for _ in range(100_000):  # the handler runs at the next bytecode, in here
            pass


@pytest.mark.filterwarnings("ignore::pytest.PytestUnraisableExceptionWarning")  # the dropped exception
def test_a_signal_lost_while_a_child_starts_still_stops_the_command(monkeypatch):
    real = subprocess.Popen
    started: list[subprocess.Popen] = []

    def popen(*args, **kwargs):
        _SwallowsASignal()  # dropped at once: its __del__ runs now
        started.append(real(*args, **kwargs))
        return started[-1]

    monkeypatch.setattr(subprocess, "Popen", popen)
    began = time.monotonic()
    with sigterm_raises(), pytest.raises(Terminated):
        LocalTarget().run(["sleep", "30"])
    assert time.monotonic() - began < 10  # stopped, not waited for
    assert started and started[0].poll() is not None  # and the child was killed
