"""`rtscope tune`: the search, race and confirmation on a test-only runtime with a known optimum
(tests/synthetic.py, through the real runner and store, tens of runs a tune); interruption and resume; a fleet;
two processes on one PostgreSQL store (tests/test_tune_real.py: the BEAM and the timer). The spec's checks and
the default path on short native runs: tests/test_tune_units.py."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

import synthetic
from rtscope.experiment import spec as spec_mod
from rtscope.store import Store
from test_tune_units import SYNTHETIC, flat, native, write

pytestmark = pytest.mark.real

HERE = Path(__file__).resolve().parent


@pytest.fixture
def syn(monkeypatch):
    synthetic.enable(monkeypatch)


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
    # 16 runs: 6 or 7 made before the signal, the rest after the resume (24 took 8 more runs of 0.3 s)
    spec = write(tmp_path, SYNTHETIC.format(budget=16) + '\n[targets.board2]\nkind = "local"\n')
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
    assert len(after) == doc["runs_used"] <= 16 and sorted(after) == list(range(len(after)))
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
        spec = write(tmp_path, SYNTHETIC.format(budget=16))      # runs of 0.2 s: both processes make some
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
        assert len(runs) == len(slots) == doc1["runs_used"] <= 16          # none twice, none lost
        assert sorted(r.plan_index for r in runs) == list(range(len(runs)))
        workers = {s["claimed_by"].rsplit(":", 1)[0] for s in slots}
        assert len(workers) == 2, workers                     # both processes made runs
    finally:
        server.stop()


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
