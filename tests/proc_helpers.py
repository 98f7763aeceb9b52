"""Helpers for tests that signal the processes they start."""

import signal


def default_signals() -> None:
    """preexec_fn: SIGINT and SIGQUIT back to their defaults in the child.

    A shell runs background jobs with SIGINT ignored, and children inherit that;
    Python then never raises KeyboardInterrupt, and a test of Ctrl-C would test nothing.
    """
    signal.signal(signal.SIGINT, signal.SIG_DFL)
    signal.signal(signal.SIGQUIT, signal.SIG_DFL)
