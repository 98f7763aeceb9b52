"""System setting `load` with a real stress-ng: started before the measurement, stopped after it, also on error,
SIGTERM and Ctrl-C, never leaving a process behind. Bad values and the command lines: tests/test_load_units.py."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from rtscope.settings import loadgen as load
from rtscope.errors import RtscopeError
from rtscope.store import Store
from proc_helpers import default_signals
from test_load_units import spec

pytestmark = [pytest.mark.real, pytest.mark.alone]

needs_stress = pytest.mark.skipif(shutil.which("stress-ng") is None, reason="stress-ng not installed")
NCPU = len(os.sched_getaffinity(0))


def processes() -> dict[int, tuple[int, int, str]]:
    """pid -> (ppid, session, name) of every live process."""
    out = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                stat = Path(f"/proc/{entry}/stat").read_text()
            except OSError:
                continue
            fields = stat[stat.rindex(")") + 2:].split()
            if fields[0] != "Z":
                out[int(entry)] = (int(fields[1]), int(fields[3]), stat[stat.index("(") + 1:stat.rindex(")")])
    return out


def descendants(root: int) -> dict[int, tuple[int, int, str]]:
    procs, found, todo = processes(), {}, [root]
    while todo:
        parent = todo.pop()
        for pid, info in procs.items():
            if info[0] == parent and pid not in found:
                found[pid] = info
                todo.append(pid)
    return found


@needs_stress
def test_start_and_stop_leave_nothing(tmp_path):
    ld = load.Load("cpu", tmp_path)
    ld.start()
    try:
        members = load.session_members(ld.proc.pid)
        assert len(members) >= NCPU + 1  # the generator and one worker per CPU
        assert ld.running and all(processes()[p][2].startswith("stress-ng") for p in members)
    finally:
        ld.stop()
    assert load.session_members(ld.proc.pid) == [] and not ld.running
    ld.stop()  # idempotent


@needs_stress
def test_run_under_load_records_it_and_cleans_up(cli, db, tmp_path, rtprobe, monkeypatch):
    seen = []
    start = load.Load.start

    def spy(self):
        start(self)
        seen.append((self, len(load.session_members(self.proc.pid))))

    monkeypatch.setattr(load.Load, "start", spy)
    r = cli("run", spec(tmp_path, "cpu"), "--db", db)
    assert r.code == 0, r.err
    [run] = Store(db).runs()
    assert run["settings"]["load"] == "cpu" and run["workload"] == "exec"
    assert any(n.startswith("load cpu: stress-ng --cpu") for n in run["trailer"]["notes"])
    [(ld, members)] = seen
    assert members >= NCPU + 1 and load.session_members(ld.proc.pid) == []


@needs_stress
def test_load_is_stopped_when_the_probe_fails(cli, db, tmp_path, rtprobe, monkeypatch):
    seen = []
    start = load.Load.start
    monkeypatch.setattr(load.Load, "start", lambda self: (start(self), seen.append(self)))
    # A refused output directory makes the probe fail after the load started.
    monkeypatch.setenv("RTSCOPE_RTPROBE", str(tmp_path / "fails.sh"))
    (tmp_path / "fails.sh").write_text("#!/bin/sh\necho 'rtprobe: simulated failure' >&2\nexit 1\n")
    (tmp_path / "fails.sh").chmod(0o755)
    r = cli("run", spec(tmp_path, "cpu"), "--db", db)
    assert r.code == 1 and "simulated failure" in r.err
    assert seen and load.session_members(seen[0].proc.pid) == []
    assert Store(db).runs() == []


@needs_stress
@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT])
def test_signal_mid_run_leaves_no_survivors(db, tmp_path, rtprobe, sig):
    # A 20 s timer run under load; interrupted after the load is up.
    argv = [sys.executable, "-m", "rtscope", "run",
            str(spec(tmp_path, "cpu", "timer", "interval_us = 1000\nloops = 20000", "absolute")), "--db", db]
    proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            preexec_fn=default_signals)
    sessions: set[int] = set()
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline and proc.poll() is None:
        found = descendants(proc.pid)
        stress = {info[1] for info in found.values() if info[2].startswith("stress-ng")}
        probes = [pid for pid, info in found.items() if info[2] == "rtprobe"]
        if stress and probes:
            sessions |= stress
            break
        time.sleep(0.05)
    assert sessions, "the load and the probe never both ran"
    proc.send_signal(sig)
    proc.communicate(timeout=60)
    assert proc.returncode != 0
    leftover = {pid: info for pid, info in processes().items() if info[1] in sessions}
    assert leftover == {}
    assert Store(db).runs() == []


@needs_stress
def test_generator_that_exits_at_once_is_an_error(tmp_path, monkeypatch):
    monkeypatch.setattr(load, "command", lambda kind, n, workdir: ["stress-ng", "--no-such-stressor", "1"])
    ld = load.Load("cpu", tmp_path)
    with pytest.raises(RtscopeError, match="exited at once"):
        ld.start()
    assert load.session_members(ld.proc.pid) == []
