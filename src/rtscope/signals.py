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


# The stop signals whose exception was raised, and the last of them. A signal that arrives while a child
# process is being forked has its exception raised inside CPython's at-fork callbacks, which print it
# ("Exception ignored in ... _releaseLock") and go on: the starter of a child compares the count before and
# after (raise_if_lost) and raises it again.
_raised = 0
_last: BaseException | None = None


def _raise(exc: BaseException) -> None:
    global _raised, _last
    _raised, _last = _raised + 1, exc
    raise exc


def raised() -> int:
    return _raised


def raise_if_lost(before: int) -> None:
    """After starting a child, with `before` = raised() before it: raise again a stop signal's exception that
    was swallowed meanwhile. Only in the main thread: the handlers raise there, so another thread's fork cannot
    have swallowed one (and must not raise the main thread's again)."""
    if _raised != before and _last is not None and threading.current_thread() is threading.main_thread():
        raise _last


@contextmanager
def sigterm_raises() -> Iterator[None]:
    """SIGTERM raises Terminated, SIGINT KeyboardInterrupt (both counted for raise_if_lost)."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def on_term(signum, _frame):
        _raise(Terminated(f"terminated by signal {signum}"))

    def on_int(_signum, _frame):
        _raise(KeyboardInterrupt())

    previous = signal.signal(signal.SIGTERM, on_term)
    previous_int = signal.signal(signal.SIGINT, on_int) if signal.getsignal(signal.SIGINT) is \
        signal.default_int_handler else None
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)
        if previous_int is not None:
            signal.signal(signal.SIGINT, previous_int)


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


def keep_exit_code() -> None:
    """Let rtscope's own exit code stand after a Ctrl-C it caught and said.

    CPython (3.11) marks the process to die by SIGINT at exit once a KeyboardInterrupt leaves code that `exec` or
    `eval` of a string runs, even when that exception is caught later. Imports do that (scipy's array API
    wrappers, dataclasses, namedtuple), and rtscope imports lazily, so a Ctrl-C landing in such an import made
    an interrupted run die by SIGINT after saying how to resume, instead of exiting 130. The mark is cleared
    here (a KeyboardInterrupt that leaves rtscope uncaught still sets it again on the way out)."""
    try:
        ctypes.c_int.in_dll(ctypes.pythonapi, "_Py_UnhandledKeyboardInterrupt").value = 0
    except (ValueError, AttributeError):
        pass  # another Python keeps the mark elsewhere


def die_with_parent() -> None:
    """In a child: get SIGKILL if rtscope dies without stopping it (kill -9)."""
    try:
        ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG
    except (OSError, AttributeError):
        pass
