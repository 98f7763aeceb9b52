"""Setting explain on runs that keep a histogram instead of every sample (rtprobe timer --histogram-us), and
`rtscope monitor --explain K` on the real kernel: the culprit of tests/culprit.py is named in the worst samples
the probe kept; each interval makes and removes its own tracefs instance and window keeper, also when the
monitor is stopped by Ctrl-C or SIGTERM midway. The probe's kept samples and the refusals:
tests/test_explain_histogram_units.py."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import pytest

import culprit
from proc_helpers import command_lines, default_signals
from rtscope.analysis.explain_shares import culprit as culprit_name
from rtscope.store import Store
from rtscope.targets import tracefs

pytestmark = [pytest.mark.real, pytest.mark.alone]

CPUS = sorted(os.sched_getaffinity(0))
WHY = culprit.tracing_unavailable()
needs_tracing = pytest.mark.skipif(WHY is not None, reason=WHY or "")


def instances_of(pid: int) -> list[str]:
    """The tracefs instances of the rtscope with this pid (other rtscopes on this machine may trace too)."""
    return [name for name in culprit.instances() if (who := tracefs.owner(name)) and who.pid == pid]


def processes_under(directory: Path, name: bytes | None = None) -> list[int]:
    """Running processes whose command line names a path below `directory` (a run's window keeper: its marks
    file and trace-windows; with `name`, only that program, e.g. the probe writing its run.rts there)."""
    return [pid for pid, cmd in command_lines()
            if any(str(directory).encode() in a for a in cmd) and (name is None or cmd[0].endswith(name))]


@pytest.mark.timing
@needs_tracing
def test_histogram_run_explains_the_worst_samples_the_probe_kept(cli, db, tmp_path, rtprobe):
    p = tmp_path / "hist.toml"
    p.write_text('name = "hist"\n[[workload]]\nname = "timer"\nvariants = ["absolute"]\nruntime = "native"\n'
                 "[workload.params]\nloops = 3000\ninterval_us = 1000\nhistogram_us = 10000\n"
                 f"[workload.settings]\nexplain = 8\ncpu = {CPUS[-1]}\nrt_priority = 85\nmlock = true\n")
    with culprit.culprit(CPUS[-1]) as pid:
        r = cli("run", p, "--db", db)
    assert r.code == 0, r.err
    assert instances_of(os.getpid()) == []
    store = Store(db)
    [run] = store.runs()
    assert run["n_samples"] == 0 and run.trailer["histograms"]["thread0"]["n"] == 3000  # statistics: the histogram's
    kept = run.trailer["worst"]
    assert len(kept) == 8 and [k["value"] for k in kept] == sorted((k["value"] for k in kept), reverse=True)
    assert kept[0]["value"] == run.trailer["histograms"]["thread0"]["max"]  # the worst kept is the run's maximum
    assert {k["cpu"] for k in kept} == {CPUS[-1]} and all(k["start"] > 0 for k in kept)
    out = json.loads(cli("explain", run.id, "--db", db, "--json").out)
    samples = out["samples"]
    assert [s["value_ns"] for s in samples] == [k["value"] for k in kept]
    assert [s["start_ns"] for s in samples] == [k["start"] for k in kept]
    assert [s["cycle"] for s in samples] == [k["cycle"] for k in kept]
    big, named = culprit.check_named(samples, pid, stalls_out=True)
    assert big >= 5, samples  # 3 s at one burst per 200 ms: the worst eight are its doing
    assert named >= 0.9 * big, [(s["value_ns"], [(c["name"], c["duration_ns"]) for c in s["causes"][:2]])
                                for s in samples]
    assert f"thread {culprit.NAME}/{pid}" in cli("show", run.id, "--db", db).out
    assert f"sample 0 (thread 0, CPU {CPUS[-1]}, cycle {kept[0]['cycle']})" in cli("explain", run.id, "--db", db).out


@pytest.mark.timing
@needs_tracing
def test_monitor_explains_every_interval_and_leaves_nothing(cli, db, tmp_path, rtprobe, monkeypatch):
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))  # the intervals' run directories, to find keepers
    keepers: list[int] = []

    def watch(stop: threading.Event) -> None:  # a keeper runs while the monitoring measures
        while not stop.is_set() and not keepers:
            keepers.extend(processes_under(tmp_path, b"sh"))
            time.sleep(0.1)

    stop = threading.Event()
    watcher = threading.Thread(target=watch, args=(stop,))
    watcher.start()
    try:
        with culprit.culprit(CPUS[-1]) as pid:
            r = cli("monitor", "--duration", "6s", "--interval", "3s", "--interval-us", "1000", "--explain", "3",
                    "--rt-priority", "85", "--db", db)
    finally:
        stop.set()
        watcher.join()
    assert r.code == 0, r.err
    assert keepers, "no window keeper seen while the monitoring ran"
    assert instances_of(os.getpid()) == [] and processes_under(tmp_path) == []
    assert not any(tmp_path.glob("rtscope-run-*"))  # the marks and kept windows went with each interval's run
    store = Store(db)
    runs = store.runs()
    assert len(runs) == 2 and r.out.count("      why: ") == 2
    big = named = 0
    for run in runs:
        assert run["n_samples"] == 0 and run.settings["explain"] == 3 and run.settings["rt_priority"] == 85
        explained = store.causes(run.id)
        assert len(explained) == 3 * len(run.trailer["threads"])  # K per CPU
        mine = [s for s in explained if s["cpu"] == CPUS[-1]]
        b, n = culprit.check_named(mine, pid)
        assert n >= 1, [(s["value_ns"], [(c["name"], c["prio"], c["duration_ns"]) for c in s["causes"][:2]])
                        for s in mine]  # every interval names it
        big, named = big + b, named + n
        assert run.trailer["explain"]["trace_bytes_per_sample"] > 0
    # Of the intervals' worst samples on its CPU, most are its doing (on this shared machine, now and then
    # another test's real-time thread or a non-preemptible section outdoes it).
    assert named >= 0.65 * big
    text = cli("explain", runs[-1].id, "--db", db, "--worst", "1").out
    assert text.count("\nsample ") == 1
    # rtscope serve's monitoring page: the top cause of each interval, linked to the interval's why section.
    from served import Served
    server = Served(db, log=tmp_path / "serve.log")
    try:
        status, body, _ = server.get(f"/monitors/{runs[0].experiment_id}")
        assert status == 200 and "top cause" in body
        assert all(f'href="/runs/{run.id}#why"' in body for run in runs)
        status, body, _ = server.get(f"/runs/{runs[0].id}")
        # the timeline of the interval's worst sample, its top cause in its lane (the culprit mostly; on this
        # shared VM now and then another CPU's worse sample)
        worst = max(store.causes(runs[0].id), key=lambda s: s["value_ns"])
        lanes = [culprit_name(c) for c in worst["causes"][:1]]
        assert status == 200 and 'id="why"' in body and all(lane in body for lane in lanes), worst["causes"][:2]
    finally:
        server.stop()


@needs_tracing
@pytest.mark.parametrize("sig, code", [(signal.SIGINT, 130), (signal.SIGTERM, 143)])
def test_monitor_stopped_midway_leaves_no_instance_or_keeper(tmp_path, rtprobe, sig, code):
    db = str(tmp_path / "m.db")
    argv = [sys.executable, "-m", "rtscope", "monitor", "--duration", "40s", "--interval", "20s", "--explain", "3",
            "--db", db]
    proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            env={**os.environ, "TMPDIR": str(tmp_path)}, preexec_fn=default_signals)
    try:
        deadline = time.monotonic() + 30
        while not (instances_of(proc.pid) and processes_under(tmp_path, b"rtprobe")) and time.monotonic() < deadline:
            time.sleep(0.1)
        [left] = instances_of(proc.pid)
        assert processes_under(tmp_path, b"sh"), "no window keeper"
        time.sleep(1)
        proc.send_signal(sig)
        _, err = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
    assert proc.returncode == code, err
    assert "resume with `rtscope monitor --target local --resume`" in " ".join(err.split())
    assert instances_of(proc.pid) == [] and not (culprit.TRACEFS / "instances" / left).exists()
    deadline = time.monotonic() + 10
    while processes_under(tmp_path) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert processes_under(tmp_path) == []  # neither keeper nor probe
    assert Store(db).runs() == []


@needs_tracing
def test_monitor_killed_leaves_no_keeper_and_resume_removes_its_instance(tmp_path, rtprobe):
    """kill -9 of the monitor: its probe and window keeper die with it; its instance cannot be removed by a
    dead process, so `monitor --resume` (its next interval) removes it and says so in that run's notes."""
    db = str(tmp_path / "m.db")
    argv = [sys.executable, "-m", "rtscope", "monitor", "--duration", "4s", "--interval", "2s", "--explain", "2",
            "--db", db]
    env = {**os.environ, "TMPDIR": str(tmp_path)}
    proc = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env)
    try:
        deadline = time.monotonic() + 30
        while not (instances_of(proc.pid) and processes_under(tmp_path, b"rtprobe")) and time.monotonic() < deadline:
            time.sleep(0.1)
        [left] = instances_of(proc.pid)
        proc.kill()
        proc.wait()
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    deadline = time.monotonic() + 10
    while processes_under(tmp_path) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert processes_under(tmp_path) == []  # neither keeper nor probe outlived it
    # Any rtscope of this host starting a run with explain removes it (another one on this shared machine may
    # be first): then the resumed monitoring's notes do not name it.
    still_there = (culprit.TRACEFS / "instances" / left).exists()
    r = subprocess.run(argv[:4] + ["--resume", "--db", db], capture_output=True, text=True, timeout=120, env=env)
    assert r.returncode == 0, r.stderr
    assert not (culprit.TRACEFS / "instances" / left).exists()
    notes = [n for run in Store(db).runs() for n in run.trailer.get("notes", [])]
    assert any(left in n for n in notes) or not still_there, notes
