"""The exceedance plot of the tail analysis (issue 33, item 2: the report; docs/tail.md).

A store of two timer configurations of two runs of 20,000 samples each: one with a generalised Pareto tail
(claimed), one an AR(1) series (refused by the independence check). The report's plot figure has a log y axis
per configuration, the threshold and the bound at p = 1e-9 with the numbers `rtscope tail --json` prints, the
fit reaching below the data's end, and the refusal's reason on the refused panel and in the caption; the paper
figure (matplotlib) says the same. Drawn in Chromium, in the report and serve's pages, and the API's tail
endpoints: tests/test_exceedance_browser.py."""

from __future__ import annotations

import html
import json
import re

import numpy as np
import pytest

from report_fixtures import add_experiment, add_histogram_run, add_run
from rtscope.store import Store
from served import Served
from tail_synthetic import ar1, spliced

pytestmark = pytest.mark.fast

N = 20_000


def plots(page: str) -> dict[str, dict]:
    """Each plot's id and figure."""
    return {i: json.loads(m) for i, m in re.findall(
        r'<script type="application/json" id="(plot-\d+)-spec">(.*?)</script>', page, re.S)}


def specs(page: str) -> list[dict]:
    return list(plots(page).values())


def exceedance_spec(page: str) -> tuple[dict, str]:
    """The exceedance plot's figure and its caption (as text)."""
    found = [(i, f) for i, f in plots(page).items() if f["layout"]["title"]["text"].endswith(": exceedance")]
    assert len(found) == 1, [f["layout"]["title"]["text"] for f in specs(page)]
    i, f = found[0]
    return f, html.unescape(re.search(rf'id="{i}"></div><figcaption>(.*?)</figcaption>', page, re.S).group(1))


@pytest.fixture(scope="module")
def tails(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("exceedance")
    db = str(tmp / "tails.db")
    store = Store(db)
    exp = add_experiment(store, "tails")
    rng = np.random.default_rng(33)
    ids: dict[str, list[int]] = {}
    for _ in range(2):
        for load, values in (("none", spliced(N, 0.1, rng)), ("bursty", ar1(N, 0.5, rng))):
            ids.setdefault(load, []).append(add_run(store, tmp, values.astype(np.int64), workload="timer",
                                                    variant="absolute", measure="latency", experiment_id=exp,
                                                    settings={"load": load}))
    top = max(float(store.primary_samples(r).max()) for r in store.runs())
    return {"db": db, "tmp": tmp, "exp": exp, "ids": ids, "max_us": top / 1000}


def tail_json(cli, *args) -> dict:
    r = cli("tail", *args, "--json")
    assert r.code == 0, r.err
    return json.loads(r.out)


def us(ns: float) -> str:
    """figures.exceedance's number format, in µs."""
    from rtscope.figures.exceedance import num
    return num(ns / 1000)


# --- the pieces -------------------------------------------------------------------------------------------

def test_band_is_the_levels_intervals():
    """The plot's band at each printed level is the interval `rtscope tail` prints there."""
    from rtscope.analysis import tail_bound, tail_fit
    t = tail_bound.analyse([spliced(50_000, 0.1, np.random.default_rng(4))], {"run": 1}, gev=False)
    assert t.claimed
    lo, hi = tail_fit.band(t.fit, [lv.p for lv in t.levels])
    for lv, a, b in zip(t.levels, lo, hi):
        assert a == pytest.approx(lv.ci[0], rel=1e-9)
        assert (b == np.inf) if lv.ci[1] is None else b == pytest.approx(lv.ci[1], rel=1e-9)
        assert a <= lv.value <= b


def test_empirical_curves():
    """Samples: every one of the largest TOP (100) drawn, the largest at 1/n, thinned to a few hundred points;
    a histogram: the exact minimum at 1, the overflow counted, the exact maximum at 1/n."""
    from rtscope.figures import exceedance
    values = np.sort(np.random.default_rng(1).gamma(3, 1000, 100_000))
    x, y = exceedance.empirical_samples(values)
    assert len(x) <= exceedance.TOP + exceedance.POINTS and x[-1] == values[-1] and y[-1] == pytest.approx(1e-5) and y[0] == 1.0
    assert np.array_equal(x[-exceedance.TOP:], values[-exceedance.TOP:]) and np.all(np.diff(y) < 0) and np.all(np.diff(x) >= 0)
    hist = {"bucket_width": 1000, "min_value": 0, "counts": [0, 5, 3, 0, 1], "overflow": 1, "n": 10,
            "min": 1200, "max": 9000}
    x, y = exceedance.empirical_histogram(hist)
    assert x.tolist() == [1200, 2000, 4000, 5000, 9000]
    assert y.tolist() == pytest.approx([1.0, 0.5, 0.2, 0.1, 0.1])


# --- the report -------------------------------------------------------------------------------------------

def test_report_plot_and_paper_figure(cli, tails, tmp_path):
    out, figs = tmp_path / "r.html", tmp_path / "figs"
    r = cli("report", "--db", tails["db"], "-o", out, "--figures", figs, "--dpi", "40")
    assert r.code == 0, r.err
    page = out.read_text()
    f, text = exceedance_spec(page)
    claimed = tail_json(cli, "--experiment", tails["exp"], "--where", "load=none", "--db", tails["db"])
    refused = tail_json(cli, "--experiment", tails["exp"], "--where", "load=bursty", "--db", tails["db"])
    assert claimed["claimed"] and not refused["claimed"] and refused["refused_because"].startswith("independence")
    bound = next(lv for lv in claimed["levels"] if lv["p"] == pytest.approx(1e-9))
    lay = f["layout"]
    assert lay["yaxis"]["type"] == lay["yaxis2"]["type"] == "log"
    assert lay["xaxis2"]["matches"] == "x"                 # one latency axis for both panels
    lo, hi = lay["xaxis"]["range"]
    assert lo <= 9 and hi >= tails["max_us"] and hi >= bound["value_ns"] / 1000     # no sample, no bound cut
    named = {(tr["name"], tr.get("yaxis", "y")): tr for tr in f["data"]}
    threshold = named[("threshold", "y")]
    assert threshold["x"][0] == pytest.approx(claimed["model"]["threshold_ns"] / 1000, rel=1e-5)   # 6 digits
    b = named[("bound at p = 1e-09 (95 %)", "y")]
    assert b["x"][0] == pytest.approx(bound["value_ns"] / 1000, rel=1e-6) and b["y"] == [1e-9]
    assert b["error_x"]["arrayminus"][0] == pytest.approx((bound["value_ns"] - bound["ci95_ns"][0]) / 1000, rel=1e-5)
    fit = named[("fitted tail", "y")]
    # the log axis' values keep 3 significant digits (html._log_axis)
    assert min(fit["y"]) == pytest.approx(1e-9) and max(fit["y"]) == pytest.approx(claimed["model"]["exceedances"]
                                                                                    / claimed["n"], rel=5e-3)
    assert ("fitted tail", "y2") not in named and ("threshold", "y2") not in named    # refused: no fit drawn
    notes = {a.get("name"): [] for a in lay["annotations"]}
    for a in lay["annotations"]:
        notes[a.get("name")].append(a["text"])
    label = (f"p = 1e-09: {us(bound['value_ns'])} µs (95 %: {us(bound['ci95_ns'][0])}–"
             f"{'unbounded' if bound['ci95_ns'][1] is None else us(bound['ci95_ns'][1])})")
    assert notes["bound"] == [label]
    assert notes["threshold"] == [f"threshold {us(claimed['model']['threshold_ns'])} µs "
                                  f"(q {claimed['model']['threshold_quantile']:g})"]
    assert notes["refused"] == ["no bound claimed: the independence check failed (the caption<br>says why)"]
    assert "load=bursty: no bound claimed: independence: exceedances" in text and "Leave more time" in text
    assert "load=none: claimed; checks passed (independence p" in text and f"at {label}" in text
    # the paper figure: a panel per configuration, log y, the same labels
    assert (figs / "exceedance-timer-absolute-latency.png").exists()
    assert (figs / "exceedance-timer-absolute-latency.svg").exists()
    from rtscope.report import figures as paper, model
    rep = model.build(Store(tails["db"]), Store(tails["db"]).runs(), title="t", selection="all")
    fig = paper.exceedance_plot(paper._pyplot(), rep.groups[0])
    assert [ax.get_yscale() for ax in fig.axes] == ["log", "log"]
    texts = [t.get_text() for ax in fig.axes for t in ax.texts]
    assert label in texts and any(t.startswith("no bound claimed: the independence check") for t in texts)


def test_small_and_histogram_runs(cli, tmp_path):
    """Below 10,000 samples no exceedance plot (the percentile plot shows that tail); a histogram-only run
    with enough samples gets one, its curve from the buckets; the API says why a small run has no tail."""
    db = str(tmp_path / "h.db")
    store = Store(db)
    rng = np.random.default_rng(8)
    small = add_run(store, tmp_path, rng.integers(5_000, 9_000, 3_000), workload="timer", variant="absolute",
                    measure="latency")
    out = tmp_path / "small.html"
    assert cli("report", "--db", db, "-o", out).code == 0
    assert not any(f["layout"]["title"]["text"].endswith(": exceedance") for f in specs(out.read_text()))
    kept = add_histogram_run(store, tmp_path, spliced(40_000, 0.1, rng).astype(np.int64), bucket_width=100,
                             buckets=2_000, workload="timer", variant="cyclic", runtime="cyclictest",
                             measure="latency")
    assert cli("report", "--db", db, "-o", out, "--run", kept).code == 0
    f, _ = exceedance_spec(out.read_text())
    samples = next(tr for tr in f["data"] if tr["name"].startswith("samples: "))
    assert samples["y"][0] == 1.0 and samples["y"][-1] == pytest.approx(1 / 40_000)
    s = Served(db, log=tmp_path / "serve.log")
    try:
        status, body, _ = s.get(f"/api/runs/{small}/tail")
        assert status == 422 and "3,000 samples" in body and "at least 10,000" in body
    finally:
        s.stop()


def cell(label, values):
    """A configuration as analysis.compare loads it (the fields the tail analysis and the plot read)."""
    from types import SimpleNamespace
    run = SimpleNamespace(id=1, started_at="2026-01-01T00:00:00Z", finished_at="2026-01-01T00:00:10Z")
    config = SimpleNamespace(label=label, unit="ns", measure="latency")
    return SimpleNamespace(samples=values, sorted=np.sort(values), config=config, sample_runs=[run],
                           run_samples=lambda r: values, hist_runs=[])


def figure_of(series):
    from types import SimpleNamespace

    from rtscope.report.html import exceedance_plotly_figure
    return exceedance_plotly_figure(SimpleNamespace(exceedance=series, unit="ns", title="timer absolute: latency",
                                             cells=[SimpleNamespace(config=SimpleNamespace(measure="latency"))]))


def test_a_far_sample_is_stated_not_drawn():
    """One 4,917 µs wake-up among 10 µs ones (as a user's timer run had) does not squash the tails: the axis
    ends near the rest, the panel and the caption count it with its maximum, as the other plots do."""
    from rtscope.figures import exceedance
    rng = np.random.default_rng(2)
    values = 5000 + rng.gamma(3, 1500, 40_000)
    values[20_000] = 4_917_000
    s = exceedance.of_cell(cell("far", values), "far")
    lo, hi, notes = exceedance.x_range([s])
    assert np.sort(values)[-2] < hi < 100_000
    assert notes[0] == f"far: 1 sample beyond {exceedance.num(hi / 1000)} µs, off the axis (max 4,917 µs)"
    f = figure_of([s])
    assert [a["text"] for a in f["layout"]["annotations"] if a.get("name") == "beyond"] == ["→ " + notes[0][5:]]
    assert f["layout"]["xaxis"]["range"][1] == pytest.approx(hi / 1000)
    assert notes[0] in exceedance.caption([s], notes)


def test_heavy_tail_bound_beyond_the_axis_is_stated():
    """A heavy tail's bound at 1e-9 far beyond the samples does not squash them: the axis ends near the
    samples, the bound is written at its edge with its value and the caption says it lies beyond."""
    from rtscope.figures import exceedance
    rng = np.random.default_rng(0)
    heavy = exceedance.of_cell(cell("heavy", 5000 + rng.pareto(1.2, 50_000) * 1000), "heavy")
    light = exceedance.of_cell(cell("light", 5000 + rng.gamma(2, 500, 50_000)), "light")
    assert heavy.claimed and light.claimed and heavy.tail.fit.shape > 0.5
    lo, hi, notes = exceedance.x_range([heavy, light])
    assert heavy.max <= hi < heavy.bound.value and light.bound.value <= hi
    assert notes == [f"heavy: the bound, {exceedance.bound_text(heavy)}, lies beyond the axis (its samples would "
                     "not be readable on an axis that reaches it)"]
    f = figure_of([heavy, light])
    bounds = [a for a in f["layout"]["annotations"] if a.get("name") == "bound"]
    assert [a["text"] for a in bounds] == ["→ " + exceedance.bound_text(heavy), exceedance.bound_text(light)]
    assert bounds[0]["x"] == 1 and bounds[0]["xref"] == "x domain"
    drawn = [tr["name"] for tr in f["data"] if tr["name"].startswith("bound at")]
    assert len(drawn) == 1 and f["layout"]["xaxis"]["range"][1] == pytest.approx(hi / 1000)
