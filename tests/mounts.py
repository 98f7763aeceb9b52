"""A file system mounted for one test (root only): skipped, with why, where this machine cannot mount it."""

from __future__ import annotations

import os
import subprocess
from contextlib import contextmanager
from pathlib import Path
from typing import Iterator

import pytest


@contextmanager
def mounted(mount_args: list[str], mnt: Path, what: str) -> Iterator[Path]:
    """`mount MOUNT_ARGS... MNT`, unmounted after the block; `what` names it in a skip."""
    if os.geteuid() != 0:
        pytest.skip(f"needs root to mount {what}")
    mnt.mkdir()
    res = subprocess.run(["mount", *mount_args, str(mnt)], capture_output=True, text=True)
    if res.returncode:
        pytest.skip(f"cannot mount {what} here: {res.stderr.strip()}")
    try:
        yield mnt
    finally:
        subprocess.run(["umount", str(mnt)], check=True)
