"""Setting explain and `rtscope explain` on the real kernel: a culprit the test starts is named as the cause of
the samples it delays; no tracefs -> a clear refusal; kill -9 mid-run -> the instance is reported and removed
at the next start (tests/culprit.py)."""

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
from rtscope import explain_trace as causes
from rtscope.analysis.explain_shares import culprit as culprit_name
from rtscope.store import Store

pytestmark = pytest.mark.real

CPUS = sorted(os.sched_getaffinity(0))
WHY = culprit.tracing_unavailable()
needs_tracing = pytest.mark.skipif(WHY is not None, reason=WHY or "")
RTSCOPE = Path(sys.executable).with_name("rtscope")


@pytest.fixture(autouse=True)
def forget_targets(clean_targets):
    """The SSH test's target `board` is not left defined for the tests after these."""
    yield


def spec(tmp_path: Path, *, explain: int = 10, loops: int = 3000, workload: str = "timer", runtime: str = "native",
         extra: str = "", pinned: bool = True) -> Path:
    params = f"loops = {loops}\ninterval_us = 1000" if workload == "timer" else "iterations = 50\npause_ms = 1"
    variant = "absolute" if workload == "timer" else "sum"
    p = tmp_path / "explain.toml"
    p.write_text(f'name = "explain"\n{extra}[[workload]]\nname = "{workload}"\nvariants = ["{variant}"]\n'
                 f'runtime = "{runtime}"\n[workload.params]\n{params}\n[workload.settings]\n'
                 f"explain = {explain}\n" + (f"cpu = {CPUS[-1]}\nrt_priority = 80\nmlock = true\n" if pinned else ""))
    return p


# --- the attribution, on a trace excerpt of this kernel's format -------------------------------------------

TRACE = """\
      khugepaged-37      [001] d.h..   797.124371: local_timer_entry: vector=236
      khugepaged-37      [001] d.h..   797.124372: hrtimer_expire_entry: hrtimer=000000001adf0a48 function=hrtimer_wakeup now=797124371595
      khugepaged-37      [001] dNh3.   797.124374: sched_wakeup: comm=rtprobe pid=8869 prio=19 target_cpu=001
      khugepaged-37      [001] dNh..   797.124374: hrtimer_expire_exit: hrtimer=000000001adf0a48
      khugepaged-37      [001] dNh..   797.124381: local_timer_exit: vector=236
      khugepaged-37      [001] .Ns..   797.124400: softirq_entry: vec=1 [action=TIMER]
      khugepaged-37      [001] .Ns..   797.124410: softirq_exit: vec=1 [action=TIMER]
      khugepaged-37      [001] d..2.   797.124464: sched_switch: prev_comm=khugepaged prev_pid=37 prev_prio=139 prev_state=R+ ==> next_comm=rtprobe next_pid=8869 next_prio=19
"""


def test_attribution_splits_the_interval_by_innermost_context():
    events = causes.parse(TRACE.splitlines())
    start = 797_124_360_000
    got = causes.attribute(events, start, 797_124_470_000)
    by = {(c["kind"], c["name"]): c for c in got["causes"]}
    # khugepaged: from the start to the timer irq, between the irq and the softirq, after it until the switch.
    assert by[("thread", "khugepaged")]["duration_ns"] == 11_000 + 19_000 + 54_000
    assert by[("thread", "khugepaged")]["pid"] == 37 and by[("thread", "khugepaged")]["prio"] == 139
    assert by[("irq", "local_timer")]["duration_ns"] == 1_000 + 7_000 and by[("irq", "local_timer")]["irq"] == 236
    assert by[("hrtimer", "hrtimer_wakeup")]["duration_ns"] == 2_000
    assert by[("softirq", "TIMER")]["duration_ns"] == 10_000 and by[("softirq", "TIMER")]["irq"] == 1
    assert got["measuring_pid"] == 8869 and got["self_ns"] == 6_000 and got["unexplained_ns"] == 0
    assert [c["kind"] for c in got["causes"]][0] == "thread"  # largest first
    assert by[("thread", "khugepaged")]["intervals"][0] == [0, 11_000]


def test_kernel_priorities_are_shown_as_chrt_says_them():
    from rtscope.analysis.explain_shares import priority, shown_cause
    # kernel prio p < 100: SCHED_FIFO/RR priority 99 - p; 100..139: nice p - 120; SCHED_DEADLINE is -1
    assert [priority(p) for p in (9, 0, 98, 19, 120, 100, 139, -1, None)] == \
        ["FIFO 90", "FIFO 99", "FIFO 1", "FIFO 80", "nice 0", "nice -20", "nice 19", "DEADLINE", None]
    events = causes.parse(TRACE.splitlines())
    [thread] = [c for c in causes.attribute(events, 797_124_360_000, 797_124_470_000)["causes"]
                if c["kind"] == "thread"]
    shown = shown_cause(thread)
    assert (shown["kernel_prio"], shown["priority"], "prio" in shown) == (139, "nice 19", False)
    assert shown["intervals_ns"] == thread["intervals"] and shown["duration_ns"] == thread["duration_ns"]


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
    assert "why: the excess above the baseline's p99" in cli("compare", "--db", db, "--baseline", "rt_priority=95").out
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


def test_explain_refused_without_tracefs(cli, db, tmp_path, monkeypatch, rtprobe):
    monkeypatch.setenv("RTSCOPE_SYSFS_ROOT", str(tmp_path / "no-tracefs"))
    r = cli("run", spec(tmp_path, loops=10), "--db", db)
    assert r.code == 1
    assert "target local: tracefs not mounted at" in r.err and "mount -t tracefs nodev" in r.err
    assert not Path(db).exists() or Store(db).runs() == []


def test_explain_refuses_what_it_cannot_explain(cli, db, tmp_path):
    p = tmp_path / "beam-timer.toml"
    p.write_text('name = "x"\n[[workload]]\nname = "timer"\nvariants = ["send_after"]\nruntime = "beam"\n'
                 "[workload.settings]\nexplain = 5\n")
    r = cli("check", p)
    assert r.code == 2
    assert "setting explain applies to runtime native: workload timer, exec, gpio; runtime beam: workload exec" in r.err
    p.write_text('name = "x"\n[[workload]]\nname = "gpio"\nvariants = ["blink"]\nruntime = "beam"\n'
                 "[workload.settings]\nexplain = 5\n")
    r = cli("check", p)
    assert r.code == 2 and "; not to beam gpio" in r.err
    r = cli("run", spec(tmp_path, explain=-1), "--db", db)
    assert r.code == 2 and "an integer >= 0" in r.err


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


def test_explain_of_a_run_measured_without_it_says_how(cli, db, make_samplefile):
    assert cli("import", "rts", make_samplefile([100, 200, 300]), "--db", db).code == 0
    for extra in ((), ("--json",)):
        r = cli("explain", "1", "--db", db, *extra)
        assert r.code == 2 and "run 1 has no explained samples" in r.err and "explain = 10" in r.err


def test_a_blink_run_is_explained_by_its_lateness(cli, db, tmp_path):
    """A gpio blink's explained samples are its lateness (its primary column is the period, ~10 ms): explain's
    excess is above the lateness's median, compare's above the baseline's lateness p99 (docs/gpio.md)."""
    import numpy as np
    from rtscope import samplefile
    from rtscope.samplefile import Column
    from report_fixtures import ENV, add_experiment

    store = Store(db)
    experiment = add_experiment(store, "blink")
    rng = np.random.default_rng(7)
    lateness = {}
    for prio in (80, 95):
        late = rng.integers(50_000, 80_000, 400)
        late[[10, 200]] = [9_000_000, 4_000_000]
        period = 10_000_000 + np.diff(late, prepend=late[0])
        start = 1_000_000_000 + np.arange(400) * 10_000_000
        cols = [Column("period", "ns", "i64"), Column("lateness", "ns", "i64"), Column("cpu", "", "i64"),
                Column("start", "ns", "i64")]
        header = samplefile.make_header("gpio", "blink", "native", "rtprobe", "0.1.0", "2026-01-01T00:00:00Z", cols,
                                        {"rt_priority": prio, "explain": 2}, {"iterations": 400, "period_ms": 10})
        path = tmp_path / f"blink-{prio}.rts"
        samplefile.write(path, header, {"period": period, "lateness": late, "cpu": np.ones(400), "start": start},
                         {"finished_at": "2026-01-01T00:00:01Z", "explain": {"samples": 2, "column": "lateness"}})
        causes_ = [{"sample_index": i, "thread": None, "cpu": 1, "value_ns": int(late[i]), "start_ns": int(start[i]),
                    "causes": [{"kind": "thread", "name": culprit.NAME, "pid": 42, "irq": None, "prio": 9,
                                "duration_ns": int(late[i]) - 20_000}],
                    "self_ns": 20_000, "idle_ns": 0, "unexplained_ns": 0, "note": None} for i in (10, 200)]
        store.add_run(samplefile.read(path), ENV, experiment_id=experiment, source=str(path), causes=causes_)
        lateness[prio] = late
    out = json.loads(cli("explain", "1", "--db", db, "--json").out)
    assert out["reference"]["value_ns"] == pytest.approx(float(np.median(lateness[80])))
    [thread] = [r for r in out["summary"] if r["by"] == "culprit"]
    assert thread["share"] > 0.99  # of the excess above ~65 µs, not above the period's ~10 ms (which is none)
    why = json.loads(cli("compare", "--db", db, "--baseline", "rt_priority=95", "--json").out)["causes"]
    p99 = float(np.percentile(lateness[95], 99))
    assert len(why) == 2 and all(c["reference"]["value_ns"] == pytest.approx(p99) and c["samples"] == 2 for c in why)
