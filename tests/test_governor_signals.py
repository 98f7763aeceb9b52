"""System settings governor and min_freq against a fake sysfs tree, with a real `rtscope run` in a process of its
own stopped mid-run: SIGTERM or Ctrl-C puts the old values back before it exits; after kill -9 the next run
writes them back from the undo journal. Applied, restored and unavailable in-process: tests/test_governor.py."""

import os
import signal
import sqlite3
import subprocess
import sys
import time

import pytest

from proc_helpers import default_signals
from fake_sysfs import fake_sysfs
from test_governor import read

pytestmark = pytest.mark.real


def signalled_mid_run(tmp_path, sig: int, iterations: int):
    """A real `rtscope run` that sets the (fake) governor and min_freq, given `sig` once both are applied:
    (sysfs root, its argv, its environment, its pid, its exit code, its stderr)."""
    root = fake_sysfs(tmp_path / "sysfs")
    spec = tmp_path / "g.toml"
    spec.write_text('name = "g"\n[[workload]]\nname = "exec"\nvariants = "sleep"\n'
                    f'[workload.params]\niterations = {iterations}\npause_ms = 0\n'
                    '[workload.settings]\ngovernor = "performance"\nmin_freq = "max"\n')
    env = dict(os.environ, RTSCOPE_SYSFS_ROOT=str(root))
    argv = [sys.executable, "-m", "rtscope", "run", str(spec), "--db", str(tmp_path / "g.db")]
    proc = subprocess.Popen(argv, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            preexec_fn=default_signals)
    try:
        deadline = time.monotonic() + 60
        while read(root, 1, "scaling_min_freq") != "1500000":
            assert proc.poll() is None, proc.communicate()
            assert time.monotonic() < deadline, "the settings were never applied"
            time.sleep(0.05)
        assert read(root, 0, "scaling_governor") == "performance"
        proc.send_signal(sig)
        _, err = proc.communicate(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
    return root, argv, env, proc.pid, proc.returncode, err


@pytest.mark.parametrize("sig, code", [(signal.SIGTERM, 143), (signal.SIGINT, 130)])
def test_settings_restored_after_sigterm_or_ctrl_c(tmp_path, sig, code):
    """A real `rtscope run` changes the (fake) governor, gets a signal mid-run: old values back, run not stored."""
    root, _, _, _, returncode, err = signalled_mid_run(tmp_path, sig, 2000)
    assert returncode == code, err
    assert "marked interrupted" in err and "--resume 1" in err
    for c in (0, 1):
        assert read(root, c, "scaling_governor") == "schedutil" and read(root, c, "scaling_min_freq") == "600000"
    with sqlite3.connect(tmp_path / "g.db") as c:
        assert c.execute("select status from experiments").fetchall() == [("interrupted",)]
        assert c.execute("select count(*) from runs").fetchone() == (0,)
        assert c.execute("select count(*) from sample_chunks").fetchone() == (0,)


def test_values_back_at_the_next_run_after_kill_9(tmp_path):
    """`kill -9` of a real `rtscope run` leaves the (fake) cpufreq files changed; the next run on this target
    (here `--resume`) writes the originals back from the undo journal before it applies anything."""
    root, argv, env, pid, returncode, _ = signalled_mid_run(tmp_path, signal.SIGKILL, 400)
    assert returncode == -signal.SIGKILL
    assert read(root, 0, "scaling_governor") == "performance"  # nobody was left to put it back
    resumed = subprocess.run(argv + ["--resume"], env=env, capture_output=True, text=True, timeout=120)
    assert resumed.returncode == 0, resumed.stderr
    for c in (0, 1):
        assert read(root, c, "scaling_governor") == "schedutil" and read(root, c, "scaling_min_freq") == "600000"
    assert not [f for f in os.listdir("/run/rtscope/undo") if f"-{pid}-" in f]  # the journal went too
