"""The `rt_throttled` cause (docs/explain.md, the cause table and "Remedies") on this host's kernel: a SCHED_FIFO
busy loop below the probe's priority eats the RT budget, a normal busy loop takes the 50 ms a second the kernel
then gives normal tasks; explain names it, suggests rt_runtime_us = -1 first, and the written spec's run shows
the remedy better; the original comes back. On trace text: tests/test_explain_throttled_units.py."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

import culprit
import realtiming
from rtscope.store import Store
from test_explain_throttled_units import NORMAL

pytestmark = [pytest.mark.real, pytest.mark.alone]

CPUS = sorted(os.sched_getaffinity(0))
WHY = culprit.tracing_unavailable()
needs_tracing = pytest.mark.skipif(WHY is not None or len(CPUS) < 2, reason=WHY or "needs 2 CPUs")
RT = Path("/proc/sys/kernel/sched_rt_runtime_us")


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
    assert "rt_runtime_us=-1" in k["configuration"].split(), k
    # No verdict asserted: on kernels from 6.12 the fair deadline server (not sched_rt_runtime_us) gives normal
    # tasks their 50 ms a second, so RT throttling off leaves the 50 ms delays (measured on this 6.18 kernel:
    # max 49.0 ms with throttling, 50.7 ms without); docs/explain.md says so.
    assert {row["metric"] for row in k["rows"]} >= {"max", "p99"}, k["rows"]
    assert RT.read_text() == original and culprit.instances() == []
