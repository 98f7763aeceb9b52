"""`rtscope explain RUN --suggest` and `--write-spec`, the whole loop on this host's kernel: a culprit named, its
remedy first, measured against the run's configuration and found better, the culprit's share gone
(docs/explain.md, "Remedies"); also for the BEAM's collector and on an SSH target. The remedies on synthetic
samples, the spec's baseline and the refusals: tests/test_remedies_units.py."""

from __future__ import annotations

import json
import statistics

import pytest

import culprit
import sshd
from rtscope.store import Store
from test_remedies_units import CPUS

pytestmark = [pytest.mark.real, pytest.mark.alone]

WHY = culprit.tracing_unavailable()
needs_tracing = pytest.mark.skipif(WHY is not None or len(CPUS) < 2, reason=WHY or "needs 2 CPUs")


# --- the whole loop on this host's kernel -------------------------------------------------------------------

@pytest.mark.timing
@needs_tracing
def test_the_loop_culprit_remedy_spec_run_compare(cli, db, tmp_path, rtprobe):
    """A SCHED_FIFO 90 culprit busy 10 ms every 50 ms on the probe's CPU (probe at FIFO 80): explain names it
    and suggests rt_priority 91 first; the written spec, run with the culprit still there, gives the remedy a
    significantly lower p99 or max than the run's configuration, and its runs' excess no longer holds the culprit.
    (A burst every 50 ms delays 2 % of the 1 ms timer's samples, so the runs' p99 holds it: on this shared
    machine another session's QEMU now and then takes 30 ms of the CPU, which makes a max alone fragile.)"""
    cpu = CPUS[-1]
    p = tmp_path / "measured.toml"
    p.write_text(culprit.timer_spec("measured", 1000, cpu))
    spec = tmp_path / "ab.toml"
    with culprit.culprit(cpu, period_s=0.05) as pid:
        assert cli("run", p, "--db", db).code == 0
        [run] = Store(db).runs()
        doc = json.loads(cli("explain", run.id, "--db", db, "--suggest", "--json").out)
        top = doc["remedies"][0]
        assert top["for"] == {"kind": "thread", "name": culprit.NAME, "pid": pid, "irq": None}, doc["remedies"]
        assert (top["setting"], top["value"], top["applies_on"]) == \
            ("rt_priority", 91, {"target": "local", "ok": True, "reason": None, "asked": True})
        assert top["share"] > 0.8
        assert doc["trace"]["steal"]["source"] == "/proc/stat steal" and doc["steal"]["steal_ns"] >= 0
        text = cli("explain", run.id, "--db", db, "--suggest").out
        assert "rt_priority = 91" in text and "steal time" in text
        r = cli("explain", run.id, "--db", db, "--write-spec", spec, "--repetitions", "4", "--remedies", "1")
        assert r.code == 0, r.err
        assert cli("run", spec, "--db", db).code == 0
    remedy_measured_better(cli, db, run.id)


def remedy_measured_better(cli, db: str, run_id: int) -> None:
    """The written spec of run `run_id`, run (4 runs a cell, --remedies 1): compare calls rt_priority=91 better
    than the run's configuration on p99 or max and worse on nothing, and the culprit's excess is gone from the
    remedy's runs."""
    out, verdicts = culprit.compared_remedy(cli, db, run_id, "rt_priority=80", "rt_priority=91", 4)
    assert "better" in (verdicts["p99"], verdicts["max"]), out["comparisons"]
    assert "worse" not in verdicts.values(), out["comparisons"]
    # The culprit's part of the excess: in the baseline's runs its bursts, in the remedy's a moment at most (a
    # wake-up the VM delivered late while it ran is still charged to it: compare the time, not the share).
    def culprit_excess(label):
        runs = next(c["runs"] for c in out["configurations"] if c["label"] == label)
        summaries = [json.loads(cli("explain", i, "--db", db, "--json").out)["summary"] for i in runs]
        return [sum(s["excess_ns"] for s in summary if s["by"] == "culprit" and s["name"] == culprit.NAME)
                for summary in summaries]

    # Judged per run (the run is the unit): a vCPU stall while the culprit held the CPU is charged to it, ~4 ms
    # a sample, so one remedy run of four once kept 17 ms of it in its 5 worst samples (a CI-like run here).
    before, after = culprit_excess("rt_priority=80"), culprit_excess("rt_priority=91")
    assert min(before) > 5 * 5e6, before  # its 10 ms bursts fill the baseline runs' 5 worst samples
    assert statistics.median(after) < 0.1 * statistics.median(before), (before, after)
    why = {c["configuration"]: c for c in out["causes"]}  # compare's side-by-side shares, per cause kind
    per_sample = {label: sum(k["excess_ns"] for k in why[label]["kinds"] if k["kind"] == "thread")
                  / max(why[label]["samples"], 1) for label in ("rt_priority=80", "rt_priority=91")}
    assert per_sample["rt_priority=80"] > 5 * per_sample["rt_priority=91"], per_sample  # such a run included


@pytest.mark.timing
@needs_tracing
def test_the_loop_on_the_beam_gc_remedied_by_min_heap_size(cli, db, tmp_path):
    """The BEAM's collector as the culprit: `exec spawn_each` (5,000 processes a call, each sending a message
    back) with a full sweep at every collection, the VM pinned at SCHED_FIFO 80. explain names gc major and
    suggests min_heap_size first; the written spec (4 runs a cell) has compare call it better on p99 or max
    and worse on nothing, and the collections' excess above the baseline's p99 is gone from the remedy's
    explained samples (compare's why)."""
    from rtscope.runtimes import RUNTIMES
    if RUNTIMES["beam"].unavailable():
        pytest.skip(RUNTIMES["beam"].unavailable())
    p = tmp_path / "gc.toml"
    p.write_text('name = "gc"\n[[workload]]\nname = "exec"\nvariants = ["spawn_each"]\nruntime = "beam"\n'
                 "[workload.params]\nn = 5000\niterations = 120\npause_ms = 1\n"
                 f"[workload.settings]\nexplain = 5\nfullsweep_after = 0\ncpu = {CPUS[-1]}\nrt_priority = 80\n"
                 'vm_flags = "+sbwt none +sbwtdcpu none +sbwtdio none"\n')
    assert cli("run", p, "--db", db).code == 0
    [run] = Store(db).runs()
    doc = json.loads(cli("explain", run.id, "--db", db, "--suggest", "--json").out)
    top = doc["remedies"][0]
    assert (top["for"]["kind"], top["for"]["name"], top["setting"]) == ("gc", "major", "min_heap_size"), doc
    assert top["applies_on"]["ok"] and top["share"] > 0.5
    spec = tmp_path / "ab.toml"
    r = cli("explain", run.id, "--db", db, "--write-spec", spec, "--repetitions", "4", "--remedies", "1")
    assert r.code == 0, r.err
    assert cli("run", spec, "--db", db).code == 0
    remedy = f"min_heap_size={top['value']}"
    out, verdicts = culprit.compared_remedy(cli, db, run.id, "min_heap_size=233", remedy, 4)
    assert "better" in (verdicts["p99"], verdicts["max"]), out["comparisons"]
    assert "worse" not in verdicts.values(), out["comparisons"]
    why = {c["configuration"]: c for c in out["causes"]}
    before = sum(k["excess_ns"] for k in why["min_heap_size=233"]["kinds"] if k["kind"] == "gc")
    after = sum(k["excess_ns"] for k in why[remedy]["kinds"] if k["kind"] == "gc")
    assert before > 0 and after < 0.1 * before, why


@pytest.mark.timing
@needs_tracing
@pytest.mark.skipif(sshd.available() is not None, reason=sshd.available() or "")
def test_remedies_asked_on_an_ssh_target_and_its_spec_runs_there(cli, db, tmp_path, rtprobe):
    """The loop on an SSH target (a real sshd in its own namespaces, the culprit on the probe's CPU of the kernel
    they share): its remedies are asked there; the written spec keeps the target and its definition, so
    `rtscope check` accepts it as it is, and run there it measures the remedy better."""
    server = sshd.SshServer(tmp_path / "board", "rtscope-board-remedies").start()
    try:
        p = tmp_path / "board.toml"
        p.write_text(culprit.timer_spec("on-board", 1000, CPUS[-1], f'target = "board"\n{server.table("board")}'))
        spec = tmp_path / "ab.toml"
        with culprit.culprit(CPUS[-1], period_s=0.05) as pid:
            r = cli("run", p, "--db", db)
            assert r.code == 0, r.err
            [run] = Store(db).runs()
            got = json.loads(cli("explain", run.id, "--db", db, "--suggest", "--json").out)["remedies"]
            top = got[0]
            assert (top["for"]["name"], top["for"]["pid"], top["setting"], top["value"]) == \
                (culprit.NAME, pid, "rt_priority", 91), got
            assert top["applies_on"] == {"target": "board", "ok": True, "reason": None, "asked": True}
            r = cli("explain", run.id, "--db", db, "--write-spec", spec, "--repetitions", "4", "--remedies", "1")
            assert r.code == 0, r.err
            text = spec.read_text()
            assert 'target = "board"' in text and "[targets.board]" in text and "[baseline]" in text
            r = cli("check", spec)
            assert r.code == 0, r.out + r.err
            r = cli("run", spec, "--db", db)
            assert r.code == 0, r.err
        assert {x.machine.get("hostname") for x in Store(db).runs()} == {server.hostname}   # all on the board
        remedy_measured_better(cli, db, run.id)
    finally:
        server.stop()
