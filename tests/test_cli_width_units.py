"""The README's study commands read at 80 columns (issue 50, items 5, 8, 9, 10): `recommend --experiment
nerves-rt` after a run of specs/nerves-rt.toml (a synthetic store shaped as `rtscope run` records one: the BEAM's
recorded defaults and versions beside the knobs), `compare`'s summary first and its stable order, a name shared by
two experiments resolved to the latest and said, one advice on repetitions, and one spec typo as one problem and a
hint, printed alike by `check` and `run`. The CLI is called piped (not a tty) with COLUMNS=80 (errors are never
wrapped, so the typo's test does not measure lines)."""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pytest

from registries import definitions_forgotten
from report_fixtures import ENV
from rtscope import samplefile
from rtscope.experiment import execute
from rtscope.experiment.spec import load
from rtscope.paths import repo_file
from rtscope.samplefile import Column
from rtscope.store import Store

pytestmark = pytest.mark.fast

WIDTH = 80
# What the BEAM harness records beside the requested knobs (runtimes/beam.py, beam/lib/rtscope/vm_info.ex).
BEAM_RECORDED = {"fullsweep_after": 65535, "min_heap_size": 233, "priority": "normal",
                 "message_queue_data": "on_heap", "vm_flags": "", "elixir_version": "1.14.0", "otp_release": "25",
                 "schedulers_online": 2}


def nerves_store(tmp: Path) -> str:
    """Two experiments of specs/nerves-rt.toml at quick scale, every cell but the governor's (no cpufreq here) run
    once in the first, three times in the second, with the settings a real run records; fullsweep_after=0 makes
    sum 30 % slower."""
    db = str(tmp / "nerves.db")
    store = Store(db)
    with definitions_forgotten():
        spec = load(repo_file("specs", "nerves-rt.toml"), "quick")
    rng = np.random.default_rng(5)
    for e, reps in enumerate((1, 3)):
        exp = execute.start(store, spec, execute.plan(spec, 1), 1, str(repo_file("specs", "nerves-rt.toml")))
        for cell, rep in ((c, rep) for c in spec.cells for rep in range(reps)):
            req = cell.request
            if "governor" in req.settings:
                continue
            settings = ({**BEAM_RECORDED, **req.settings} if req.runtime == "beam" else {"mlock": False})
            slow = 1.3 if req.settings.get("fullsweep_after") == 0 and req.variant == "sum" else 1.0
            values = ((1_000_000 + rng.gamma(20, 2500, 200)) * slow).astype(np.int64)
            header = samplefile.make_header(req.workload, req.variant, req.runtime, "test", "0",
                                            "2026-01-01T00:00:00Z", [Column("duration", "ns", "i64")], settings,
                                            dict(req.params))
            f = tmp / f"{e}-{rep}-{cell.key.replace('/', '_').replace(' ', '_')}.rts"
            samplefile.write(f, header, {"duration": values}, {"finished_at": "2026-01-01T00:00:01Z"})
            store.add_run(samplefile.read(f), ENV, experiment_id=exp.id, cell=cell.key, repetition=rep + 1)
    return db


@pytest.fixture
def narrow(cli, monkeypatch):
    """The CLI piped (capsys: not a tty) with COLUMNS=80; every line of both streams checked against it, but an
    error's (never wrapped)."""
    monkeypatch.setenv("COLUMNS", str(WIDTH))

    def call(*args):
        r = cli(*args)
        for stream in (r.out, r.err):
            long = [line for line in stream.splitlines() if len(line) > WIDTH and not line.startswith("rtscope: error:")]
            assert not long, f"lines over {WIDTH} columns: {long[:3]}"
        return r

    return call


@pytest.fixture(scope="module")
def study(tmp_path_factory):
    return nerves_store(tmp_path_factory.mktemp("nerves"))


def test_readme_recommend(narrow, cli, study):
    """README: `rtscope recommend --experiment nerves-rt --goal p99` works after a run of the study: the baseline is
    the configuration whose every knob is at its default (the BEAM's recorded fullsweep_after=65535,
    min_heap_size=233, priority=normal, its versions are no knobs), and the later of two experiments is used, said
    so."""
    r = narrow("recommend", "--experiment", "nerves-rt", "--goal", "p99", "--db", study)
    assert r.code == 0, r.err
    assert "note: 2 experiments are named 'nerves-rt' (1, 2): using the latest, experiment 2" in " ".join(
        r.err.split())
    text = " ".join(r.out.split())
    for variant in ("sum", "fib", "sleep"):
        assert f"exec {variant}, minimise p99:" in text
    assert "fullsweep_after=65535 min_heap_size=233 priority=normal" in text      # the default configuration
    assert "otp_release" not in text and "elixir_version" not in text
    j = cli("recommend", "--experiment", "nerves-rt", "--json", "--db", study)     # JSON: not laid out
    baselines = {rec["baseline"] for rec in __import__("json").loads(j.out)["recommendations"]}
    assert all("fullsweep_after=65535 min_heap_size=233 priority=normal" in b for b in baselines), baselines


def test_defaults_error_lists_knobs_only(cli, study):
    """No configuration at every default (the min_heap_size block only): the error lists the knobs' values, not
    the versions a runtime records, and no name without values."""
    r = cli("recommend", "--experiment", "nerves-rt", "--where", "min_heap_size=34", "--where",
               "min_heap_size=6765", "--db", study)
    assert r.code == 2
    err = " ".join(r.err.split())
    assert "no selected configuration runs with every setting at its default" in err
    assert "min_heap_size: 34, 6765" in err
    assert not re.search(r"otp_release|elixir_version|schedulers_online|vm_flags:", err), err


def test_compare_summary_first(narrow, study):
    """compare: a summary first (the experiment's id, one line per comparison, worst news first), then the details
    in a stable order; the same output twice; no line over 80 columns."""
    r = narrow("compare", "--experiment", "nerves-rt", "--baseline", "defaults", "--db", study)
    assert r.code == 0, r.err
    lines = r.out.splitlines()
    assert lines[0].startswith("compare experiment 2 (nerves-rt): 24 comparisons against defaults")
    assert "experiment 2" in " ".join(r.err.split())                     # the name's resolution said
    summary = lines[:lines.index("")]
    groups = [line for line in summary if line.startswith("against ")]
    assert len(groups) == 3 and groups == sorted(groups)
    entries = [line.strip() for line in summary if line.startswith("  ") and not line.startswith("    ")]
    assert len(entries) == 24
    after = summary[summary.index(next(g for g in groups if g.startswith("against sum"))) + 1:]
    sum_lines = [line for line in after if not line.startswith("    ")]
    assert sum_lines[0].strip().startswith("fullsweep_after=0: worse: ")    # the worst news first
    assert "details, one table per comparison:" in r.out
    assert narrow("compare", "--experiment", "nerves-rt", "--baseline", "defaults", "--db", study).out == r.out
    assert "per-run values (- : unknown)" not in " ".join(r.out.split()) and "--verbose" in r.out
    v = narrow("compare", "--experiment", "nerves-rt", "--baseline", "defaults", "--verbose", "--db", study)
    assert "variance components of each metric's per-run values (- : unknown)" in " ".join(v.out.split())


def test_holm_family_never_zero(narrow, study):
    """One run a side and runs of their own (native): nothing is tested, and the header says so in words."""
    r = narrow("compare", "--experiment", "1", "--variant", "fib", "--baseline", "defaults", "--db", study)
    assert r.code == 0, r.err
    assert "over all 0 tests" not in r.out and "no test could be made" in r.out
    text = " ".join((r.out + r.err).split())
    assert "1 run vs 3 runs with a mean: one side has a single run" in text
    assert "5 times or more" not in text and "(3 runs or more)" not in text
    assert text.count("repeat each configuration 3 times or more") >= 1


def test_advice_is_one_text():
    from rtscope.analysis.defaults import REPEAT_ADVICE, few_runs_reason
    assert few_runs_reason(1, 3, " with a stdev").startswith("1 run vs 3 runs with a stdev: one side has a single "
                                                             "run")
    assert few_runs_reason(1, 1).startswith("1 run vs 1 run: each side has a single run")
    assert few_runs_reason(1, None).startswith("1 run: the side has a single run")
    assert few_runs_reason(2, 5).endswith(REPEAT_ADVICE)


TYPO = "fulsweep_after"


@pytest.fixture
def typo_spec(tmp_path):
    text = repo_file("specs", "nerves-rt.toml").read_text()
    assert text.count("\nfullsweep_after = [") == 1
    path = tmp_path / "nerves-rt.toml"
    path.write_text(text.replace("\nfullsweep_after = [", f"\n{TYPO} = ["))
    return path


def test_typo_is_one_problem(cli, typo_spec, tmp_path):
    """A misspelt setting: one problem with a hint, not the claims and paper rows that name the setting; check and
    run print it the same way (an error is never wrapped: it is matched, grepped and pasted whole)."""
    check = cli("check", typo_spec)
    run = cli("run", typo_spec, "--db", tmp_path / "x.db")
    assert check.code == run.code == 2

    def error(err: str) -> str:     # check says the spec's warnings too, before its problems
        return err[err.index("rtscope: error:"):]
    assert error(check.err) == error(run.err)
    text = " ".join(error(check.err).split())
    assert text.count(str(typo_spec)) == 1                       # exactly one problem
    assert f"unknown setting '{TYPO}' (did you mean 'fullsweep_after'?)" in text
    assert "claim" not in text and "paper" not in text
    assert not (tmp_path / "x.db").exists()


def test_second_real_problem_still_said(cli, typo_spec):
    """Only what follows from the broken block is held back: a problem elsewhere is still found."""
    text = typo_spec.read_text().replace('on_unavailable = "skip"', 'on_unavailable = "skipp"')
    typo_spec.write_text(text)
    r = cli("check", typo_spec)
    assert r.code == 2 and "2 problems in spec" in r.err and "unknown on_unavailable 'skipp'" in r.err


@pytest.mark.parametrize("command", [("tasks-table",), ("storage-table",)])
def test_every_command_says_the_shared_name(narrow, study, command):
    """The same note wherever --experiment NAME is taken (cli.common.note_experiment), here before the command
    finds that the experiment has none of its runs."""
    r = narrow(*command, "--experiment", "nerves-rt", "--db", study)
    assert "note: 2 experiments are named 'nerves-rt' (1, 2): using the latest, experiment 2" in " ".join(
        r.err.split()), r.err
