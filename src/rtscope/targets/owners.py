"""What a process of rtscope leaves behind is named after it: `<prefix><host>-<pid>-<random>`. A name says
whether its owner still runs (on this host: is the pid alive), so that what a killed rtscope left (a run
directory, a tracefs instance, an undo journal) is removed or undone by the next rtscope, and never what a
live one uses."""

from __future__ import annotations

import functools
import os
import re
import shutil
import socket
import tempfile
from dataclasses import dataclass


def host_tag() -> str:
    return re.sub(r"[^A-Za-z0-9_.]", "_", socket.gethostname())[:40] or "host"


def pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


@dataclass
class Owner:
    host: str
    pid: int

    @property
    def alive(self) -> bool | None:
        """Whether the rtscope that made it still runs: None when it ran on another host (cannot tell)."""
        if self.host != host_tag():
            return None
        return pid_alive(self.pid)

    @property
    def gone(self) -> bool:
        """It ran on this host, is not this process, and has ended."""
        return self.pid != os.getpid() and self.alive is False


def owned_name(prefix: str) -> str:
    """The start of a name this process owns: `<prefix><host>-<pid>-`."""
    return f"{prefix}{host_tag()}-{os.getpid()}-"


def owner_of(prefix: str, name: str) -> Owner | None:
    m = re.fullmatch(re.escape(prefix) + r"([A-Za-z0-9_.]+)-(\d+)-[A-Za-z0-9_]+", name)
    return Owner(m[1], int(m[2])) if m else None


RUN_DIR_PREFIX = "rtscope-run-"


def run_directory() -> tempfile.TemporaryDirectory:
    """The controller's directory for one run (its sample files come here), named after this process; the first
    one a process makes removes those a killed rtscope on this host left in the same temporary directory."""
    _remove_stale_run_directories(tempfile.gettempdir())
    return tempfile.TemporaryDirectory(prefix=owned_name(RUN_DIR_PREFIX))


@functools.cache
def _remove_stale_run_directories(parent: str) -> None:
    """Once per process and temporary directory: a scan of it is not owed again for each run."""
    try:
        entries = list(os.scandir(parent))
    except OSError:
        return
    for entry in entries:
        found = owner_of(RUN_DIR_PREFIX, entry.name)
        if found is None or not found.gone:
            continue
        try:
            mine = entry.is_dir(follow_symlinks=False) and entry.stat(follow_symlinks=False).st_uid == os.getuid()
        except OSError:
            continue
        if mine:
            shutil.rmtree(entry.path, ignore_errors=True)
