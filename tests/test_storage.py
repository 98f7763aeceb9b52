"""Workload storage on the native runtime where the file system says no: not enough free space (a 1 MiB tmpfs) and
a directory that cannot be written (a read-only tmpfs as root), each a clear error, nothing stored. Parameters
and runs as a normal task: tests/test_storage_units.py."""

from __future__ import annotations

import os
import subprocess

import pytest

from rtscope.errors import ProbeError
from rtscope.experiment.runner import execute
from rtscope.experiment.spec import build_request
from rtscope.runtimes import RUNTIMES
from rtscope.store import Store
from mounts import mounted

pytestmark = pytest.mark.real

IS_ROOT = os.geteuid() == 0


@pytest.fixture
def small_tmpfs(tmp_path):
    """A real 1 MiB tmpfs (root only)."""
    with mounted(["-t", "tmpfs", "-o", "size=1m", "rtscope-test"], tmp_path / "small", "a small tmpfs") as mnt:
        yield mnt


def test_not_enough_free_space(tmp_path, rtprobe, small_tmpfs):
    store = Store(str(tmp_path / "s.db"))
    for runtime, err in (("native", ProbeError), ("fio", Exception)):
        if runtime == "fio" and RUNTIMES["fio"].unavailable():
            continue
        req = build_request("storage", "write_sync", runtime, {"size": "2M", "repetitions": 1, "dir": str(small_tmpfs)})
        with pytest.raises(err, match="not enough free space in .*small'"):
            execute(req, store)
        assert list(small_tmpfs.iterdir()) == []
    assert store.runs() == []


def test_unwritable_directory(tmp_path, rtprobe):
    if IS_ROOT:
        mnt = tmp_path / "ro"
        mnt.mkdir()
        if subprocess.run(["mount", "-t", "tmpfs", "-o", "size=1m,ro", "rtscope-ro", str(mnt)]).returncode:
            pytest.skip("cannot mount a read-only tmpfs here")
        message = "is not writable: Read-only file system"
    else:
        mnt = tmp_path / "ro"
        mnt.mkdir(mode=0o555)
        message = "is not writable: Permission denied"
    try:
        store = Store(str(tmp_path / "s.db"))
        req = build_request("storage", "write", "native", {"repetitions": 2, "dir": str(mnt)})
        with pytest.raises(ProbeError, match=message):
            execute(req, store)
        assert store.runs() == []
    finally:
        if IS_ROOT:
            subprocess.run(["umount", str(mnt)], check=True)
