"""Experiments: resume after kill -9 of the CLI and its probe mid-experiment (a process of its own) neither repeats
nor loses a run. Order, execution, failure and skip: tests/test_experiment_units.py."""

import os
import signal
import sqlite3
import subprocess
import sys
import time

import pytest

from test_experiment_units import SPEC

pytestmark = pytest.mark.real


def _count_runs(db):
    try:
        with sqlite3.connect(db) as c:
            return c.execute("select count(*) from runs").fetchone()[0]
    except sqlite3.OperationalError:
        return 0


def test_resume_after_kill_9_neither_repeats_nor_loses_a_run(tmp_path, rtprobe):
    """Killed (-9, no chance to clean up) and resumed: every run once, and the killed one's run directory
    (named after its pid) removed by the next rtscope."""
    spec = tmp_path / "small.toml"
    # runs of 20 calls 10 ms apart, so that most of the time a run (and its directory) is in progress: the kill
    # below waits for one, and lands in it unless it ends within the next millisecond
    spec.write_text(SPEC.format(reps=6).replace("pause_ms = 0", "pause_ms = 10"))
    db = tmp_path / "k.db"
    tmp = tmp_path / "tmp"
    tmp.mkdir()
    env = {**os.environ, "TMPDIR": str(tmp)}
    argv = [sys.executable, "-m", "rtscope", "run", str(spec), "--db", str(db)]
    proc = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True,
                            env=env)
    try:
        deadline = time.monotonic() + 90
        while _count_runs(db) < 5 or not list(tmp.glob(f"rtscope-run-*-{proc.pid}-*")):
            assert proc.poll() is None, "finished before it could be killed"
            assert time.monotonic() < deadline
            time.sleep(0.02)
        os.killpg(proc.pid, signal.SIGKILL)  # the CLI and its probe, at once
        proc.wait()
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
    before = _count_runs(db)
    assert 5 <= before < 24
    with sqlite3.connect(db) as c:
        assert c.execute("select status from experiments").fetchall() == [("running",)]  # it had no chance
    left = [p.name for p in tmp.glob(f"rtscope-run-*-{proc.pid}-*")]
    assert len(left) == 1, sorted(p.name for p in tmp.iterdir())
    res = subprocess.run(argv + ["--resume"], capture_output=True, text=True, timeout=300, env=env)
    assert res.returncode == 0, res.stderr
    assert f"{before} of 24 runs already stored" in " ".join(res.stderr.split())
    assert not [p.name for p in tmp.glob("rtscope-run-*")]
    with sqlite3.connect(db) as c:
        indexes = [i for (i,) in c.execute("select plan_index from runs order by plan_index")]
        assert indexes == list(range(24))
        assert c.execute("select count(distinct run_id) from sample_chunks").fetchone() == (24,)
        assert c.execute("select status from experiments").fetchall() == [("finished",)]
        assert c.execute("select count(*) from runs where experiment_id = 1").fetchone() == (24,)
