"""The `rt_throttled` cause (docs/explain.md, the cause table and "Remedies"): a normal-priority task ran while the
measured SCHED_FIFO task was runnable on its CPU, which only RT throttling (sched_rt_runtime_us used up) allows.
From trace text, and on this host's kernel: a SCHED_FIFO busy loop below the probe's priority eats the RT budget,
a normal busy loop takes the 50 ms a second the kernel then gives normal tasks; explain names it, suggests
rt_runtime_us = -1 first, and the written spec's run shows the remedy better; the original comes back."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

import culprit
import realtiming
from rtscope import explain_trace as causes
from rtscope.analysis import explain_remedies as remedies
from rtscope.store import Store

pytestmark = pytest.mark.real

CPUS = sorted(os.sched_getaffinity(0))
WHY = culprit.tracing_unavailable()
needs_tracing = pytest.mark.skipif(WHY is not None or len(CPUS) < 2, reason=WHY or "needs 2 CPUs")
RT = Path("/proc/sys/kernel/sched_rt_runtime_us")
NORMAL = "rtsc-normal"

TRACE = """\
          rtprobe-900     [001] d..2.   100.000000: sched_switch: prev_comm=rtprobe prev_pid=900 prev_prio=19 prev_state=S ==> next_comm=rtsc-fifo next_pid=901 next_prio=49
        rtsc-fifo-901     [001] d.h1.   100.001000: sched_wakeup: comm=rtprobe pid=900 prio=19 target_cpu=001
        rtsc-fifo-901     [001] d..2.   100.001005: sched_switch: prev_comm=rtsc-fifo prev_pid=901 prev_prio=49 prev_state=R ==> next_comm=rtsc-normal next_pid=902 next_prio=120
      rtsc-normal-902     [001] d..2.   100.041000: sched_switch: prev_comm=rtsc-normal prev_pid=902 prev_prio=120 prev_state=R ==> next_comm=rtprobe next_pid=900 next_prio=19
          rtprobe-900     [001] .....   100.041010: sys_exit: NR 230 = 0
"""


def test_a_normal_task_over_a_runnable_fifo_task_is_rt_throttling():
    events = causes.parse(TRACE.splitlines())
    got = causes.attribute(events, 100_001_000_000, 100_041_010_000)
    assert got["measuring_pid"] == 900
    top = got["causes"][0]
    assert (top["kind"], top["name"], top["pid"], top["prio"]) == ("rt_throttled", NORMAL, 902, 120)
    assert top["duration_ns"] == 39_995_000
    # a short one (a kernel section not preempted at once) stays a thread cause
    short = causes.attribute(events, 100_001_000_000, 100_001_010_000)
    assert [c["kind"] for c in short["causes"]] == ["thread"]
    # the same normal task over a normal-priority measured task is just a thread
    normal = TRACE.replace("prio=19", "prio=120")
    got = causes.attribute(causes.parse(normal.splitlines()), 100_001_000_000, 100_041_010_000)
    assert got["causes"][0]["kind"] == "thread"
    # its remedy: RT throttling off first
    from types import SimpleNamespace
    run = SimpleNamespace(id=1, settings={"cpu": 1, "rt_priority": 80}, runtime="native",
                          machine={"cpus_online": [0, 1]})
    s = {"value_ns": 40_010_000, "cpu": 1, "note": None, "self_ns": 0, "idle_ns": 0, "unexplained_ns": 0,
         "causes": [top]}
    assert [(r.setting, r.value) for r in remedies.suggest(run, [s], 0)] == [("rt_runtime_us", -1), ("cpu", 0)]


@pytest.mark.timing
@needs_tracing
def test_rt_throttling_named_its_remedy_measured_and_undone(cli, db, tmp_path, rtprobe):
    original = RT.read_text()
    assert int(original) > 0, "RT throttling is off on this machine"
    cpu = CPUS[-1]
    p = tmp_path / "throttled.toml"
    p.write_text(culprit.timer_spec("throttled", 2200, cpu))
    spec = tmp_path / "ab.toml"
    with culprit.culprit(cpu, priority=50, period_s=1.0, busy_s=1.0), \
            culprit.culprit(cpu, priority=0, period_s=1.0, busy_s=1.0, name=NORMAL) as normal:
        assert cli("run", p, "--db", db).code == 0
        [run] = Store(db).runs()
        out = json.loads(cli("explain", run.id, "--db", db, "--json").out)
        big = [s for s in out["samples"] if s["value_ns"] > 10_000_000 and not realtiming.stalled(s)]
        assert len(big) >= 2, [s["value_ns"] for s in out["samples"]]
        named = [s for s in big if s["causes"] and (s["causes"][0]["kind"], s["causes"][0]["pid"]) ==
                 ("rt_throttled", normal) and abs(s["causes"][0]["duration_ns"] - s["value_ns"]) <= 0.2 * s["value_ns"]]
        assert len(named) >= 0.9 * len(big), [(s["value_ns"], s["causes"][:2]) for s in big]
        doc = json.loads(cli("explain", run.id, "--db", db, "--suggest", "--json").out)
        top = doc["remedies"][0]
        assert (top["for"]["kind"], top["setting"], top["value"], top["applies_on"]["ok"]) == \
            ("rt_throttled", "rt_runtime_us", -1, True), doc["remedies"]
        r = cli("explain", run.id, "--db", db, "--write-spec", spec, "--repetitions", "2", "--remedies", "1")
        assert r.code == 0, r.err
        assert cli("run", spec, "--db", db).code == 0
        assert RT.read_text() == original
    out = json.loads(cli("compare", "--experiment", f"remedies-run-{run.id}", "--db", db, "--json").out)
    [k] = out["comparisons"]
    assert k["configuration"].endswith(" rt_runtime_us=-1"), k
    # No verdict asserted: on kernels from 6.12 the fair deadline server (not sched_rt_runtime_us) gives normal
    # tasks their 50 ms a second, so RT throttling off leaves the 50 ms delays (measured on this 6.18 kernel:
    # max 49.0 ms with throttling, 50.7 ms without); docs/explain.md says so.
    assert {row["metric"] for row in k["rows"]} >= {"max", "p99"}, k["rows"]
    assert RT.read_text() == original and culprit.instances() == []
