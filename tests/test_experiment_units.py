"""Experiments: seeded run order, and execution with the store's bookkeeping, failure, skip and the resume
arguments on small exec runs as a normal task. Resume after kill -9 of a running experiment:
tests/test_experiment.py."""

import json
import os
from collections import Counter

from rtscope.experiment import execute as exp_mod
from rtscope.experiment.execute import PlannedRun, plan
from rtscope.experiment.spec import parse
from rtscope.store import Store
import pytest

pytestmark = pytest.mark.fast


SPEC = """
name = "small"
repetitions = {reps}
[[workload]]
name = "exec"
variants = ["sum", "fib", "sleep"]
[workload.params]
iterations = 20
pause_ms = 0
n = [1, 2]
[[workload.exclude]]
variant = ["fib", "sleep"]
n = 2
"""


def small(reps=3, extra=""):
    return parse(SPEC.format(reps=reps) + extra, "small.toml")


# --- order ----------------------------------------------------------------------------------------------

def test_order_is_reproducible_from_its_seed():
    s = small(reps=5)
    a, b, c = plan(s, 1234), plan(s, 1234), plan(s, 4321)
    assert [(p.cell, p.repetition) for p in a] == [(p.cell, p.repetition) for p in b]
    assert [(p.cell, p.repetition) for p in a] != [(p.cell, p.repetition) for p in c]
    assert [p.index for p in a] == list(range(len(a))) == list(range(4 * 5))


def test_random_order_interleaves_repetitions_in_rounds():
    s = small(reps=4)
    cells = {c.key for c in s.cells}
    planned = plan(s, 7)
    for r in range(4):
        round_ = planned[r * 4:(r + 1) * 4]
        assert {p.cell for p in round_} == cells and {p.repetition for p in round_} == {r + 1}
    orders = {tuple(p.cell for p in planned[r * 4:(r + 1) * 4]) for r in range(4)}
    assert len(orders) > 1  # each round is shuffled anew


def test_every_order_makes_every_run_once():
    s = small(reps=3)
    want = Counter((c.key, r) for c in s.cells for r in (1, 2, 3))
    for order in ("random", "shuffle", "sequential"):
        assert Counter((p.cell, p.repetition) for p in plan(s, 99, order)) == want
    seq = plan(s, 99, "sequential")
    assert [p.cell for p in seq[:3]] == [s.cells[0].key] * 3


def test_planned_runs_survive_json():
    for p in plan(small(), 5):
        assert PlannedRun.from_json(json.loads(json.dumps(p.to_json()))) == p


# --- execution -------------------------------------------------------------------------------------------

def test_run_records_the_experiment_and_every_run(cli, db, tmp_path, rtprobe):
    spec = tmp_path / "small.toml"
    spec.write_text(SPEC.format(reps=2))
    r = cli("run", spec, "--db", db, "--seed", 77)
    assert r.code == 0, r.err
    assert "experiment 1: small, scale -, 4 cells, 8 runs, order random, seed 77" in " ".join(r.err.split())
    store = Store(db)
    exp = exp_mod.get(store, 1)
    assert exp.status == "finished" and exp.seed == 77 and exp.finished_at
    assert exp.spec["text"] == SPEC.format(reps=2) and exp.spec_path == str(spec.resolve())
    assert [p.cell for p in exp.plan] == [p.cell for p in plan(parse(SPEC.format(reps=2)), 77)]
    runs = store.runs(experiment_id=1)
    assert sorted(r["plan_index"] for r in runs) == list(range(8))
    for run in runs:
        planned = exp.plan[run["plan_index"]]
        assert (run["cell"], run["repetition"], run["variant"]) == \
            (planned.cell, planned.repetition, planned.request.variant)
        assert run["n_samples"] == 20
    assert [run["plan_index"] for run in sorted(runs, key=lambda r: r.id)] == list(range(8))  # made in plan order
    for word in ("sum", "fib", "sleep", "n=2", "×2", "AVG", "STDEV"):
        assert word in r.out


def test_a_block_of_one_cell_names_it_in_the_title(cli, db, tmp_path, rtprobe):
    """The cell's name would take the whole width of an 80-column table: its variant names the row instead."""
    spec = tmp_path / "one.toml"
    spec.write_text('name = "one"\n[[workload]]\nname = "exec"\nvariants = "sum"\nruntime = "native"\n'
                    '[workload.params]\niterations = 20\npause_ms = 0\n')
    r = cli("run", spec, "--db", db)
    assert r.code == 0, r.err
    out = " ".join(r.out.split())
    assert "experiment 1: one: exec/native iterations=20 pause_ms=0" in out
    row = next(line for line in r.out.splitlines() if line.startswith("│ sum"))
    assert [cell.strip() for cell in row.strip("│").split("│")][:2] == ["sum", "20"], row


def test_failed_run_marks_the_experiment_failed_and_keeps_what_was_done(cli, db, tmp_path, rtprobe, monkeypatch):
    # A probe that works twice, then fails: the experiment stops, marked failed, two runs kept.
    counter = tmp_path / "count"
    fake = tmp_path / "probe.sh"
    fake.write_text(f"#!/bin/sh\ncase \"$*\" in *--output*)\n"  # measuring, not asked for --version
                    f"  n=$(cat {counter} 2>/dev/null || echo 0); echo $((n+1)) > {counter}\n"
                    f"  [ \"$n\" -ge 2 ] && {{ echo 'disk on fire' >&2; exit 1; }};;\nesac\nexec {rtprobe} \"$@\"\n")
    fake.chmod(0o755)
    monkeypatch.setenv("RTSCOPE_RTPROBE", str(fake))
    spec = tmp_path / "small.toml"
    spec.write_text(SPEC.format(reps=2))
    r = cli("run", spec, "--db", db)
    assert r.code == 1
    err = " ".join(r.err.split())
    assert "disk on fire" in err and "experiment 1 stopped (marked failed)" in err and "--resume 1" in err
    store = Store(db)
    assert exp_mod.get(store, 1).status == "failed" and sorted(exp_mod.done_indexes(store, 1)) == [0, 1]
    monkeypatch.setenv("RTSCOPE_RTPROBE", str(rtprobe))
    r = cli("run", spec, "--db", db, "--resume")
    assert r.code == 0, r.err
    assert "2 of 8 runs already stored" in " ".join(r.err.split())
    assert sorted(run["plan_index"] for run in store.runs(experiment_id=1)) == list(range(8))
    assert exp_mod.get(store, 1).status == "finished"
    r = cli("run", spec, "--db", db, "--resume")
    assert r.code == 2 and "no unfinished experiment" in r.err
    r = cli("run", spec, "--db", db, "--resume", "1")
    assert r.code == 2 and "already finished" in r.err


def test_unavailable_setting_is_skipped_or_refused(cli, db, tmp_path, rtprobe, monkeypatch):
    monkeypatch.setenv("RTSCOPE_SYSFS_ROOT", str(tmp_path / "no-cpufreq"))
    extra = '[[workload]]\nname = "exec"\nvariants = "sum"\n[workload.settings]\ngovernor = "performance"\n' \
            '[workload.params]\niterations = 20\npause_ms = 0\n'
    spec = tmp_path / "s.toml"
    spec.write_text(SPEC.format(reps=1) + extra)
    r = cli("run", spec, "--db", db)
    assert r.code == 1 and "cannot run on this machine" in r.err and "not available on this machine" in r.err
    assert not os.path.exists(db)  # refused before anything was recorded
    spec.write_text('on_unavailable = "skip"\n' + SPEC.format(reps=1) + extra)
    r = cli("run", spec, "--db", db)
    assert r.code == 0, r.err
    assert "1 run skipped" in " ".join(r.out.split())
    store = Store(db)
    assert len(store.runs(experiment_id=1)) == 4 and exp_mod.get(store, 1).status == "finished"


def test_resume_arguments(cli, db, tmp_path):
    spec = tmp_path / "small.toml"
    spec.write_text(SPEC.format(reps=1))
    r = cli("run", spec, "5", "--db", db)
    assert r.code == 2 and "only taken with --resume" in r.err
    r = cli("run", spec, "--resume", "--db", db)
    assert r.code == 2 and "no unfinished experiment" in r.err
    r = cli("run", spec, "--resume", "3", "--db", db)
    assert r.code == 2 and "no experiment 3" in r.err
