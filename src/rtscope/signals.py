"""Signal handling around system changes: SIGTERM as an exception, signals held while undoing, and children
that die with rtscope."""

from __future__ import annotations

import ctypes
import signal
import threading
from contextlib import contextmanager
from typing import Iterator


class Terminated(BaseException):
    """Raised in the main thread when SIGTERM arrives, so every `finally` and undo runs."""


@contextmanager
def sigterm_raises() -> Iterator[None]:
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def handler(signum, _frame):
        raise Terminated(f"terminated by signal {signum}")

    previous = signal.signal(signal.SIGTERM, handler)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


@contextmanager
def held_signals() -> Iterator[None]:
    """Hold SIGINT/SIGTERM off (they are delivered on exit), so that undoing a setting is never cut short."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT, signal.SIGTERM})
    try:
        yield
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, previous)


def die_with_parent() -> None:
    """In a child: get SIGKILL if rtscope dies without stopping it (kill -9)."""
    try:
        ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG
    except (OSError, AttributeError):
        pass
