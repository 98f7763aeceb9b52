"""Setting explain without the real kernel: the attribution on a trace excerpt of this kernel's format, priorities
as chrt says them, the refusals before anything is measured, and explain on stored runs (one measured without
it, a gpio blink's lateness). The culprits on the real kernel: tests/test_explain.py."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

import culprit
from rtscope import explain_trace
from rtscope.store import Store

pytestmark = pytest.mark.fast


CPUS = sorted(os.sched_getaffinity(0))


def spec(tmp_path: Path, *, explain: int = 10, loops: int = 3000, workload: str = "timer", runtime: str = "native",
         extra: str = "", pinned: bool = True) -> Path:
    params = f"loops = {loops}\ninterval_us = 1000" if workload == "timer" else "iterations = 50\npause_ms = 1"
    variant = "absolute" if workload == "timer" else "sum"
    p = tmp_path / "explain.toml"
    p.write_text(f'name = "explain"\n{extra}[[workload]]\nname = "{workload}"\nvariants = ["{variant}"]\n'
                 f'runtime = "{runtime}"\n[workload.params]\n{params}\n[workload.settings]\n'
                 f"explain = {explain}\n" + (f"cpu = {CPUS[-1]}\nrt_priority = 80\nmlock = true\n" if pinned else ""))
    return p


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
    events = explain_trace.parse(TRACE.splitlines())
    start = 797_124_360_000
    got = explain_trace.attribute(events, start, 797_124_470_000)
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
    events = explain_trace.parse(TRACE.splitlines())
    [thread] = [c for c in explain_trace.attribute(events, 797_124_360_000, 797_124_470_000)["causes"]
                if c["kind"] == "thread"]
    shown = shown_cause(thread)
    assert (shown["kernel_prio"], shown["priority"], "prio" in shown) == (139, "nice 19", False)
    assert shown["intervals_ns"] == thread["intervals"] and shown["duration_ns"] == thread["duration_ns"]


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
