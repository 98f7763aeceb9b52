"""`rtscope tune`'s spec and what it says: the spec's ranges and [tune] table checked at their lines, a knob the
target cannot apply dropped with its reason, budgets, seeds, the roles and the pause in words, and the default
path on short native runs as a normal task (no seed, a failed start). The search, race and confirmation on the
test-only runtime with a known optimum, interruption and resume, a fleet, two processes on PostgreSQL:
tests/test_tune.py."""

from __future__ import annotations

import re
from datetime import datetime
from pathlib import Path

import pytest

from spec_texts import native_tune
from rtscope.experiment import spec as spec_mod
from rtscope.store import Store

pytestmark = pytest.mark.fast


SYNTHETIC = """name = "synthetic-tune"
seed = 11

[tune]
goal = "mean"
budget = {budget}
baseline = {{ fullsweep_after = 0, min_heap_size = 233 }}

[[workload]]
name = "exec"
variants = "sum"
runtime = "synthetic"
params = {{ iterations = 300, pause_ms = 0 }}

[workload.settings]
fullsweep_after = {{ min = 0, max = 65535, log = true }}
min_heap_size = {{ min = 233, max = 200000, log = true }}
priority = ["low", "normal", "high"]
"""


def flat(text: str) -> str:
    """Terminal output without the console's line wrapping."""
    return " ".join(text.split())


def write(tmp_path, text: str, name: str = "tune.toml") -> Path:
    path = tmp_path / name
    path.write_text(text)
    return path


# --- the spec -------------------------------------------------------------------------------------------------

BAD = """name = "bad"

[tune]
goal = "fastest"
budget = 5
baseline = { nosuch = 1 }
alpha = 2

[[workload]]
name = "exec"
variants = "sum"
runtime = "beam"

[workload.settings]
fullsweep_after = { min = 10, max = 0 }
min_heap_size = { min = 5, max = 5 }
priority = { min = 1, max = 3 }
bogus = [1, 2]
message_queue_data = ["on_heap", "off_heap"]
vm_flags = { min = 1, max = 2, log = true, step = 1 }
"""


def test_check_reports_every_problem_of_a_tune_spec_at_its_line(cli, tmp_path):
    r = cli("check", write(tmp_path, BAD))
    assert r.code == 2
    expected = {4: "unknown goal 'fastest'", 5: "budget of 5 runs is too small", 6: "baseline names 'nosuch'",
                7: "alpha must be between 0 and 1", 15: "inverted range of fullsweep_after",
                16: "empty range of min_heap_size", 17: "invalid value 1 for priority",
                18: "unknown setting 'bogus'", 20: "the range of vm_flags has both log and step"}
    for line, text in expected.items():
        assert f"tune.toml:{line}: {text}" in flat(r.err), (line, r.err)
    assert "a range table needs a knob that takes numbers" in r.err and "10 problems in spec" in r.err


def test_a_valid_tune_spec_is_described_and_only_tune_runs_it(cli, tmp_path, db):
    good = write(tmp_path, SYNTHETIC.format(budget=40).replace('"synthetic"', '"beam"'))
    r = cli("check", good)
    assert r.code == 0, r.err
    assert "a tune of 3 knobs (fullsweep_after, min_heap_size, priority), goal mean, budget 40 runs" in flat(r.out)
    r = cli("run", good, "--db", db)
    assert r.code == 2 and "is a tune spec" in r.err
    matrix = write(tmp_path, 'name = "m"\n[[workload]]\nname = "exec"\nvariants = "sum"\n'
                             '[workload.settings]\nrt_priority = { min = 1, max = 50 }\n', "m.toml")
    r = cli("check", matrix)
    assert r.code == 2 and "m.toml:6:" in r.err and "a range table { min, max } is a tune axis" in flat(r.err)
    r = cli("tune", write(tmp_path, matrix.read_text().replace("{ min = 1, max = 50 }", "[1, 50]"), "m.toml"),
            "--db", db)
    assert r.code == 2 and "has no [tune] table" in r.err
    for args, text in ((("--budget", "7"), "--budget: budget of 7 runs is too small"),
                       (("--budget", "soon"), "invalid budget 'soon'"), (("--goal", "fast"), "unknown goal 'fast'")):
        r = cli("tune", good, "--db", db, *args)
        assert r.code == 2 and text in r.err, r.err
    assert not Path(db).exists() or Store(db).runs() == []


def test_a_knob_the_target_cannot_apply_is_dropped_with_its_reason(cli, tmp_path, db):
    from rtscope.settings.registry import SETTINGS
    from rtscope.targets import LocalTarget
    why = SETTINGS["governor"].unavailable("performance", LocalTarget())
    if why is None:
        pytest.skip("this machine has cpufreq: the governor can be applied")
    text = ('name = "g"\n[tune]\ngoal = "p99"\nbudget = 14\nconfirm = 2\n[[workload]]\nname = "timer"\n'
            'variants = "absolute"\nsettings = { governor = ["performance", "powersave"] }\n')
    r = cli("tune", write(tmp_path, text), "--db", db)
    assert r.code == 2 and "tune.toml:9: nothing left to tune" in flat(r.err) and why in flat(r.err)
    assert "left out of the search: governor=performance" in flat(r.err)
    assert not Path(db).exists()


def test_budget_durations():
    from rtscope.experiment.spec.tune import parse_budget
    assert parse_budget("1h30m").seconds == 5400 and parse_budget("45s").seconds == 45
    assert parse_budget("40").runs == 40 and parse_budget(12).runs == 12


# --- the default path on native runs: no seed, a failed start, what it prints --------------------------------

def native(tmp_path, params: str = "iterations = 100, pause_ms = 0", top: str = "") -> Path:
    """A tune spec without seed on real native exec runs: baseline, mlock=false, mlock=true; 9 or 7 runs."""
    return write(tmp_path, native_tune("native-tune", params, top), "native.toml")


CONFIRMATION = re.compile(r"confirmation: (6|4) fresh runs \(2 each\) of (candidate \d \(winner\), candidate \d "
                          r"\(runner-up\) and the baseline \(candidate 0\)|the baseline \(candidate 0\), the race's "
                          r"winner and candidate \d \(runner-up\))")


def test_a_tune_without_seed_runs_and_says_what_it_does_in_words(cli, rtprobe, tmp_path, db, capsys):
    r = cli("tune", native(tmp_path), "--db", db)       # the default path: no seed in the spec, no --seed
    assert r.code == 0, r.err
    row = Store(db).tunes.get(1)
    assert 0 <= row["seed"] < 2**32 and f"seed {row['seed']}" in flat(r.err)     # a fresh seed, recorded
    assert row["status"] == "finished" and row["result"]["verdict"] in ("improved", "baseline kept")
    assert CONFIRMATION.search(flat(r.err)), r.err
    assert "{" not in r.err + r.out and "True" not in r.out + r.err and "False" not in r.out + r.err
    assert "each run:" not in r.err                      # pause_ms = 0: nothing to say about the pause
    assert "p (Holm)" in r.out and "tune 1 (experiment 1): goal mean" in flat(r.out)
    # a p-value that underflowed to 0 reads as a bound, never a bare 0
    from rtscope.cli.tune import _print_result
    doc = Store(db).tunes.get(1)["result"]
    for row in doc["confirmation"]:
        row["p_holm"] = 0.0 if row["p_holm"] is not None else None
    _print_result(doc)
    shown = capsys.readouterr().out
    cells = [c.strip() for line in shown.splitlines() if line.startswith("│") for c in line.split("│")]
    assert "<1e-300" in cells and "0" not in cells, shown


def test_roles_in_words():
    from rtscope.cli.tune import roles_text
    assert roles_text({"winner": 3, "baseline": 0, "runner_up": 1}) == \
        "candidate 3 (winner), candidate 1 (runner-up) and the baseline (candidate 0)"
    assert roles_text({"winner": 0, "baseline": 0, "runner_up": 2}) == \
        "the baseline (candidate 0), the race's winner and candidate 2 (runner-up)"
    assert roles_text({"winner": 2, "baseline": 0}) == "candidate 2 (winner) and the baseline (candidate 0)"


def test_any_seed_gives_the_sampler_one_it_takes(tmp_path):
    """A spec's seed may be up to 2**63-1 and a round multiplies it: the sampler still gets a seed it takes."""
    from rtscope.experiment.spec.check import MAX_SEED
    from rtscope.experiment.tune import Space, propose
    space = Space.of(spec_mod.parse(native(tmp_path).read_text(), "native.toml"))
    for seed in (0, 2**32 - 1, 2**32, 4_294_967_295 * 100_003 + 7, MAX_SEED * 100_003 + 1):
        new = propose.propose(space, [], 2, seed, startup=4)
        assert sorted(k["mlock"] for k in new) == [False, True], seed
    history = [({"mlock": False}, 1.0), ({"mlock": True}, 2.0), ({}, 1.5)]
    assert propose.importance(space, history, MAX_SEED) == propose.importance(space, history, MAX_SEED % 2**32)


def test_a_seed_out_of_range_is_refused(cli, tmp_path, db):
    for command in ("tune", "run"):
        for value in ("-1", str(2**63)):
            r = cli(command, native(tmp_path), "--db", db, f"--seed={value}")
            assert r.code == 2 and f"--seed must be 0..{2**63 - 1} (as a spec's seed), not {value}" in r.err, r.err
    assert not Path(db).exists()


def test_a_start_that_stores_no_run_leaves_nothing_behind(cli, rtprobe, tmp_path, db):
    # every run takes 5 s (100 calls, 50 ms apart) and is stopped after 0.5 s: the first one fails
    spec = native(tmp_path, "iterations = 100, pause_ms = 50", top="timeout_s = 0.5\n")
    r = cli("tune", spec, "--db", db)
    assert r.code == 1, r.err
    assert ("tune 1 stored no run, so it was removed from the store with its experiment (nothing to resume); "
            f"start again with `rtscope tune {spec}`") in flat(r.err)
    assert "--resume" not in r.err
    store = Store(db)
    assert store.experiment_rows() == [] and store.tunes.find() == [] and store.runs() == []
    r = cli("tune", spec, "--db", db, "--resume")
    assert r.code == 2 and "no unfinished tune" in r.err


def test_the_pause_between_calls_is_said_before_the_first_run(cli, rtprobe, tmp_path, db):
    """exec's default pause (5 ms a call) sets a run's length; the tune says so, and the runs bear it out."""
    r = cli("tune", native(tmp_path, "iterations = 20"), "--db", db)
    assert r.code == 0, r.err
    said = ("tune 1: each run: at least 20 calls × 5 ms pause = 0.1 s, 10 runs at least 1 s (the exec workload's "
            "default pause_ms, 5 ms between calls); set pause_ms = 0 in the [[workload]] block's params for a "
            "faster search")
    err = flat(r.err)
    assert said in err and err.index(said) < err.index("round 1"), r.err
    runs = Store(db).runs()
    assert runs and all(r.params["pause_ms"] == 5 for r in runs)
    for run in runs:
        took = (datetime.fromisoformat(run.finished_at) - datetime.fromisoformat(run.started_at)).total_seconds()
        assert took >= 0.1 - 0.002, (run.id, took)


def test_the_pause_text_of_a_pause_set_or_tuned(tmp_path):
    from types import SimpleNamespace
    from rtscope.cli.tune import pause_text
    from rtscope.experiment.tune import Space

    def text(params: str) -> str | None:
        parsed = spec_mod.parse(native_tune("native-tune", params), "n.toml")
        return pause_text(SimpleNamespace(space=Space.of(parsed), budget=parsed.tune.budget))

    assert text("iterations = 2000, pause_ms = 3") == (
        "each run: at least 2,000 calls × 3 ms pause = 6 s, 10 runs at least 60 s; set pause_ms = 0 in the "
        "[[workload]] block's params for a faster search")
    assert text("iterations = 1000, pause_ms = { min = 0, max = 10 }") == (
        "each baseline run: at least 1,000 calls × 5 ms pause = 5 s, 10 runs at least 50 s")
    assert text("iterations = 1000, pause_ms = 0") is None
