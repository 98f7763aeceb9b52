"""Where VM kernels and images are kept: the user's cache directory, by content."""

from __future__ import annotations

import fcntl
import hashlib
import json
import os
import shutil
from contextlib import contextmanager
from pathlib import Path
from typing import Iterator

from ..errors import RtscopeError


def cache_dir(*parts: str) -> Path:
    """$RTSCOPE_CACHE, else $XDG_CACHE_HOME/rtscope, else ~/.cache/rtscope."""
    base = os.environ.get("RTSCOPE_CACHE") or os.path.join(
        os.environ.get("XDG_CACHE_HOME") or os.path.expanduser("~/.cache"), "rtscope")
    path = Path(base, *parts)
    path.mkdir(parents=True, exist_ok=True)
    return path


def digest(*inputs: object) -> str:
    """A short content key of everything an artefact is made from."""
    return hashlib.sha256(json.dumps(inputs, sort_keys=True, default=str).encode()).hexdigest()[:16]


def file_digest(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()[:16]


def need_space(where: Path, nbytes: int, what: str) -> None:
    """A clear error before a large build when the cache's disk lacks room for it."""
    free = shutil.disk_usage(where).free
    if free < nbytes:
        raise RtscopeError(f"not enough disk space for {what} in {where}: {nbytes >> 20} MiB needed, "
                           f"{free >> 20} MiB free (set RTSCOPE_CACHE to a roomier place)")


@contextmanager
def building(artefact: Path) -> Iterator[None]:
    """Hold the lock of one cached artefact while it is checked and built: targets of a fleet (threads) and
    other rtscope processes that need the same kernel, root file system or image build it once."""
    artefact.parent.mkdir(parents=True, exist_ok=True)
    with open(f"{artefact}.lock", "a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        yield
