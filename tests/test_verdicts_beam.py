"""An A/A on real BEAM runs: one configuration under two tags, interleaved, gets no verdict (the simulations of
the same claim: tests/test_verdicts.py)."""

import json

import pytest

pytestmark = [pytest.mark.real, pytest.mark.alone]


def need_beam():
    from rtscope.runtimes import RUNTIMES
    why = RUNTIMES["beam"].unavailable()
    if why:
        pytest.skip(why)


@pytest.mark.timing
def test_real_aa_on_the_beam(cli, db, tmp_path):
    """The issue's A/A on real runs: BEAM exec sum, one configuration run 5 times under each of two tags,
    interleaved, 5 vs 5 runs: no metric gets a verdict (alpha 0.01: the suite must not fail one run in a
    hundred by design; the simulation above checks the 5 % level).

    It compared message_queue_data on_heap with off_heap (no messages are sent) until a CI run called on_heap's
    median worse, +3.7 % with a between-run SD of 0.6 µs: not an A/A, the two configurations' processes differ.

    A real effect is detected on real runs in test_plan.py (native exec, a plan-sized experiment). Not here on
    the BEAM: this machine's BEAM runs move between speed levels 2.4x apart (exec sum medians of one
    configuration at 63, 85, 100, 135 and 150 µs, also within a run), so the +40 % of a small min_heap_size was
    missed in 8 vs 8 runs by a CI run (Welch on per-run medians, Holm over five metrics); bench/verdicts.py
    --beam measures that power."""
    need_beam()
    for tag in ("aa-a", "aa-b"):   # one spec per side: a spec refuses a configuration given twice
        (tmp_path / f"{tag}.toml").write_text(
            f'name = "{tag}"\ntags = "{tag}"\n[[workload]]\nname = "exec"\nvariants = ["sum"]\nruntime = "beam"\n'
            "[workload.params]\niterations = 1500\npause_ms = 0\n")
    for _ in range(5):             # interleaved: a, b, a, b, ...
        for tag in ("aa-a", "aa-b"):
            r = cli("run", tmp_path / f"{tag}.toml", "--db", db)
            assert r.code == 0, r.err
    r = cli("compare", "--db", db, "--tag", "aa-b", "--baseline-tag", "aa-a", "--alpha", "0.01", "--json")
    assert r.code == 0, r.err
    (k,) = json.loads(r.out)["comparisons"]
    assert k["runs"] == 5 and k["baseline_runs"] == 5
    assert {row["verdict"] for row in k["rows"]} <= {"no significant difference"}, k["rows"]


