"""The CLI of designs and sequential stopping: bad input refused before anything runs, each with a clear error
(the runs themselves: tests/test_paired.py)."""

from __future__ import annotations

import pytest

from rtscope.store import Store
from terminal import piped

pytestmark = pytest.mark.fast

SPEC = """name = "d"
[[workload]]
name = "exec"
variants = "sum"
runtime = "native"
[workload.params]
iterations = 50
n = [4000, 8000]
"""

CLAIM = """
[[claim]]
id = "c"
text = "a claim"
metric = "mean"
baseline = { n = 4000 }
cell = { n = 8000 }
expect = "higher"
"""


@pytest.fixture
def spec(tmp_path):
    p = tmp_path / "d.toml"
    p.write_text(SPEC + CLAIM)
    return p


@pytest.mark.parametrize("args, message", [
    (("run", "{spec}", "--design", "duets"), "unknown --design 'duets'; valid: runs, interleaved, duet, auto"),
    (("run", "{spec}", "--budget", "5m"), "--budget goes with --until-decided"),
    (("run", "{spec}", "--until-decided"), "has no `baseline = { NAME = VALUE }`"),
    (("run", "{spec}", "--until-decided", "--budget", "soon"), "has no `baseline"),
    (("reproduce", "{spec}", "--budget", "5m"), "--budget and --resume go with --until-decided"),
    (("reproduce", "{spec}", "--until-decided", "--repetitions", "3"), "--until-decided chooses how many runs"),
    (("reproduce", "{spec}", "--until-decided", "--budget", "soon"), "invalid --budget 'soon'"),
    (("reproduce", "{spec}", "--until-decided", "--resume"), "no interrupted `--until-decided` of"),
])
def test_bad_input_is_refused_with_the_valid_choices(cli, db, spec, args, message):
    r = cli(*(a.format(spec=spec) for a in args), "--db", db)
    assert r.code == 2, (r.code, r.out, r.err)
    assert message in " ".join(r.err.split()), r.err
    assert not Store(db).runs()             # nothing ran, nothing half-written


def test_interleaved_refuses_a_configuration_that_cannot_be_an_arm(cli, db, tmp_path):
    p = tmp_path / "t.toml"
    p.write_text('name = "t"\n[[workload]]\nname = "timer"\nvariants = "absolute"\nruntime = "native"\n'
                 '[workload.params]\nloops = 100\ninterval_us = [1000, 2000]\n')
    r = cli("run", p, "--design", "interleaved", "--db", db)
    assert r.code == 2 and "cannot be an arm of an interleaved run" in " ".join(r.err.split()), r.err
    assert 'design = "auto"' in r.err and not Store(db).runs()


def test_run_until_decided_piped_at_80_columns(tmp_path):
    """The spec's comparisons with its baseline decided round by round: a 10x larger sum is `worse`, piped (a fresh
    process, as a user runs it; the store is ./rtscope.db, the default); on an 80-column terminal the table fits."""
    p = tmp_path / "b.toml"
    p.write_text(SPEC.replace("n = [4000, 8000]", "n = [4000, 40000]")
                 .replace('name = "d"', 'name = "b"\nbaseline = { n = 4000 }'))
    r = piped(tmp_path, "run", p, "--until-decided", "--budget", "1m")
    assert r.code == 0, r.err
    assert "worse" in r.out and "until decided: experiment 1" in " ".join(r.out.split())
    assert "look 1 after 2 rounds" in r.err
    runs = Store(str(tmp_path / "rtscope.db")).runs()
    assert len(runs) >= 4 and {run.experiment_id for run in runs} == {1}
    table = r.out[r.out.index("┏"):r.out.index("until decided")]
    assert max(len(line) for line in table.splitlines()) <= 80, table     # the table fits a terminal as it is


def test_claims_decided_at_different_looks_say_each_interval_level(capsys):
    """After --until-decided each claim's interval is at the level of the look that decided it: the column cannot
    name one level for all, so each interval names its own (one figure, one value)."""
    from rtscope.analysis.claims import Claim, Expect, Judgement
    from rtscope.cli.reproduce import print_claims
    ratio = Expect("ratio", low=0.948, high=0.995)
    early = Judgement(Claim("early", "t", "mean", ratio), "contradicted", "ns", 6e6, 5e6, (0.772, 0.927), "ratio",
                      level=0.9917)
    late = Judgement(Claim("late", "t", "mean", ratio), "undecided", "ns", 1e8, 9.9e7, (0.95, 1.0), "ratio",
                     level=0.9998)
    print_claims([early, late], "msgq", 0.05, {}, "rtscope reproduce msgq", {})
    out = capsys.readouterr().out
    assert "interval (its level)" in out and "(0.9917)" in out and "(0.9998)" in out, out
    print_claims([early], "msgq", 0.05, {}, "rtscope reproduce msgq", {})
    out = capsys.readouterr().out
    assert "0.9917 interval" in out and "(0.9917)" not in out, out
