"""Stop signals always stop: also one that arrives while a child process is being forked, whose exception
CPython's at-fork callbacks print and drop ("Exception ignored in ... _releaseLock")."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time

import pytest

from rtscope.signals import Terminated, sigterm_raises
from rtscope.targets import LocalTarget
from rtscope.targets.pool import Pool

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


def test_an_interrupt_caught_in_an_import_keeps_the_exit_code(tmp_path):
    """A Ctrl-C that leaves `exec` of a string (as lazy imports do) and is caught: the command's own exit code
    stands (CPython would otherwise kill the process by SIGINT at exit)."""
    script = tmp_path / "caught.py"
    script.write_text("import sys\nfrom rtscope.signals import keep_exit_code\n"
                      "try:\n    exec('raise KeyboardInterrupt')\nexcept KeyboardInterrupt:\n    pass\n"
                      "if sys.argv[1] == 'keep':\n    keep_exit_code()\nsys.exit(130)\n")
    run = [sys.executable, "-m", "caught"]                      # run as rtscope is (`python -m`)
    without = subprocess.run([*run, "plain"], capture_output=True, cwd=tmp_path)
    kept = subprocess.run([*run, "keep"], capture_output=True, cwd=tmp_path)
    assert without.returncode == -signal.SIGINT   # the quirk this mends, still there in this Python
    assert kept.returncode == 130, kept.stderr


def test_a_pool_that_fails_to_close_does_not_hide_what_stopped_the_command():
    class Sticky(LocalTarget):
        def close(self):
            raise EOFError("the connection was cut")

    with pytest.raises(KeyboardInterrupt):
        with Pool() as pool:
            pool._targets["sticky"] = Sticky()
            raise KeyboardInterrupt
    with pytest.raises(EOFError):                  # nothing in flight: the failure itself is said
        with Pool() as pool:
            pool._targets["sticky"] = Sticky()


def test_another_thread_never_raises_the_main_threads_interrupt():
    import rtscope.signals as signals
    before = signals.raised()
    with sigterm_raises(), pytest.raises(Terminated):
        os.kill(os.getpid(), signal.SIGTERM)
        for _ in range(1_000_000):
            pass
    raised_in_thread: list[BaseException] = []

    def lost_check():
        try:
            signals.raise_if_lost(before)
        except BaseException as e:  # noqa: BLE001
            raised_in_thread.append(e)

    t = threading.Thread(target=lost_check)
    t.start()
    t.join()
    assert raised_in_thread == []
    with pytest.raises(Terminated):                # the main thread still gets one it lost
        signals.raise_if_lost(before)
