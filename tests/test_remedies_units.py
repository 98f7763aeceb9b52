"""`rtscope explain RUN --suggest` and `--write-spec` without the real kernel: a remedy per cause, ranked by the
share of the excess its cause took (on synthetic explained samples); the A/B spec with its baseline, which
`compare` and `report` use (short exec runs as a normal task), and its refusals; the steal-time counter of
/proc/stat. The whole loop on this host's kernel: tests/test_remedies.py."""

from __future__ import annotations

import json
import os
from pathlib import Path
from types import SimpleNamespace

import pytest

from rtscope import sysinfo
from rtscope.analysis import explain_remedies
from rtscope.settings.registry import beam_min_heap_size
from rtscope.store import Store

pytestmark = pytest.mark.fast


CPUS = sorted(os.sched_getaffinity(0))


def fake_run(**settings) -> SimpleNamespace:
    return SimpleNamespace(id=7, settings={"cpu": 3, "explain": 10, **settings}, runtime="native",
                           machine={"cpus_online": [0, 1, 2, 3], "preemption": "PREEMPT_DYNAMIC"})


def sample(value_ms: float, *causes_, self_ms: float = 0.0, idle_ms: float = 0.0, unexplained_ms: float = 0.0):
    return {"value_ns": int(value_ms * 1e6), "cpu": 3, "note": None, "self_ns": int(self_ms * 1e6),
            "idle_ns": int(idle_ms * 1e6), "unexplained_ns": int((unexplained_ms + idle_ms) * 1e6),
            "causes": [{"kind": k, "name": n, "pid": pid, "irq": irq, "prio": prio, "duration_ns": int(ms * 1e6)}
                       for k, n, pid, irq, prio, ms in causes_]}


def first(run, samples) -> tuple[str, object]:
    got = explain_remedies.suggest(run, samples, 0)
    assert got, samples
    return got[0].setting, got[0].value


# --- what each cause gets -----------------------------------------------------------------------------------

def test_each_cause_kind_gets_its_remedy_first():
    run = fake_run(rt_priority=80)
    # an RT thread above the task: raise the task above it (no CPU given up), then move the task
    got = explain_remedies.suggest(run, [sample(10, ("thread", "hog", 42, None, 9, 9.5))], 0)
    assert [(r.setting, r.value) for r in got] == [("rt_priority", 91), ("cpu", 2)]
    assert got[0].share > 0.9 and (got[0].kind, got[0].name, got[0].pid) == ("thread", "hog", 42)
    # a device interrupt: route it to the other CPUs (by its /proc/interrupts name)
    assert first(run, [sample(2, ("irq", "virtio0-input.0", None, 24, None, 1.9))]) == \
        ("irq_affinity", "virtio0-input.0@0-2")
    # an unbound kworker: the workqueue cpumask
    assert first(run, [sample(2, ("thread", "kworker/u8:1", 55, None, 120, 1.9))]) == ("workqueue_cpumask", "0-2")
    # a bound kworker below the task's priority on a PREEMPT_DYNAMIC kernel: move the task, or full preemption
    got = explain_remedies.suggest(run, [sample(2, ("thread", "kworker/3:1", 56, None, 120, 1.9))], 0)
    assert [(r.setting, r.value) for r in got] == [("cpu", 2), ("kernel_cmdline", "preempt=full")]
    # a normal thread that ran for tens of ms over a SCHED_FIFO task: RT throttling
    assert first(run, [sample(60, ("thread", "spin", 57, None, 120, 55))]) == ("rt_runtime_us", -1)
    # the CPU idle while the sample was due: no deep C-states
    assert first(run, [sample(2, idle_ms=1.8)]) == ("cpu_dma_latency", 0)
    # the task's own path stretched: lock its memory
    assert first(run, [sample(2, self_ms=1.8)]) == ("mlock", True)
    # the tick: nohz_full on a kernel rtscope boots
    assert first(run, [sample(2, ("hrtimer", "tick_nohz_handler", None, None, None, 1.9))]) == \
        ("kernel_cmdline", "nohz_full=3")
    # a normal-priority task and a normal thread: SCHED_FIFO 80
    assert first(fake_run(), [sample(2, ("thread", "make", 58, None, 120, 1.9))]) == ("rt_priority", 80)


def test_beam_causes_and_ranking_by_share():
    run = SimpleNamespace(id=8, settings={"explain": 10, "fullsweep_after": 0}, runtime="beam",
                          machine={"cpus_online": [0, 1]})
    gc = {"kind": "gc", "name": "major", "pid": None, "irq": None, "duration_ns": 3_000_000, "heap_before": 5000}
    out = {"kind": "scheduled_out", "name": None, "pid": None, "irq": None, "duration_ns": 1_000_000}
    s = {"value_ns": 4_100_000, "cpu": None, "note": None, "self_ns": 100_000, "idle_ns": 0, "unexplained_ns": 0,
         "causes": [gc, out]}
    got = explain_remedies.suggest(run, [s], 0)
    assert [r.setting for r in got] == ["min_heap_size", "fullsweep_after", "priority", "vm_flags"]
    assert got[0].share > got[2].share  # the GC's remedies before the scheduling's
    # twice the largest heap (10,000 words), as the VM's next heap size: the value the process gets as asked
    assert got[0].value == 10958 == beam_min_heap_size(got[0].value)
    assert got[3].value == "+sbwt none +sbwtdcpu none +sbwtdio none"
    # another scheduler of the VM on the measuring one's CPU: its spinning turned off; an aux thread: nothing
    spin = {"kind": "vm_thread", "name": "2_scheduler", "pid": 502, "irq": None, "duration_ns": 4_000_000}
    [r] = explain_remedies.suggest(run, [{**s, "causes": [spin]}], 0)
    assert (r.setting, r.value, r.kind) == ("vm_flags", "+sbwt none +sbwtdcpu none +sbwtdio none", "vm_thread")
    assert explain_remedies.suggest(run, [{**s, "causes": [{**spin, "name": "1_aux"}]}], 0) == []
    # a remedy the run has already is not suggested; causes below 5 % of the excess get none
    assert [r.setting for r in explain_remedies.suggest(fake_run(rt_priority=91), [sample(
        10, ("thread", "hog", 42, None, 9, 9.5), ("irq", "eth0", None, 30, None, 0.3))], 0)] == ["cpu"]


def test_steal_counters_of_proc_stat():
    text = ("cpu  1 2 3 4 5 6 7 900 0 0\ncpu0 1 2 3 4 5 6 7 400 0 0\ncpu1 1 2 3 4 5 6 7 500 0 0\n"
            "intr 1 2 3\n")
    assert sysinfo.parse_steal(text) == {0: 400, 1: 500}
    assert sysinfo.parse_steal("cpu0 1 2 3 4\n") == {}  # a kernel without the field
    assert sysinfo.parse_steal(Path("/proc/stat").read_text()).keys() >= set(CPUS)


# --- the spec's baseline ------------------------------------------------------------------------------------

SPEC = """name = "based"
repetitions = 2
{baseline}
[[workload]]
name = "exec"
variants = ["sum"]
runtime = "native"
[workload.params]
n = 1000
iterations = 200
pause_ms = 0
[workload.settings]
mlock = [false, true]
"""


def test_a_spec_names_its_baseline_and_compare_and_report_use_it(cli, db, tmp_path, rtprobe):
    p = tmp_path / "based.toml"
    p.write_text(SPEC.format(baseline="baseline = { mlock = false }"))
    r = cli("run", p, "--db", db)
    assert r.code == 0, r.err
    out = json.loads(cli("compare", "--experiment", "based", "--db", db, "--json").out)
    assert out["baseline"] == "mlock=false"
    [k] = out["comparisons"]
    assert (k["configuration"], k["baseline"]) == ("mlock=true", "mlock=false")
    assert "against mlock=false" in cli("compare", "--experiment", "based", "--db", db).out
    # --baseline still wins over the spec's
    assert json.loads(cli("compare", "--experiment", "based", "--db", db, "--baseline", "mlock=true",
                          "--json").out)["baseline"] == "mlock=true"
    html = tmp_path / "r.html"
    assert cli("report", "--experiment", "based", "--db", db, "-o", html).code == 0
    assert 'id="comparisons">Comparisons against mlock=false' in html.read_text()


@pytest.mark.parametrize("baseline, message", [
    ("baseline = { colour = 1 }", "baseline names 'colour', not a setting, parameter or workload/variant/runtime"),
    ("baseline = { mlock = 3 }", "baseline: "),
    ("baseline = { mlock = [true] }", "baseline mlock must be one value, not a list"),
    ("baseline = { rt_priority = 10 }", "baseline rt_priority=10 matches no configuration of this spec"),
    ("baseline = 1", "baseline must be a table"),
])
def test_bad_baselines_are_refused_with_their_line(cli, db, tmp_path, baseline, message):
    p = tmp_path / "bad.toml"
    p.write_text(SPEC.format(baseline=baseline))
    r = cli("check", p)
    assert r.code == 2 and f"{p}:3:" in r.err and message in r.err, r.err


def test_write_spec_refusals(cli, db, tmp_path, make_samplefile):
    from rtscope import samplefile
    sf = samplefile.read(make_samplefile([1000] * 50 + [5000], settings={"mlock": True, "cpu": 1}))
    tick = sample(0.004, ("hrtimer", "tick_nohz_handler", None, None, None, 0.0039))
    plain = Store(db).add_run(samplefile.read(make_samplefile([1000] * 10, name="plain.rts")), {})
    run_id = Store(db).add_run(sf, {"cpus_online": [0, 1]}, causes=[{**tick, "sample_index": 50, "thread": None,
                                                                     "start_ns": 0, "cpu": 1}])
    r = cli("explain", plain, "--db", db, "--suggest")
    assert r.code == 2 and "has no explained samples" in r.err
    # its only culprit's remedy is a kernel command line, which a local target cannot take: nothing written
    got = json.loads(cli("explain", run_id, "--db", db, "--suggest", "--json").out)["remedies"]
    assert [(r["setting"], r["value"], r["applies_on"]["ok"]) for r in got] == \
        [("kernel_cmdline", "nohz_full=1", False)] and got[0]["applies_on"]["reason"]
    out = tmp_path / "ab.toml"
    r = cli("explain", run_id, "--db", db, "--write-spec", out)
    assert r.code == 2 and "no remedy can be measured on target local" in r.err and not out.exists(), r.err
    r = cli("explain", run_id, "--db", db, "--write-spec", tmp_path / "nowhere" / "ab.toml")
    assert r.code == 2 and "does not exist" in r.err


def test_the_ab_spec_cells_baseline_and_combination():
    """The spec of two causes' remedies: the run's cell, one per remedy, the combination of each cause's first;
    its baseline names every changed setting ("" where the run had none), and runtime-added parameters
    (the BEAM's warmup_calls) are left out. rtscope's own parser accepts it."""
    import tomllib
    from rtscope.experiment.explain_spec import ab_spec
    run = SimpleNamespace(id=3, workload="exec", variant="fib", runtime="beam", cell=None, tags=[],
                          params={"n": 27, "iterations": 50, "warmup_calls": 10},
                          settings={"explain": 5, "cpu": 1, "vm_flags": ""}, machine={})
    ok = {"target": "local", "ok": True, "reason": None, "asked": True}
    found = [explain_remedies.Remedy("gc", "major", None, None, 0.6, "min_heap_size", 16384, "why", "cost", ok),
             explain_remedies.Remedy("gc", "major", None, None, 0.6, "fullsweep_after", 65535, "why", "cost", ok),
             explain_remedies.Remedy("scheduled_out", None, None, None, 0.3, "priority", "high", "why", "cost", ok),
             explain_remedies.Remedy("thread", "x", 9, None, 0.1, "kernel_cmdline", "preempt=full", "why", "cost",
                             {**ok, "ok": False, "reason": "no such setting"})]
    doc = tomllib.loads(ab_spec(run, found, repetitions=3))
    assert doc["baseline"] == {"fullsweep_after": "", "min_heap_size": "", "priority": ""}
    assert doc["repetitions"] == 3
    blocks = doc["workload"]
    assert all(b["params"] == {"n": 27, "iterations": 50} and b["runtime"] == "beam" for b in blocks)
    changed = [{k: v for k, v in b["settings"].items() if k not in run.settings} for b in blocks]
    assert changed == [{}, {"min_heap_size": 16384}, {"fullsweep_after": 65535}, {"priority": "high"},
                       {"min_heap_size": 16384, "priority": "high"}]
    # --remedies 1: one remedy, and no combination (it would be the same cell)
    assert len(tomllib.loads(ab_spec(run, found, most=1))["workload"]) == 2
