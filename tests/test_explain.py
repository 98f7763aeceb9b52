"""Setting explain and `rtscope explain` on the real kernel: a culprit the test starts is named as the cause of
the samples it delays; kill -9 mid-run -> the instance is reported and removed at the next start
(tests/culprit.py). The attribution on trace text and the refusals: tests/test_explain_units.py."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

import culprit
import sshd
from proc_helpers import command_lines
from rtscope.analysis.explain_shares import culprit as culprit_name
from rtscope.store import Store
from test_explain_units import CPUS, spec

pytestmark = [pytest.mark.real, pytest.mark.alone]

WHY = culprit.tracing_unavailable()
needs_tracing = pytest.mark.skipif(WHY is not None, reason=WHY or "")
RTSCOPE = Path(sys.executable).with_name("rtscope")


@pytest.fixture(autouse=True)
def forget_targets(clean_targets):
    """The SSH test's target `board` is not left defined for the tests after these."""
    yield


# --- the real kernel ----------------------------------------------------------------------------------------

@pytest.mark.timing
@needs_tracing
def test_culprit_thread_is_named_with_its_delay(cli, db, tmp_path, rtprobe):
    with culprit.culprit(CPUS[-1]) as pid:
        r = cli("run", spec(tmp_path), "--db", db)
    assert r.code == 0, r.err
    assert culprit.instances() == []  # removed when the run ended
    [run] = Store(db).runs()
    assert run.settings["explain"] == 10 and run.trailer["explain"]["samples"] == 10
    assert run.trailer["explain"]["trace_bytes_per_sample"] > 0
    out = json.loads(cli("explain", run.id, "--db", db, "--json").out)
    assert out["run"] == run.id and len(out["samples"]) == 10
    samples = out["samples"]
    assert all(s["note"] is None for s in samples)
    for s in samples:  # causes sorted, within the sample's value, with the unexplained rest
        durations = [c["duration_ns"] for c in s["causes"]]
        assert durations == sorted(durations, reverse=True)
        assert sum(durations) + s["self_ns"] + s["unexplained_ns"] <= s["value_ns"] + 1000
    big, named = culprit.check_named(samples, pid, stalls_out=True)
    assert big >= 5, samples  # 3 s at one burst per 200 ms: the worst ten are its doing
    assert named >= 0.9 * big, [(s["value_ns"], [(c["name"], c["duration_ns"]) for c in s["causes"][:2]]) for s in samples]
    top = [r for r in out["summary"] if r["by"] == "culprit"][0]
    assert (top["name"], top["pid"], top["kind"]) == (culprit.NAME, pid, "thread") and top["share"] > 0.5
    shown = cli("show", run.id, "--db", db).out
    assert f"thread {culprit.NAME}/{pid}" in shown
    text = cli("explain", run.id, "--db", db, "--worst", "2").out
    assert text.count("\nsample ") == 2 and culprit.NAME in text
    # the culprit was started at SCHED_FIFO 90: the kernel's prio 9, shown as chrt says it
    tops = [s["causes"][0] for s in samples if s["causes"] and s["causes"][0]["pid"] == pid]
    assert tops and all((c["kernel_prio"], c["priority"]) == (9, "FIFO 90") for c in tops), tops
    assert all("prio" not in c for s in samples for c in s["causes"])
    rows = [line for line in text.splitlines() if line.startswith(f"thread {culprit.NAME}/{pid} ")]  # per sample
    assert rows and all(line.split()[2:4] == ["FIFO", "90"] for line in rows), text
    assert "prio" not in text


@pytest.mark.timing
@needs_tracing
def test_windows_the_keeper_did_not_copy_come_from_the_ring_buffer(cli, db, tmp_path, rtprobe, monkeypatch):
    """Without the window keeper every worst sample is read from what the ring buffer still holds (8 MiB: the
    whole of this 3 s run): the same causes, the culprit named."""
    from rtscope.targets import tracefs

    def no_keeper(self, run_dir, online):
        self.marks = f"{run_dir}/trace-marks.txt"  # the probe still marks; nothing copies its windows

    monkeypatch.setattr(tracefs.Instance, "keep_windows", no_keeper)
    with culprit.culprit(CPUS[-1]) as pid:
        r = cli("run", spec(tmp_path), "--db", db)
    assert r.code == 0, r.err
    [run] = Store(db).runs()
    assert run.trailer["explain"]["trace_bytes_read"] > 0
    samples = json.loads(cli("explain", run.id, "--db", db, "--json").out)["samples"]
    assert len(samples) == 10 and all(s["note"] is None for s in samples), [s["note"] for s in samples]
    big, named = culprit.check_named(samples, pid, stalls_out=True)
    assert big >= 5 and named >= 0.9 * big, samples


@pytest.mark.timing
@needs_tracing
def test_worst_samples_early_in_a_long_run_keep_their_windows(cli, db, tmp_path, rtprobe, monkeypatch):
    """The culprit only in the first 1.5 s of a 5 s run, and a ring buffer that holds about 1.5 s:
    the windows of the worst samples come from the window keeper, not the ring buffer's end."""
    import threading
    from rtscope.targets import tracefs
    monkeypatch.setattr(tracefs, "BUFFER_KB", 512)  # about 1.5 s of this run's events: the end of 5 s
    with culprit.culprit(CPUS[-1]) as pid:
        threading.Timer(1.5, os.kill, (pid, signal.SIGKILL)).start()
        r = cli("run", spec(tmp_path, loops=5000, explain=5), "--db", db)
    assert r.code == 0, r.err
    [run] = Store(db).runs()
    e = run.trailer["explain"]
    assert e["buffer_kb_per_cpu"] == 512 and e["windows_kept"] >= 5
    samples = json.loads(cli("explain", run.id, "--db", db, "--json").out)["samples"]
    # Every window found, the early ones too (the keeper misses one now and then: a known flaw, see the docs).
    found = [s for s in samples if s["note"] is None]
    assert len(found) >= len(samples) - 1, [(s["index"], s["value_ns"], s["note"]) for s in samples]
    early = [s for s in found if s["causes"] and s["causes"][0]["name"] == culprit.NAME]
    assert all(s["index"] < 2000 for s in early)  # the culprit ran in the first 1.5 s only
    _, named = culprit.check_named(early, pid)
    assert named >= 3, [(s["index"], s["value_ns"], s["causes"][:1]) for s in samples]


@pytest.mark.timing
@needs_tracing
def test_compare_gives_each_configuration_its_cause_shares(cli, db, tmp_path, rtprobe):
    """The probe below the culprit's priority and above it: compare says the tail's excess is the thread's
    below, and not above."""
    p = spec(tmp_path, loops=2000, explain=5)
    p.write_text(p.read_text().replace("rt_priority = 80", "rt_priority = [80, 95]"))
    with culprit.culprit(CPUS[-1]):
        r = cli("run", p, "--db", db)
    assert r.code == 0, r.err
    out = json.loads(cli("compare", "--db", db, "--baseline", "rt_priority=95", "--json").out)
    why = {c["configuration"]: c for c in out["causes"]}
    assert set(why) == {"rt_priority=80", "rt_priority=95"}
    below, above = why["rt_priority=80"], why["rt_priority=95"]
    assert below["reference"] == above["reference"] and below["samples"] == 5

    def thread_ns(c):
        return sum(k["excess_ns"] for k in c["kinds"] if k["kind"] == "thread") / max(c["samples"], 1)

    assert thread_ns(below) > 5e6
    [above_run] = next(c["runs"] for c in out["configurations"] if c["label"] == "rt_priority=95")
    above_samples = json.loads(cli("explain", above_run, "--db", db, "--json").out)["samples"]
    # Above the culprit's priority the probe preempts it: it never delays the probe by its 10 ms burst. A stall
    # of this VM's vCPU while the culprit held the CPU still shows as the culprit's (up to ~4 ms: 2.7 ms once).
    assert all(c["duration_ns"] < culprit.BUSY_S * 1e9 / 2 for s in above_samples for c in s["causes"]
               if c["name"] == culprit.NAME)
    assert "why: the excess above the baseline's pooled p99" in cli("compare", "--db", db, "--baseline", "rt_priority=95").out
    html = tmp_path / "report.html"
    assert cli("report", "--db", db, "-o", html, "--baseline", "rt_priority=95").code == 0
    page = html.read_text()
    # The why section: the share table and a timeline per worst sample (two per configuration).
    assert 'id="why"' in page and page.count("the grey bar is the sample") == 4
    [below_run] = next(c["runs"] for c in out["configurations"] if c["label"] == "rt_priority=80")
    worst = json.loads(cli("explain", below_run, "--db", db, "--json").out)["samples"][0]
    # Its timeline's top lane (mostly the culprit; on this shared VM now and then the thread scheduled out).
    assert culprit_name(worst["causes"][0]) in page, worst["causes"][0]
    # rtscope serve shows the same: the experiment's and the run's why sections, and explain's JSON.
    from served import Served
    server = Served(db, log=tmp_path / "serve.log")
    try:
        status, body, _ = server.get(f"/experiments/{Store(db).runs()[0].experiment_id}?baseline=rt_priority%3D95")
        assert status == 200 and 'id="why"' in body and body.count("the grey bar is the sample") == 4
        status, body, _ = server.get(f"/runs/{below_run}")
        assert status == 200 and 'id="why"' in body and culprit.NAME in body
        assert server.json(f"/api/runs/{below_run}/explain") == json.loads(
            cli("explain", below_run, "--db", db, "--json").out)
        assert server.get(f"/api/runs/{above_run + below_run + 100}/explain")[0] == 404
    finally:
        server.stop()


@pytest.mark.timing
@needs_tracing
@pytest.mark.skipif(sshd.available() is not None, reason=sshd.available() or "")
def test_culprit_named_on_an_ssh_target(cli, db, tmp_path, rtprobe):
    """The same culprit, the run on an SSH target (a real sshd in its own namespaces on this kernel): the
    instance is made, read and removed through the target."""
    server = sshd.SshServer(tmp_path / "board", "rtscope-board-explain").start()
    try:
        with culprit.culprit(CPUS[-1]) as pid:
            r = cli("run", spec(tmp_path, extra='target = "board"\n' + server.table("board")), "--db", db)
        assert r.code == 0, r.err
        assert culprit.instances() == []
        [run] = Store(db).runs()
        assert run.machine["target"] == "board"
        samples = json.loads(cli("explain", run.id, "--db", db, "--json").out)["samples"]
        big, named = culprit.check_named(samples, pid, stalls_out=True)
        assert big >= 5 and named >= 0.9 * big, json.dumps(samples, indent=1)[:4000]
    finally:
        server.stop()


def beam_quiet_flags() -> str:
    """A VM under SCHED_FIFO whose schedulers sleep at once when idle (no busy wait holding the CPU)."""
    return "+sbwt none +sbwtdcpu none +sbwtdio none"


@pytest.mark.timing
def test_beam_gc_named_as_the_cause(cli, db, tmp_path):
    """A BEAM exec run whose measuring process collects large heaps (5000 messages per call, a full sweep at
    every collection): its worst samples name its major collections, from the BEAM's own trace (with the kernel
    side's causes carved out of them: tests/test_explain_beam_kernel.py)."""
    from rtscope.runtimes import RUNTIMES
    if RUNTIMES["beam"].unavailable():
        pytest.skip(RUNTIMES["beam"].unavailable())
    p = tmp_path / "beam.toml"
    p.write_text('name = "gc"\n[[workload]]\nname = "exec"\nvariants = ["spawn_each"]\nruntime = "beam"\n'
                 "[workload.params]\nn = 5000\niterations = 20\npause_ms = 1\n"
                 "[workload.settings]\nexplain = 3\nfullsweep_after = 0\n"
                 # The VM pinned, above the machine's other threads (it is shared): the collector's time shows.
                 f'cpu = {CPUS[-1]}\nrt_priority = 80\nvm_flags = "{beam_quiet_flags()}"\n')
    r = cli("run", p, "--db", db)
    assert r.code == 0, r.err
    [run] = Store(db).runs()
    e = run.trailer["explain"]
    assert {k: e[k] for k in ("samples", "per_thread", "source")} == {"samples": 3, "per_thread": 3,
                                                                       "source": "erlang:trace"}
    # On this target (a shell and tracefs) the kernel side too: the trace's clock, and the harness's mapping.
    assert e["clock"] == "mono" and e["clock_mapping"]["source"] == "clock_gettime(CLOCK_MONOTONIC)"
    out = json.loads(cli("explain", run.id, "--db", db, "--json").out)
    values = sorted(Store(db).samples(run.id)["duration"].tolist(), reverse=True)
    assert [s["value_ns"] for s in out["samples"]] == values[:3]  # the three worst, largest first
    for s in out["samples"]:
        gc = [c for c in s["causes"] if c["kind"] == "gc"]
        assert [c["name"] for c in gc] == ["major"]  # fullsweep_after = 0: every collection is a full sweep
        major = gc[0]
        assert major["count"] >= 10 and major["heap_before"] > major["heap_after"] > 0
        assert sum(c["duration_ns"] for c in s["causes"]) + s["self_ns"] + s["unexplained_ns"] == s["value_ns"]
        # At least a tenth of the time the measuring process ran (its own work 13-56 ms beside 12 ms of
        # collections here). Not of the whole sample: the time it was scheduled out waits for the 5000 spawned
        # processes and varies (52 of 79 ms once); the OS's causes and a stall of this shared VM's vCPU
        # (unexplained) are the machine's.
        assert major["duration_ns"] > 0.1 * (major["duration_ns"] + s["self_ns"]), (s["causes"], s["self_ns"])
        assert isinstance(s["scheduler"], int) and s["scheduler"] >= 1
    # The summary names the collector among the kinds (whether it leads the time the process was scheduled out
    # varies: scheduled_out led once in CI; each sample's share is checked above).
    assert "gc" in [r["kind"] for r in out["summary"] if r["by"] == "kind"], out["summary"]
    assert "gc major" in cli("show", run.id, "--db", db).out


def keepers() -> list[int]:
    """Running window keepers of setting explain (their command line names their trace-windows directory)."""
    return [int(p) for p in subprocess.run(["pgrep", "-f", "trace-windows"], capture_output=True,
                                           text=True).stdout.split()]


def probes_of(spec_path: Path) -> list[int]:
    """Running rtprobe timer processes with this test's loop count (60000)."""
    return [pid for pid, cmd in command_lines() if cmd[0].endswith(b"rtprobe") and b"60000" in cmd]


@needs_tracing
def test_kill_9_instance_reported_and_removed_at_next_start(cli, db, tmp_path, rtprobe):
    path = spec(tmp_path, loops=60000, explain=3)
    proc = subprocess.Popen([str(RTSCOPE), "run", str(path), "--db", db], stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL, start_new_session=True)
    try:
        deadline = time.monotonic() + 30
        while not culprit.instances() and time.monotonic() < deadline:
            time.sleep(0.1)
        [left] = culprit.instances()
        while not (keepers() and probes_of(path)) and time.monotonic() < deadline:
            time.sleep(0.1)  # the keeper starts before the probe
        assert keepers() and probes_of(path)  # the window keeper and the probe run
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait()
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
    assert (culprit.TRACEFS / "instances" / left / "tracing_on").read_text().strip() == "1"  # what kill -9 leaves
    deadline = time.monotonic() + 10
    while probes_of(path) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not probes_of(path)  # the probe died with rtscope
    assert not keepers()  # and the keeper
    checked = cli("check", path)
    assert checked.code == 0 and f"tracefs instance {left}" in checked.out and "no longer running" in checked.out
    r = cli("run", spec(tmp_path, loops=200, explain=3), "--db", db)
    assert r.code == 0, r.err
    assert culprit.instances() == []
    [run] = Store(db).runs()
    assert any(left in note for note in run.trailer["notes"])
