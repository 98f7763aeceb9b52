"""Claims (`[[claim]]` in a spec) judged by `rtscope reproduce` on stored synthetic runs of known truth."""

from __future__ import annotations

import json
import re
import xml.etree.ElementTree as ET

import numpy as np
import pytest

from rtscope.store import Store

from report_fixtures import add_run

pytestmark = pytest.mark.fast

SPEC = """name = "claimed"
[[workload]]
name = "exec"
variants = ["sum", "fib"]
runtime = "beam"
[workload.settings]
fullsweep_after = [0, 65535]
"""


def claim(cid="c", expect='"lower"', metric="mean", cell="{ fullsweep_after = 0 }",
          baseline="{ fullsweep_after = 65535 }", extra="") -> str:
    return (f'\n[[claim]]\nid = "{cid}"\ntext = "a claim"\nmetric = "{metric}"\nwhere = {{ variant = "sum" }}\n'
            + (f"baseline = {baseline}\n" if baseline else "") + f"cell = {cell}\nexpect = {expect}\n{extra}")


def store_runs(db: str, tmp, means: dict[int, float], runs: int, *, between=0.01, within=0.1, n=200,
               seed=1) -> None:
    """`runs` runs of exec sum on the BEAM per fullsweep_after value, mean time means[value] µs."""
    rng = np.random.default_rng(seed)
    store = Store(db)
    for value, mean in means.items():
        for _ in range(runs):
            run_mean = mean * 1000 * (1 + rng.normal(0, between))
            values = np.maximum(1, rng.normal(run_mean, within * mean * 1000, n)).astype(np.int64)
            add_run(store, tmp, values, runtime="beam", settings={"fullsweep_after": value}, tags=["syn"])


def reproduce(cli, tmp_path, db, claims: str, *args):
    spec = tmp_path / "claimed.toml"
    spec.write_text(SPEC + claims)
    r = cli("reproduce", spec, "--tag", "syn", "--db", db, "--json", *args)
    return r, (json.loads(r.out)["claims"] if r.code in (0, 1) and r.out else None)


def test_directional_claim_holds(cli, tmp_path, db):
    store_runs(db, tmp_path, {0: 90.0, 65535: 100.0}, 5)
    r, [c] = reproduce(cli, tmp_path, db, claim())
    assert r.code == 0, r.err
    assert c["verdict"] == "holds" and c["p_holm"] < 0.05
    assert c["measured"]["unit"] == "µs" and 85 < c["measured"]["cell"] < 95 < c["measured"]["baseline"]
    assert c["interval"]["of"] == "difference" and c["interval"]["high"] < 0
    assert c["runs_needed"] is None and c["reason"] is None


def test_directional_claim_contradicted_fails_the_gate(cli, tmp_path, db):
    store_runs(db, tmp_path, {0: 110.0, 65535: 100.0}, 5)
    junit = tmp_path / "claims.xml"
    r, [c] = reproduce(cli, tmp_path, db, claim(), "--fail-on", "contradicted", "--junit", junit)
    assert r.code == 1 and c["verdict"] == "contradicted"
    suite = ET.parse(junit).getroot()
    assert suite.get("tests") == "1" and suite.get("failures") == "1"
    assert suite.find(".//testcase").get("name") == "c"
    r, _ = reproduce(cli, tmp_path, db, claim())     # without --fail-on: reported, exit 0
    assert r.code == 0


def test_directional_claim_undecided_says_how_many_runs(cli, tmp_path, db):
    store_runs(db, tmp_path, {0: 99.0, 65535: 100.0}, 3, between=0.02)
    r, [c] = reproduce(cli, tmp_path, db, claim(extra="min_effect = 0.005\n"))
    assert r.code == 0, r.err
    assert c["verdict"] == "undecided"
    assert c["runs_needed"] > 3
    assert c["command"].startswith("rtscope reproduce ") and c["command"].endswith(f"--repetitions {c['runs_needed']}")
    r = cli("reproduce", tmp_path / "claimed.toml", "--tag", "syn", "--db", db)   # the table, piped
    assert "undecided" in r.out and f"{c['runs_needed']} runs per configuration" in r.out
    assert "published on:" in r.out and "measured on:" in r.out


def test_an_absent_effect_contradicts_a_directional_claim(cli, tmp_path, db):
    """Within ±min_effect (default 5 % without published figures): the effect is absent here."""
    store_runs(db, tmp_path, {0: 100.0, 65535: 100.0}, 8)
    r, [c] = reproduce(cli, tmp_path, db, claim())
    assert r.code == 0, r.err
    assert c["verdict"] == "contradicted" and c["min_effect"] == 0.05
    assert "at most" in c["reason"] and "smallest effect of interest" in c["reason"]
    assert -5 < c["interval"]["low"] < c["interval"]["high"] < 5
    r, [c] = reproduce(cli, tmp_path, db, claim(extra="min_effect = 0.001\n"))   # a smaller one: undecided
    assert c["verdict"] == "undecided" and c["min_effect"] == 0.001


def test_min_effect_defaults_to_half_the_published_change(cli, tmp_path, db):
    store_runs(db, tmp_path, {0: 100.0, 65535: 100.0}, 3)
    pub = 'published = { baseline = 100, cell = 60, unit = "us" }\n'
    r, [c] = reproduce(cli, tmp_path, db, claim(extra=pub))
    assert c["min_effect"] == pytest.approx(0.2)
    r = cli("check", tmp_path / "claimed.toml")
    assert r.code == 0
    (tmp_path / "bad.toml").write_text(SPEC + claim(expect='"same"', extra="margin = 0.05\nmin_effect = 0.1\n"))
    r = cli("check", tmp_path / "bad.toml")
    assert r.code == 2 and "min_effect belongs to" in r.err
    (tmp_path / "bad.toml").write_text(SPEC + claim(extra="min_effect = 5\n"))
    r = cli("check", tmp_path / "bad.toml")
    assert r.code == 2 and "min_effect must be above 0 and below 1" in r.err


def test_same_holds_when_the_truth_is_equal_and_runs_are_enough(cli, tmp_path, db):
    store_runs(db, tmp_path, {0: 100.0, 65535: 100.0}, 8)
    r, [c] = reproduce(cli, tmp_path, db, claim(expect='"same"', extra="margin = 0.05\n"))
    assert r.code == 0, r.err
    assert c["verdict"] == "holds" and c["expect"] == {"same": True, "margin": 0.05}
    assert -5 < c["interval"]["low"] < c["interval"]["high"] < 5


def test_same_is_contradicted_beyond_its_margin(cli, tmp_path, db):
    store_runs(db, tmp_path, {0: 130.0, 65535: 100.0}, 5)
    r, [c] = reproduce(cli, tmp_path, db, claim(expect='"same"', extra="margin = 0.05\n"))
    assert c["verdict"] == "contradicted"


def test_ratio_claim(cli, tmp_path, db):
    store_runs(db, tmp_path, {0: 50.0, 65535: 100.0}, 5)
    r, claims = reproduce(cli, tmp_path, db, claim("half", "{ ratio = [0.4, 0.6] }")
                          + claim("third", "{ ratio = [0.2, 0.4] }") + claim("wide", "{ ratio = [0.45, 0.9] }",
                                                                              metric="p99")
                          + claim("edge", "{ ratio = [0.5, 0.9] }"))
    assert r.code == 0, r.err
    by_id = {c["id"]: c for c in claims}
    assert by_id["half"]["verdict"] == "holds" and 0.45 < by_id["half"]["measured"]["ratio"] < 0.55
    assert by_id["half"]["interval"]["of"] == "ratio" and 0.4 < by_id["half"]["interval"]["low"]
    assert by_id["third"]["verdict"] == "contradicted"
    assert by_id["wide"]["verdict"] == "holds"
    edge = by_id["edge"]                  # the truth (0.5) on the range's end: undecided, and the reason says why
    assert edge["verdict"] == "undecided" and "from the range's end 0.5, and a ratio that close" in edge["reason"]


def test_bound_claim(cli, tmp_path, db):
    store_runs(db, tmp_path, {0: 100.0, 65535: 100.0}, 4)
    r, claims = reproduce(cli, tmp_path, db,
                          claim("under", '{ below = 0.12, unit = "ms" }', baseline=None)
                          + claim("over", '{ below = 90, unit = "us" }', baseline=None)
                          + claim("close", '{ below = 100.05, unit = "us" }', baseline=None))
    assert r.code == 0, r.err
    by_id = {c["id"]: c for c in claims}
    assert by_id["under"]["verdict"] == "holds" and by_id["under"]["measured"]["unit"] == "µs"
    assert by_id["under"]["interval"]["of"] == "value" and by_id["under"]["interval"]["high"] < 120
    assert by_id["over"]["verdict"] == "contradicted"
    assert by_id["close"]["verdict"] == "undecided" and by_id["close"]["runs_needed"] > 4


def test_one_run_a_side_is_undecided_with_its_reason(cli, tmp_path, db):
    store_runs(db, tmp_path, {0: 50.0, 65535: 100.0}, 1)
    r, [c] = reproduce(cli, tmp_path, db, claim())
    assert r.code == 0, r.err
    assert c["verdict"] == "undecided" and c["runs_needed"] is None
    assert "1 run vs 1 run" in c["reason"] and "between-run variation is unknown" in c["reason"]
    assert c["command"].endswith("--repetitions 3")


def test_holm_runs_over_the_claims_of_one_invocation(cli, tmp_path, db):
    store_runs(db, tmp_path, {0: 97.0, 65535: 100.0}, 4, between=0.01, seed=3)
    _, [alone] = reproduce(cli, tmp_path, db, claim())
    _, claims = reproduce(cli, tmp_path, db, claim() + claim("b", metric="median") + claim("c2", metric="p99"))
    assert claims[0]["p"] == alone["p"] and claims[0]["p_holm"] >= alone["p_holm"]
    assert max(c["p_holm"] for c in claims) <= 1 and min(c["p_holm"] for c in claims) >= min(c["p"] for c in claims)


@pytest.mark.parametrize("claims, message", [
    (claim(metric="average"), "unknown metric 'average'; valid metrics: mean, median, p99, max, stdev, tail, "
                              "memory_per_task"),
    (claim(cell="{ fullsweep_after = 1 }"), "no configuration of the matrix makes its cell (variant=sum "
                                            "fullsweep_after=1): fullsweep_after=1 is not made there; values of "
                                            "fullsweep_after: 0, 65535"),
    (claim() + claim(), "claim id 'c' is used twice"),
    (claim(expect='"smaller"'), "unknown expect 'smaller'; valid: lower, higher, same"),
    (claim(expect='"same"'), "expect = \"same\" needs margin"),
    (claim(cell="{ colour = 1 }"), "cell names 'colour', not a setting, parameter or workload/variant/runtime"),
    (claim(expect='{ below = 5, unit = "parsec" }', baseline=None), "unknown unit 'parsec'; valid units: ns, us"),
    (claim(extra='requires = "vms"\n'), "unknown requirement 'vms'; valid: xenomai, solo5, xen"),
    (claim(cell='{ variant = "fib", fullsweep_after = 0 }').replace('where = { variant = "sum" }\n', ""),
     "its baseline (fullsweep_after=65535) matches 2 configurations"),
])
def test_bad_claims_are_errors_with_their_line_and_nothing_runs(cli, tmp_path, db, claims, message):
    spec = tmp_path / "bad.toml"
    spec.write_text(SPEC + claims)
    r = cli("reproduce", spec, "--db", db)
    assert r.code == 2, (r.out, r.err)
    text = " ".join(r.err.split())
    assert message in text, text
    line = re.search(rf"{re.escape(str(spec))}:(\d+): ", text)
    assert line and int(line.group(1)) >= SPEC.count("\n") + 2, text   # a line of the [[claim]] table
    assert not Store(db).experiment_names()
    r = cli("check", spec)
    assert r.code == 2 and message in " ".join(r.err.split())


def test_a_spec_without_claims_is_refused(cli, tmp_path, db):
    spec = tmp_path / "plain.toml"
    spec.write_text(SPEC)
    r = cli("reproduce", spec, "--db", db)
    assert r.code == 2 and "has no [[claim]] tables" in r.err


def test_requirement_is_not_measurable_here_unless_runs_are_stored(cli, tmp_path, db):
    store_runs(db, tmp_path, {0: 90.0, 65535: 100.0}, 3)
    xenomai = ('\n[[claim]]\nid = "x"\ntext = "Xenomai is faster"\nmetric = "mean"\nrequires = "xenomai"\n'
               'baseline = { fullsweep_after = 65535 }\ncell = { runtime = "xenomai" }\nexpect = "lower"\n')
    r, [c] = reproduce(cli, tmp_path, db, xenomai)
    assert r.code == 0, r.err
    assert c["verdict"] == "not measurable here" and "no Xenomai kernel here" in c["reason"]
