"""The `page_fault` cause (docs/explain.md, the cause table and "Remedies") on this host's kernel: `rtprobe exec
touch` writes to n pages never written before in each call, so each call takes n faults; explain names them,
counts them and times them, suggests mlock = true first, and the written spec's run measures the remedy better
with no fault left. On trace text: tests/test_explain_faults_units.py."""

from __future__ import annotations

import json
import os
import statistics
from pathlib import Path

import pytest

import culprit
from rtscope.store import Store

pytestmark = [pytest.mark.real, pytest.mark.alone]

CPUS = sorted(os.sched_getaffinity(0))
WHY = culprit.tracing_unavailable() or (
    None if Path("/sys/kernel/tracing/events/exceptions/page_fault_user").is_dir() or
    Path("/sys/kernel/debug/tracing/events/exceptions/page_fault_user").is_dir()
    else "this kernel has no exceptions:page_fault_user event (x86 only)")
needs_faults = pytest.mark.skipif(WHY is not None or len(CPUS) < 2, reason=WHY or "needs 2 CPUs")


PAGES = 4096      # a call's faults: about 15 ms of them here, well above this VM's own noise (~4 ms)


@pytest.mark.timing
@needs_faults
def test_page_faults_named_counted_and_remedied_through_the_loop(cli, db, tmp_path, rtprobe):
    """`exec touch` (4096 fresh pages a call) without mlock: at least 9 of its 10 explained calls have their
    4096 write faults as the largest cause, timed within 20 % of what they added (the call beyond a locked
    run's median); --suggest puts mlock = true first; the written spec, run, calls it better on p99 and max,
    and its runs have no fault."""
    spec = tmp_path / "touch.toml"
    spec.write_text(f'name = "touch"\n[[workload]]\nname = "exec"\nvariants = ["touch"]\nruntime = "native"\n'
                    f'[workload.params]\nn = {PAGES}\niterations = 20\npause_ms = 10\n'
                    f'[workload.settings]\ncpu = {CPUS[-1]}\nrt_priority = 80\nexplain = 10\n')
    r = cli("run", spec, "--db", db)
    assert r.code == 0, r.err
    [run] = Store(db).runs()
    samples = json.loads(cli("explain", run.id, "--db", db, "--json").out)["samples"]
    doc = json.loads(cli("explain", run.id, "--db", db, "--suggest", "--json").out)
    top = doc["remedies"][0]
    assert (top["for"]["kind"], top["for"]["name"], top["setting"], top["value"]) == \
        ("page_fault", "write", "mlock", True), doc["remedies"]
    ab = tmp_path / "ab.toml"
    r = cli("explain", run.id, "--db", db, "--write-spec", ab, "--repetitions", "4", "--remedies", "1")
    assert r.code == 0, r.err
    assert cli("run", ab, "--db", db).code == 0
    out, verdicts = culprit.compared_remedy(cli, db, run.id, "mlock=false", "mlock=true", 4)
    assert verdicts["p99"] == "better" and verdicts["max"] == "better", out["comparisons"]
    locked = next(c["runs"] for c in out["configurations"] if c["label"] == "mlock=true")
    calls = [json.loads(cli("show", i, "--db", db, "--json").out)["stats"]["p50"] for i in locked]
    reference = statistics.median(calls)     # a call whose pages are resident
    # the first run's explained calls: their 4096 faults first, timed within 20 % of what they added
    def named(s: dict) -> bool:
        added = s["value_ns"] - reference
        top = s["causes"][0] if s["causes"] else {}
        return (top.get("kind") == "page_fault" and top["count"] == PAGES
                and abs(top["duration_ns"] - added) <= 0.2 * added)
    assert len(samples) == 10 and sum(map(named, samples)) >= 9, \
        [(s["value_ns"], reference, s["causes"][:2]) for s in samples]
    for i in locked:   # the remedy's runs: no fault left in their explained calls
        left = json.loads(cli("explain", i, "--db", db, "--json").out)["samples"]
        assert left and not [c for s in left for c in s["causes"] if c["kind"] == "page_fault"], left
