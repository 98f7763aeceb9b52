"""rtscope tail: known tails recovered, dependence refused, the JSON shape, histogram runs, real runs, bad input."""

from __future__ import annotations

import json
import re
from pathlib import Path

import numpy as np
import pytest
from scipy import stats

import tail_synthetic as ts
from report_fixtures import add_experiment, add_histogram_run, add_run
from terminal import on_terminal
from rtscope.analysis import tail_bound, tail_checks, tail_fit
from rtscope.store import Store

pytestmark = pytest.mark.fast

SEEDS = 40            # bench/tail.py runs 100
N = 100_000
TOP_KEYS = {"n", "checks", "claimed", "refused_because", "model"}


def test_likelihood_is_scipys_genpareto():
    y = stats.genpareto.rvs(0.1, scale=300, size=500, random_state=np.random.default_rng(0))
    ex = tail_fit.Excesses(1000.0, 10_000, y=y)
    shapes, scales = np.array([-0.2, 0.0, 1e-12, 0.1, 0.4]), np.array([250.0, 300, 310, 290, 200])
    expected = [stats.genpareto.logpdf(y, c, scale=s).sum() for c, s in zip(shapes, scales)]
    np.testing.assert_allclose(ex.loglik(shapes, scales), expected, rtol=1e-9)
    # outside the support of a bounded tail: impossible, not a number
    assert ex.loglik(np.array([-1.0]), np.array([float(y.max()) / 2]))[0] == -np.inf


def test_genpareto_and_fmin_are_scipys():
    """analysis.genpareto and analysis.neldermead (the report's tail fits without importing scipy) give scipy's
    own numbers: fmin's path on a bounded and an unbounded problem exactly; isf, sf and cdf (at and beyond the
    support's ends, bad scales) within 2e-15 relative (analysis.special's Box-Cox functions use numpy's
    log1p/expm1/exp, which differ from the C library's scipy calls in the last bit); the fit within 1e-12 (the
    same here, bit for bit: a last bit of the likelihood may move the simplex's path); the Cramér–von Mises
    statistic within 1e-14 and its p-value within 1e-13 absolute (its K_ν by the trapezoid rule)."""
    from scipy.optimize import fmin
    from scipy.stats._hypotests import _cdf_cvm
    from rtscope.analysis import genpareto, neldermead
    rng = np.random.default_rng(5)
    for shape, n, step in ((-0.4, 300, None), (0.0, 2000, None), (0.3, 800, None), (0.1, 500, 0.1)):
        y = stats.genpareto.rvs(shape, scale=rng.uniform(0.1, 1e4), size=n, random_state=rng)
        y = y if step is None else np.round(y, 1) + 0.05
        z = y / float(np.mean(y))
        c0, s0 = tail_fit._start(float(np.mean(z)), float(np.var(z)))
        c, _, s = stats.genpareto.fit(z, c0, floc=0, scale=s0)
        np.testing.assert_allclose(genpareto.fit(z, c0, s0), (float(c), float(s)), rtol=1e-12, atol=0)
        s *= float(np.mean(y))
        test = stats.cramervonmises(y, stats.genpareto(c, scale=s).cdf)
        w, p = genpareto.cramervonmises(y, c, s)
        assert w == pytest.approx(float(test.statistic), rel=1e-14, abs=0)
        assert p == pytest.approx(float(test.pvalue), rel=0, abs=1e-13)
        q = np.concatenate([[0, 1, -0.1, 1.1, 1e-300], rng.uniform(0, 1, 50)])
        x = np.concatenate([[0, -1, np.inf, s * 1e6], rng.uniform(0, 5 * s, 50)])
        for ours, theirs, at in ((genpareto.isf, stats.genpareto.isf, q), (genpareto.sf, stats.genpareto.sf, x),
                                 (genpareto.cdf, stats.genpareto.cdf, x)):
            np.testing.assert_allclose(ours(at, c, s), theirs(at, c, scale=s), rtol=2e-15, atol=0)
        grid = (rng.uniform(0, 1, (3, 1, 1)), rng.uniform(-0.5, 0.5, (1, 4, 5)), rng.uniform(-1, 10, (1, 4, 5)))
        np.testing.assert_allclose(genpareto.isf(*grid), stats.genpareto.isf(grid[0], grid[1], scale=grid[2]),
                                   rtol=2e-15, atol=0)
    assert type(genpareto.isf(0.3, -0.1, 2.0)) is np.float64
    for w, n in ((1e-5, 50), (0.01, 100), (0.5, 100), (2.0, 100), (40.0, 100), (0.3, 5000)):
        assert genpareto._cdf_cvm(np.float64(w), np.float64(n)) == pytest.approx(
            float(_cdf_cvm(np.float64(w), np.float64(n))), rel=0, abs=1e-13)
    for func in (lambda v: (1 - v[0]) ** 2 + 100 * (v[1] - v[0] ** 2) ** 2,
                 lambda v: np.inf if v[0] < 0 else abs(v[0] - 3) + v[1] ** 2):
        for x0 in ([0.0, 0.0], [1.5, -2.0], [10.0, 0.0]):
            np.testing.assert_array_equal(neldermead.fmin(func, x0), fmin(func, x0, disp=0))


@pytest.mark.parametrize("name", list(ts.TAILS))
def test_known_tails_recovered(name):
    """The true latency exceeded with p = 1e-5 lies inside the 95 % interval in ≥ 90 % of the seeds claimed,
    and almost every seed is claimed."""
    shape = ts.TAILS[name]
    truth = ts.true_level(shape, 1e-5)
    claimed = inside = 0
    shapes = []
    for seed in range(SEEDS):
        t = tail_bound.analyse([ts.spliced(N, shape, np.random.default_rng(seed))], {"run": seed}, gev=False)
        if not t.claimed:
            continue
        claimed += 1
        level = next(lv for lv in t.levels if lv.p == 1e-5)
        lo, hi = level.ci
        assert lo <= level.value <= (hi if hi is not None else np.inf)
        inside += lo <= truth <= (np.inf if hi is None else hi)
        shapes.append(t.fit.shape)
    assert claimed >= 0.9 * SEEDS, f"{name}: claimed in {claimed} of {SEEDS} seeds"
    assert inside >= 0.9 * claimed, f"{name}: truth inside in {inside} of {claimed}"
    assert abs(np.median(shapes) - shape) < 0.05      # the shape itself is recovered


def test_dependent_samples_refused():
    refused = 0
    for seed in range(SEEDS):
        t = tail_bound.analyse([ts.ar1(N, 0.5, np.random.default_rng(seed))], {"run": seed})
        refused += not t.claimed and t.failed.name == "independence"
        assert not t.levels
    assert refused >= 0.9 * SEEDS


def test_iid_samples_claimed_without_a_number_when_refused():
    claimed = sum(tail_bound.analyse([ts.iid_normal(N, np.random.default_rng(s))], {"run": s}, gev=False).claimed
                  for s in range(20))
    assert claimed >= 17
    # a tiny dependence that every test on all samples finds (lag-1 correlation 0.05 at 10^6 samples) is not
    # refused: it does not make exceedances cluster
    rng = np.random.default_rng(7)
    x = ts.MU + ts.SD * stats.norm.rvs(size=1_000_000, random_state=rng)
    x[1:] += 0.05 * (x[:-1] - ts.MU)
    from scipy.stats import pearsonr
    assert pearsonr(x[:-1], x[1:]).pvalue < 1e-6
    assert tail_checks.independence([x > np.quantile(x, 0.995)]).passed


def test_drift_and_heterogeneous_runs_refused():
    rng = np.random.default_rng(3)
    drifting = ts.spliced(N, 0.1, rng) * np.linspace(1.0, 1.15, N)
    t = tail_bound.analyse([drifting], {"run": 1})
    assert not t.claimed and t.failed.name == "stationarity" and "quieter machine" in t.refused_because
    runs = [ts.spliced(N, 0.1, rng), ts.spliced(N, 0.1, rng), ts.spliced(N, 0.1, rng) + 1500]
    t = tail_bound.analyse(runs, {"configuration": "x"})
    assert not t.claimed and t.failed.name == "run homogeneity" and "more runs" in t.refused_because
    same = tail_bound.analyse(runs[:2], {"configuration": "x"}, gev=False)
    assert same.claimed and [c.name for c in same.checks] == ["independence", "stationarity", "run homogeneity",
                                                               "goodness of fit"]


def test_candidates_for_any_length():
    assert tail_fit.candidates(10_000) == [(0.9, 1000), (0.95, 500), (0.98, 200), (0.99, 100)]
    assert [k for _, k in tail_fit.candidates(1_000_000)] == [5000, 2000, 1000, 500, 200, 100]
    huge = tail_fit.candidates(10 ** 9)
    assert [k for _, k in huge] == [5000, 2000, 1000, 500, 200, 100] and huge[0][0] == 1 - 5e-6


def test_threshold_rule_skips_a_contaminated_threshold():
    # below the 0.95 quantile lies the normal body: a generalised Pareto fit there fails its test
    x = ts.spliced(N, 0.1, np.random.default_rng(11))
    t = tail_bound.analyse([x], {"run": 1}, gev=False)
    assert t.claimed and t.fit.quantile >= 0.95
    body = tail_fit.fit_gpd(tail_fit.excesses_exact(np.sort(x)[-12000:], N, 10_000), 0.9)
    assert body.gof_p < tail_fit.GOF_ALPHA


def test_quantised_samples():
    """A clock step (or a tool's µs) makes ties: the excesses are then interval-censored, [v, v + step)."""
    truth = ts.true_level(0.0, 1e-5)
    inside = 0
    for seed in range(10):
        x = np.floor(ts.spliced(N, 0.0, np.random.default_rng(seed)) / 100) * 100
        t = tail_bound.analyse([x], {"run": seed}, gev=False)
        assert t.claimed and t.fit.ex.resolution == 100 and any("quantised to 0.1 µs" in n for n in t.notes)
        lo, hi = t.levels[2].ci
        inside += lo <= truth <= hi
    assert inside >= 8
    # a step coarser than the tail's scale leaves too few distinct values to test a fit: refused, saying so
    coarse = np.floor(ts.spliced(N, 0.0, np.random.default_rng(1)) / 1000) * 1000
    t = tail_bound.analyse([coarse], {"run": 1})
    assert not t.claimed and t.failed.name == "goodness of fit" and "finer resolution" in t.refused_because
    assert t.checks[0].passed                    # ties are no dependence


@pytest.fixture
def store(tmp_path):
    db = str(tmp_path / "tail.db")
    s = Store(db)
    exp = add_experiment(s, "tails")
    rng = np.random.default_rng(5)
    ids = {"gpd": [add_run(s, tmp_path, ts.spliced(N, 0.1, rng).astype(np.int64), experiment_id=exp,
                           settings={"tail": "gpd"}) for _ in range(2)]}
    ids["ar"] = add_run(s, tmp_path, ts.ar1(N, 0.6, rng).astype(np.int64), experiment_id=exp, settings={"tail": "ar"})
    ids["hist"] = add_histogram_run(s, tmp_path, ts.spliced(N, 0.0, rng).astype(np.int64), bucket_width=100,
                                    buckets=200, experiment_id=exp, settings={"tail": "hist"})
    ids["short"] = add_run(s, tmp_path, ts.spliced(500, 0.1, rng).astype(np.int64), experiment_id=exp,
                           settings={"tail": "short"})
    return db, ids


def _fits_80(db: str, *args) -> None:
    """On an 80-column terminal every line fits and no value is cut."""
    text = on_terminal(Path(db).parent, "tail", *map(str, args), "--db", db).out
    assert "…" not in text and all(len(line) <= 80 for line in text.splitlines()), text


def test_cli_run_json_and_text(cli, store):
    db, ids = store
    r = cli("tail", ids["gpd"][0], "--db", db, "--json")
    assert r.code == 0, r.err
    doc = json.loads(r.out)
    assert TOP_KEYS <= set(doc) and doc["run"] == ids["gpd"][0] and doc["n"] == N
    assert doc["claimed"] is True and doc["refused_because"] is None
    for c in doc["checks"]:
        assert {"name", "statistic", "p", "passed", "why"} <= set(c) and c["passed"] is True
    model = doc["model"]
    assert {"method", "threshold_ns", "shape", "scale", "exceedances", "gof"} <= set(model)
    assert model["gof"]["test"] == "Cramér–von Mises" and model["gof"]["p"] >= tail_fit.GOF_ALPHA
    assert 0.0 < model["shape"] < 0.25 and model["exceedances"] >= tail_fit.MIN_EXCEEDANCES
    assert [lv["p"] for lv in doc["levels"]] == [10.0 ** -e for e in range(3, 13)]
    values = [lv["value_ns"] for lv in doc["levels"]]
    assert values == sorted(values) and values[0] > model["threshold_ns"]
    for lv in doc["levels"]:
        lo, hi = lv["ci95_ns"]
        assert lo <= lv["value_ns"] <= hi
        assert 2 < lv["samples_factor_to_halve"] < 8   # about 4×: the interval narrows as 1/√n
        assert lv["more_samples_to_halve"] == pytest.approx((lv["samples_factor_to_halve"] - 1) * N, rel=0.05)
    gev = model["block_maxima"]
    assert gev["blocks"] >= 30 and abs(gev["levels"][2]["value_ns"] / doc["levels"][2]["value_ns"] - 1) < 0.2

    text = cli("tail", ids["gpd"][0], "--db", db).out
    _fits_80(db, ids["gpd"][0])
    assert "heavy tail" in text and "1e-05" in text and "1e-12" in text
    value = f"{doc['levels'][2]['value_ns'] / 1000:,.2f}"
    assert re.search(rf"1e-05\s+{re.escape(value)}\s", text)    # the number, whole


def test_cli_refuses_dependent_run(cli, store):
    db, ids = store
    doc = json.loads(cli("tail", ids["ar"], "--db", db, "--json").out)
    assert doc["claimed"] is False and "levels" not in doc and doc["model"] is None
    assert doc["refused_because"].startswith("independence:") and "between samples" in doc["refused_because"]
    text = cli("tail", ids["ar"], "--db", db).out
    _fits_80(db, ids["ar"])
    assert "no bound claimed" in text and "independence" in text
    assert "µs" not in text             # no number is given


def test_cli_configuration_and_histogram(cli, store):
    db, ids = store
    doc = json.loads(cli("tail", "--experiment", "tails", "--where", "tail=gpd", "--db", db, "--json").out)
    assert doc["configuration"] == "exec sum (native) tail=gpd" and doc["n"] == 2 * N
    assert "run homogeneity" in [c["name"] for c in doc["checks"]] and doc["claimed"]

    r = cli("tail", ids["hist"], "--db", db, "--json")
    assert r.code == 0, r.err
    doc = json.loads(r.out)
    assert doc["claimed"] and doc["model"]["gof"]["test"].startswith("χ²")
    assert doc["model"]["threshold_ns"] % 100 == 0               # a bucket edge
    assert [c["passed"] for c in doc["checks"][:2]] == [None, None]
    assert any("histogram-only" in n for n in doc["notes"])
    truth = ts.true_level(0.0, 1e-5)
    lo, hi = doc["levels"][2]["ci95_ns"]
    assert lo <= truth <= hi
    _fits_80(db, ids["hist"])


def test_histogram_with_overflow(tmp_path):
    """Samples beyond the last bucket: one interval from its edge to the exact maximum."""
    store = Store(str(tmp_path / "o.db"))
    values = ts.spliced(N, 0.0, np.random.default_rng(0)).astype(np.int64)
    run = store.get_run(add_histogram_run(store, tmp_path, values, bucket_width=100, buckets=120))
    assert run.trailer["histograms"]["latency"]["overflow"] > 50
    t = tail_bound.of_run(store, run)
    assert t.claimed and t.fit.ex.hi[-1] == values.max() - t.fit.ex.u
    lo, hi = t.levels[2].ci
    assert lo <= ts.true_level(0.0, 1e-5) <= hi


def test_histogram_configuration_homogeneity(tmp_path):
    store = Store(str(tmp_path / "h.db"))
    rng = np.random.default_rng(9)

    def hist_run(shift: float, kind: str) -> int:
        values = (ts.spliced(50_000, 0.0, rng) + shift).astype(np.int64)
        return add_histogram_run(store, tmp_path, values, bucket_width=100, buckets=200, settings={"h": kind})

    alike = [hist_run(0, "alike"), hist_run(0, "alike")]
    t = tail_bound.of_runs(store, store.runs(ids=alike))
    assert t.claimed and t.n == 100_000 and t.checks[2].name == "run homogeneity" and t.checks[2].passed
    unlike = [hist_run(0, "unlike"), hist_run(1200, "unlike")]
    t = tail_bound.of_runs(store, store.runs(ids=unlike))
    assert not t.claimed and t.failed.name == "run homogeneity" and not t.levels


def test_cli_bad_input(cli, store, db):
    path, ids = store
    r = cli("tail", 999, "--db", path)
    assert r.code == 2 and "no run 999" in r.err and str(ids["ar"]) in r.err      # names the valid runs
    r = cli("tail", ids["short"], "--db", path)
    assert r.code == 2 and "500 samples" in r.err and "10,000" in r.err
    r = cli("tail", "--experiment", "tails", "--db", path)
    assert r.code == 2 and "4 configurations" in r.err and "--where" in r.err and "tail=hist" in r.err
    r = cli("tail", "--experiment", "nope", "--db", path)
    assert r.code == 2 and "tails" in r.err
    r = cli("tail", "--db", path)
    assert r.code == 2 and "RUN" in r.err
    r = cli("tail", "--experiment", "tails", "--where", "tail=wrong", "--db", path)
    assert r.code == 2 and "gpd" in r.err


SPEC = """name = "tailreal"
[[workload]]
name = "exec"
variants = ["sum"]
runtime = "native"
[workload.params]
iterations = 20000
pause_ms = 0
"""


def test_cli_on_a_real_native_run(cli, db, tmp_path, rtprobe):
    spec = tmp_path / "spec.toml"
    spec.write_text(SPEC)
    assert cli("run", spec, "--db", db).code == 0
    (run,) = Store(db).runs()
    r = cli("tail", run.id, "--db", db, "--json")
    assert r.code == 0, r.err
    doc = json.loads(r.out)
    assert doc["n"] == 20000 and len(doc["checks"]) >= 2
    if doc["claimed"]:
        lo, hi = doc["levels"][1]["ci95_ns"]            # p = 1e-4: within reach of 20,000 samples
        assert lo <= doc["levels"][1]["value_ns"] <= hi and doc["model"]["threshold_ns"] > 0
    else:                                               # a loaded machine: refused, with the check and reason
        failed = next(c for c in doc["checks"] if c["passed"] is False)
        assert doc["refused_because"].startswith(failed["name"]) and "levels" not in doc
    _fits_80(db, run.id)


def test_candidates_on_one_bucket_edge_are_fitted_once(monkeypatch):
    """Coarse buckets put several candidate thresholds on the same edge: one censored fit serves them all."""
    rng = np.random.default_rng(1)
    x = (5000 + rng.gamma(2, 300, 10**6) + rng.pareto(4, 10**6) * 200).astype(np.int64)
    hist = {"counts": np.bincount(x // 1000).tolist(), "bucket_width": 1000, "min_value": 0, "overflow": 0,
            "n": len(x), "max": int(x.max())}
    edges = {tail_fit.excesses_histogram(hist, k).u for _, k in tail_fit.candidates(len(x))}
    calls = []
    real = tail_fit.fit_gpd
    monkeypatch.setattr(tail_fit, "fit_gpd", lambda ex, q: (calls.append(ex.u), real(ex, q))[1])
    _, tried = tail_fit.choose(lambda k: tail_fit.excesses_histogram(hist, k), len(x))
    assert len(tail_fit.candidates(len(x))) > len(edges) and sorted(calls) == sorted(edges)
    assert len(tried) == len(edges)


def test_grouped_fit_is_scipys_censored_fit():
    """Bucketed excesses: the fit of their grouped likelihood (a bucket's count times the log of its mass) and
    scipy's fit of the same data as interval-censored rows, one per sample (the way before: a third of a second
    per threshold), agree; so does the numpy survival function with scipy's genpareto.sf."""
    x = np.array([0.0, 0.5, 1, 2, 5, 10, 1e6])[:, None]
    for c in (-0.5, -0.1, 0.0, 1e-12, 0.2, 0.9):
        for s in (0.5, 1.0, 3.0):
            np.testing.assert_allclose(tail_fit._sf(x, np.array([c]), np.array([s])),
                                       stats.genpareto.sf(x, c, scale=s), rtol=1e-8, atol=1e-300)
    rng = np.random.default_rng(4)
    values = (20_000 + rng.gamma(4, 5_000, 200_000)).astype(np.int64)
    hist = {"counts": np.bincount(values // 1000).tolist(), "bucket_width": 1000, "min_value": 0, "overflow": 0,
            "n": len(values), "max": int(values.max())}
    ex = tail_fit.excesses_histogram(hist, 2000)
    fit = tail_fit.fit_gpd(ex, 0.99)
    unit = float(np.average((ex.lo + np.minimum(ex.hi, ex.top)) / 2, weights=ex.counts))
    rows = np.repeat(np.column_stack([ex.lo, ex.hi]), ex.censored.astype(np.int64), axis=0) / unit
    c, _, s = stats.genpareto.fit(stats.CensoredData(uncensored=[ex.top / unit], interval=rows),
                                  fit.shape, floc=0, scale=fit.scale / unit)
    assert fit.shape == pytest.approx(c, abs=0.01) and fit.scale == pytest.approx(s * unit, rel=0.01)
    assert ex.loglik(fit.shape, fit.scale)[0] >= ex.loglik(c, s * unit)[0] - 1e-3   # at least as likely
