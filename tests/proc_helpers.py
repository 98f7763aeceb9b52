"""Helpers for tests that signal the processes they start."""

import os
import signal
from pathlib import Path


def default_signals() -> None:
    """preexec_fn: SIGINT and SIGQUIT back to their defaults in the child.

    A shell runs background jobs with SIGINT ignored, and children inherit that;
    Python then never raises KeyboardInterrupt, and a test of Ctrl-C would test nothing.
    """
    signal.signal(signal.SIGINT, signal.SIG_DFL)
    signal.signal(signal.SIGQUIT, signal.SIG_DFL)


def command_lines() -> list[tuple[int, list[bytes]]]:
    """Every running process: its pid and its command line's arguments."""
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            found.append((int(entry), Path(f"/proc/{entry}/cmdline").read_bytes().split(b"\0")))
        except OSError:
            continue
    return found
