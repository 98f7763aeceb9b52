"""The CLI as an unprivileged user, which root becomes for the test (setpriv, no RLIMIT_RTPRIO): a SCHED_FIFO
priority the kernel refuses is an error that stores nothing, and a store it cannot write is named. The rest of
the CLI's foundations: tests/test_cli_foundation.py."""

import os
import shutil
import subprocess
import sys

import pytest

from rtscope.store import Store
from test_cli_foundation import SPEC, write_spec

pytestmark = pytest.mark.real


@pytest.fixture
def open_dir():
    """A directory that an unprivileged user can reach (pytest's tmp root is private to root)."""
    import tempfile
    d = tempfile.mkdtemp(prefix="rtscope-test-")
    os.chmod(d, 0o777)
    yield __import__("pathlib").Path(d)
    shutil.rmtree(d)


def as_nobody(argv, **kw):
    return subprocess.run(["prlimit", "--rtprio=0:0", "setpriv", "--reuid=nobody", "--regid=nogroup",
                           "--clear-groups", *argv], capture_output=True, text=True, **kw)


@pytest.mark.skipif(os.geteuid() != 0 or not shutil.which("setpriv"), reason="needs root to become nobody")
def test_refused_sched_fifo_is_an_error_and_stores_nothing(open_dir, rtprobe):
    tmp_path = open_dir
    spec = write_spec(tmp_path, SPEC + "[workload.settings]\nrt_priority = 90\n")
    db = tmp_path / "fifo.db"
    r = as_nobody([sys.executable, "-m", "rtscope", "run", str(spec), "--db", str(db)])
    assert r.returncode == 1, r.stderr
    assert "SCHED_FIFO priority 90 refused by the kernel" in r.stderr
    assert Store(str(db)).runs() == []


@pytest.mark.skipif(os.geteuid() != 0 or not shutil.which("setpriv"), reason="needs root to become nobody")
def test_unwritable_store_as_unprivileged_user(open_dir):
    locked = open_dir / "locked"
    locked.mkdir(mode=0o755)
    r = as_nobody([sys.executable, "-m", "rtscope", "runs", "--db", str(locked / "s.db")])
    assert r.returncode == 2 and "not writable" in r.stderr
