"""`rtscope tune`: the spec's ranges and [tune] table checked; the search, race and confirmation on a test-only
runtime with a known optimum (tests/synthetic.py, through the real runner and store); interruption and resume;
a fleet; two processes on one PostgreSQL store (tests/test_tune_real.py: the BEAM and the timer)."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
from datetime import datetime
from pathlib import Path

import pytest

import synthetic
from rtscope.experiment import spec as spec_mod
from rtscope.store import Store

pytestmark = pytest.mark.real

HERE = Path(__file__).resolve().parent

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


@pytest.fixture
def syn(monkeypatch):
    synthetic.enable(monkeypatch)


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
    assert "a range table needs a knob that takes numbers" in r.err and "10 problem(s)" in r.err


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


# --- the search, the race and the confirmation -----------------------------------------------------------------

DROPPED = re.compile(r"mean significantly worse than candidate \d+ \(p \(Holm\) (<1e-300|\d\.\d+|\d\.?\d?e-\d+); "
                     r"runs' mean [\d.,]+ vs [\d.,]+ µs\)")


def test_synthetic_tune_finds_the_known_optimum_and_proves_it(cli, syn, tmp_path, monkeypatch):
    spec = write(tmp_path, SYNTHETIC.format(budget=40))
    db = str(tmp_path / "a.db")
    r = cli("tune", spec, "--db", db, "--json", "--write-spec", tmp_path / "confirm.toml")
    assert r.code == 0, r.err
    doc = json.loads(r.out)
    assert doc["goal"] == "mean" and doc["runs_used"] <= 40
    assert doc["verdict"] == "improved"
    assert doc["baseline"]["settings"] == {"fullsweep_after": 0, "min_heap_size": 233}
    best = doc["best"]["settings"]
    # the known optimum: a large heap (46422 words; beyond 20000 fullsweep_after no longer matters), priority
    # not low; the known mean there is half the baseline's
    assert best["min_heap_size"] >= 10_000 and best.get("priority") != "low", best
    assert doc["improvement"]["change"] <= -0.35
    rows = {row["metric"]: row for row in doc["confirmation"]}
    assert set(rows) == {"mean", "median", "p99", "max", "stdev"}
    assert rows["mean"]["verdict"] == "better" and rows["mean"]["p_holm"] < 0.05
    assert {"metric", "baseline", "value", "p_holm", "verdict"} <= set(rows["mean"])
    assert set(doc["importance"]) == {"fullsweep_after", "min_heap_size", "priority"}
    # priority moves the known mean by 2-15 %, the heap by up to 50 %, fullsweep_after by up to 30 %
    assert min(doc["importance"], key=doc["importance"].get) == "priority"
    # only the confirmation's runs decide: its runs are fresh, none of them a race run
    confirmation_runs = {i for c in doc["confirmations"].values() for i in c["runs"] + c["baseline_runs"]}
    race_runs = {i for c in doc["search"]["candidates"] for i in c["runs"]}
    assert confirmation_runs and not confirmation_runs & race_runs
    # the search: best-so-far never rises; every dropped candidate says why
    so_far = [p["best"] for p in doc["search"]["best_so_far"]]
    assert so_far == sorted(so_far, reverse=True)
    dropped = [c["reason"] for c in doc["search"]["candidates"] if c["dropped_round"] is not None]
    assert dropped and all(DROPPED.fullmatch(why) for why in dropped), dropped     # in words and µs
    # every trial is an ordinary run of the tune's experiment: compare works on it
    r = cli("compare", "--db", db, "--experiment", doc["experiment"], "--tag", "tune-confirm",
            "--baseline", "min_heap_size=233", "--json")
    assert r.code == 0, r.err
    assert any(row["verdict"] == "better" for k in json.loads(r.out)["comparisons"] for row in k["rows"])
    # the report shows the search and the confirmation
    r = cli("report", "--db", db, "--experiment", doc["experiment"], "-o", tmp_path / "report.html")
    assert r.code == 0, r.err
    html = (tmp_path / "report.html").read_text()
    assert "Tune: the search and its proof" in html and "best so far" in html
    assert f"Best configuration proven: <b>{' '.join(f'{k}={v}' for k, v in sorted(best.items()))}</b>" in html
    # --write-spec: a plain matrix spec of the confirmation (best, the other, baseline)
    written = spec_mod.parse((tmp_path / "confirm.toml").read_text(), "confirm.toml")
    assert written.tune is None and len(written.cells) == 3
    assert {c.request.settings.get("min_heap_size") for c in written.cells} >= {233, best["min_heap_size"]}

    # the same seed in another store: the same search, the same verdict (deterministic; the probe's noise
    # starts again from its seeds)
    synthetic.enable(monkeypatch)
    again = cli("tune", spec, "--db", str(tmp_path / "b.db"), "--json")
    assert again.code == 0, again.err
    doc2 = json.loads(again.out)
    assert [c["settings"] for c in doc2["search"]["candidates"]] == [c["settings"] for c in doc["search"]["candidates"]]
    assert doc2["best"] == doc["best"] and doc2["runs_used"] == doc["runs_used"]


def test_a_tune_never_confirms_a_worse_configuration(cli, syn, tmp_path):
    """Baseline at the optimum: nothing is better, so the baseline is kept (never a worse configuration)."""
    text = SYNTHETIC.format(budget=22).replace("baseline = { fullsweep_after = 0, min_heap_size = 233 }",
                                               'baseline = { min_heap_size = 46422, priority = "high" }')
    r = cli("tune", write(tmp_path, text), "--db", str(tmp_path / "s.db"), "--json")
    assert r.code == 0, r.err
    doc = json.loads(r.out)
    assert doc["runs_used"] <= 22
    mean = next(row for row in doc["confirmation"] if row["metric"] == "mean")
    if doc["verdict"] == "improved":      # only when the fresh runs prove it
        assert mean["verdict"] == "better" and doc["best"]["settings"] != doc["baseline"]["settings"]
    else:
        assert doc["verdict"] == "baseline kept"
        assert doc["best"]["settings"] == doc["baseline"]["settings"] and doc["best"]["role"] == "baseline"


def test_a_duration_budget_leaves_room_for_the_confirmation(cli, syn, tmp_path):
    db = str(tmp_path / "d.db")
    r = cli("tune", write(tmp_path, SYNTHETIC.format(budget=40)), "--db", db, "--budget", "4s", "--json")
    assert r.code == 0, r.err
    doc = json.loads(r.out)
    assert doc["budget"] == {"runs": None, "seconds": 4.0}
    assert doc["confirmations"] and len(Store(db).runs()) == doc["runs_used"]
    assert doc["race_ended"] in ("the budget leaves room only for the confirmation",
                                 "the incumbent is significantly better than every other survivor")


def test_short_runs_first_then_longer_for_the_survivors(cli, syn, tmp_path):
    db = str(tmp_path / "l.db")
    text = SYNTHETIC.format(budget=24).replace("budget = 24", "budget = 24\nfirst_length = 0.25")
    r = cli("tune", write(tmp_path, text), "--db", db, "--json")
    assert r.code == 0, r.err
    doc = json.loads(r.out)
    runs = {run.id: run for run in Store(db).runs()}
    slots = Store(db).tunes.slots(doc["tune"])
    by_round = {}
    for s in slots:
        by_round.setdefault((s["phase"], s["round"]), set()).add(runs[s["run_id"]].params["iterations"])
    assert by_round[("race", 1)] == {75} and by_round[("race", 2)] == {150}
    assert all(v == {300} for (phase, rnd), v in by_round.items() if phase == "confirm" or rnd >= 3)
    bad = write(tmp_path, text.replace('goal = "mean"', 'goal = "max"'), "bad.toml")
    r = cli("check", bad)
    assert r.code == 2 and "the maximum grows with a run's length" in flat(r.err)


def test_a_fleet_tunes_each_target_on_its_own(cli, syn, tmp_path):
    text = SYNTHETIC.format(budget=18) + '\n[targets.a]\nkind = "local"\n\n[targets.b]\nkind = "local"\n'
    spec = write(tmp_path, text.replace('[[workload]]', '[[workload]]', 1))
    db = str(tmp_path / "f.db")
    r = cli("tune", spec, "--db", db, "--target", "a", "--target", "b", "--json")
    assert r.code == 0, r.err
    docs = json.loads(r.out)
    assert [d["target"] for d in docs] == ["a", "b"]
    assert docs[0]["experiment"] != docs[1]["experiment"]
    store = Store(db)
    for d in docs:
        runs = store.runs(experiment_id=d["experiment"])
        assert len(runs) == d["runs_used"] and {r.settings.get("target") for r in runs} == {d["target"]}


# --- interruption, resume, several processes ------------------------------------------------------------------

def rtscope_synthetic(*args: str, run_s: float = 0) -> subprocess.Popen:
    """The CLI in a process of its own, with the synthetic runtime enabled (each run lasting run_s more)."""
    return subprocess.Popen([sys.executable, str(HERE / "synthetic.py"), "rtscope", *map(str, args)],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            env={**os.environ, "SYNTHETIC_RUN_S": str(run_s)})


def wait_for_runs(db: str, n: int, proc: subprocess.Popen, timeout: float = 60) -> None:
    deadline, last = time.monotonic() + timeout, None
    while time.monotonic() < deadline:
        if Path(db).exists() or "://" in db:
            try:
                if len(Store(db).runs()) >= n:
                    return
            except Exception as e:  # noqa: BLE001  (the store is being created)
                last = e
        assert proc.poll() is None, (last, proc.communicate())
        time.sleep(0.1)
    raise AssertionError(f"fewer than {n} runs after {timeout} s ({last})")


def test_sigterm_then_resume_repeats_no_finished_run(cli, syn, tmp_path):
    spec = write(tmp_path, SYNTHETIC.format(budget=24) + '\n[targets.board2]\nkind = "local"\n')
    db = str(tmp_path / "r.db")
    proc = rtscope_synthetic("tune", spec, "--db", db, run_s=0.3)
    wait_for_runs(db, 6, proc)
    proc.send_signal(signal.SIGTERM)
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == 143, err
    assert "marked interrupted" in err and "--resume 1" in err
    store = Store(db)
    before = {r.plan_index: r.id for r in store.runs()}
    row = store.tunes.get(1)
    assert row["status"] == "interrupted"
    assert all(s["claimed_by"] is None for s in store.tunes.slots(1) if s["run_id"] is None)  # given back
    r = cli("run", spec, "--db", db, "--resume", row["experiment_id"])   # its experiment is the tune's
    assert r.code == 2 and "is the trials of tune 1" in r.err
    # resumed by a process that makes its runs on another target of the same kind (a second board)
    r = cli("tune", spec, "--db", db, "--resume", "1", "--target", "board2", "--json")
    assert r.code == 0, r.err
    doc = json.loads(r.out)
    after = {r.plan_index: r.id for r in Store(db).runs()}
    made_now = [r for r in Store(db).runs() if r.plan_index not in before]
    assert made_now and all(r.settings.get("target") == "board2" for r in made_now)
    assert all(after[i] == run_id for i, run_id in before.items())      # nothing finished was made again
    assert len(after) == doc["runs_used"] <= 24 and sorted(after) == list(range(len(after)))
    r = cli("tune", spec, "--db", db, "--resume")
    assert r.code == 2 and "no unfinished tune" in r.err


def test_two_processes_share_one_tune_on_postgresql(tmp_path):
    import pgserver
    why = pgserver.available()
    if why:
        pytest.skip(why)
    server = pgserver.PgServer().start()
    try:
        url = server.create_database("tune_shared")
        spec = write(tmp_path, SYNTHETIC.format(budget=30))
        first = rtscope_synthetic("tune", spec, "--db", url, "--json", run_s=0.2)
        wait_for_runs(url, 1, first)
        second = rtscope_synthetic("tune", spec, "--db", url, "--resume", "1", "--json", run_s=0.2)
        out1, err1 = first.communicate(timeout=120)
        out2, err2 = second.communicate(timeout=120)
        assert first.returncode == 0, err1
        assert second.returncode == 0, err2
        doc1, doc2 = json.loads(out1), json.loads(out2)
        assert doc1 == doc2                                   # one tune, one verdict
        store = Store(url)
        runs = store.runs(experiment_id=doc1["experiment"])
        slots = store.tunes.slots(doc1["tune"])
        assert len(runs) == len(slots) == doc1["runs_used"] <= 30          # none twice, none lost
        assert sorted(r.plan_index for r in runs) == list(range(len(runs)))
        workers = {s["claimed_by"].rsplit(":", 1)[0] for s in slots}
        assert len(workers) == 2, workers                     # both processes made runs
    finally:
        server.stop()


# --- the default path on real native runs: no seed, resume, a failed start, what it prints -------------------

NATIVE = """name = "native-tune"
{top}
[tune]
goal = "mean"
budget = 10
confirm = 2

[[workload]]
name = "exec"
variants = "sum"
runtime = "native"
params = {{ {params} }}

[workload.settings]
mlock = [false, true]
"""


def native(tmp_path, params: str = "iterations = 100, pause_ms = 0", top: str = "") -> Path:
    """A tune spec without seed on real native exec runs: baseline, mlock=false, mlock=true; 9 or 7 runs."""
    return write(tmp_path, NATIVE.format(params=params, top=top), "native.toml")


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


def test_sigterm_then_resume_without_seed(cli, rtprobe, tmp_path, db):
    spec = native(tmp_path, "iterations = 100, pause_ms = 2")        # 0.2 s a run: time to stop it
    proc = subprocess.Popen([sys.executable, "-m", "rtscope", "tune", str(spec), "--db", db],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    wait_for_runs(db, 1, proc)
    proc.send_signal(signal.SIGTERM)
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == 143, err
    assert "marked interrupted" in err and "--resume 1" in err
    store = Store(db)
    seed, before = store.tunes.get(1)["seed"], {r.plan_index: r.id for r in store.runs()}
    assert store.tunes.get(1)["status"] == "interrupted" and before
    r = cli("tune", spec, "--db", db, "--resume")
    assert r.code == 0, r.err
    assert "resuming tune 1" in r.err and "best:" in r.out or "no configuration beat the baseline" in r.out
    store = Store(db)
    after = {r.plan_index: r.id for r in store.runs()}
    assert all(after[i] == run_id for i, run_id in before.items()) and len(after) > len(before)
    row = store.tunes.get(1)
    assert row["seed"] == seed and row["status"] == "finished" and row["result"]["runs_used"] == len(after)
    assert [e["status"] for e in store.experiment_rows()] == ["finished"]


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
        parsed = spec_mod.parse(NATIVE.format(params=params, top=""), "n.toml")
        return pause_text(SimpleNamespace(space=Space.of(parsed), budget=parsed.tune.budget))

    assert text("iterations = 2000, pause_ms = 3") == (
        "each run: at least 2,000 calls × 3 ms pause = 6 s, 10 runs at least 60 s; set pause_ms = 0 in the "
        "[[workload]] block's params for a faster search")
    assert text("iterations = 1000, pause_ms = { min = 0, max = 10 }") == (
        "each baseline run: at least 1,000 calls × 5 ms pause = 5 s, 10 runs at least 50 s")
    assert text("iterations = 1000, pause_ms = 0") is None
