"""rtscope report: the HTML page, figures and tables from fixture stores (no probes, no browser)."""

import base64
import csv
import gzip
import json
import re

import numpy as np
import pytest

from rtscope.report import html as html_report, model, tables
from rtscope.report.figures import slug, tex_safe
from rtscope.report.html import script_json
from rtscope.analysis.select import Selection, select_runs
from rtscope.store import Store

from report_fixtures import EVIL, add_run, mixed_store, study_store

pytestmark = pytest.mark.fast


@pytest.fixture(scope="module")
def mixed(tmp_path_factory):
    return mixed_store(tmp_path_factory.mktemp("mixed"))


def specs(page: str) -> list[dict]:
    return [json.loads(m) for m in re.findall(r'<script type="application/json" id="plot-\d+-spec">(.*?)</script>',
                                              page, re.S)]


def test_script_json_cannot_end_or_comment_the_script_block():
    text = script_json({"name": "</script><!-- & </SCRIPT >", "nan": float("nan"), "arr": np.arange(3)})
    assert "<" not in text and ">" not in text and "&" not in text
    assert json.loads(text) == {"name": "</script><!-- & </SCRIPT >", "nan": None, "arr": [0, 1, 2]}


def test_report_sections_and_escaping(cli, mixed, tmp_path):
    out = tmp_path / "r.html"
    r = cli("report", "--db", mixed, "-o", out, "--baseline", "priority=normal", "--baseline", "kernel=normal")
    assert r.code == 0, r.err
    page = out.read_text()
    for section in ("Machines", "Statistics per configuration", "Comparisons against priority=normal kernel=normal",
                    "Distributions", "Samples in measurement order", "Memory per task"):
        assert section in page
    # self-contained: plotly embedded once (gzip + base64, unpacked by the page), nothing fetched
    payload = html_report.plotly_payload()
    assert page.count(payload) == 1
    assert gzip.decompress(base64.b64decode(payload)).startswith(b"/**\n* plotly.js (cartesian - minified)")
    ours = page.replace(payload, "")
    assert ours.count("Plotly.newPlot") == 1
    assert not re.search(r'<script[^>]+src=|<link[^>]+href=|https?://', ours)
    # user strings are text: the only <script> elements are ours (plotly, collector, specs, renderer)
    assert "window.rtsInjected=1</script>" not in page and "<img src=x" not in page
    assert "priority=&lt;script&gt;window.rtsInjected=1&lt;/script&gt;&lt;img src=x onerror=alert(1)&gt;" in page
    assert len(re.findall(r"<script[ >]", ours)) == 3 + ours.count('type="application/json"')
    figures = specs(page)
    # 11 + the timer group's exceedance plot: its histogram-only configurations hold 60,000 samples each, enough
    # for a tail bound; the exec group's 9,000 per configuration are not (its percentile plot shows that tail)
    assert len(figures) == int(re.search(r'data-plots="(\d+)"', page).group(1)) == 12
    names = {tr.get("name", "") for f in figures for tr in f["data"]}
    assert any(n.startswith("priority=&lt;script&gt;") for n in names)      # escaped for plotly too
    titles = [f["layout"]["title"]["text"] for f in figures]
    assert "exec sum: duration: box plot per configuration" in titles
    assert "timer cyclic: latency: histogram" in titles
    assert "timer cyclic: latency: exceedance" in titles and "exec sum: duration: exceedance" not in titles
    assert titles[-1] == "memory against task count, least-squares lines"
    # histogram-only timer runs: a histogram and a CDF, no box, with a note
    assert "histogram-only (no box): kernel=normal, kernel=preempt_rt" in page
    # GC events marked from minor_gcs
    series = [f for f in figures if f["data"][-1].get("name", "").startswith("GC event")]
    assert len(series) == 3 and "GC events (minor_gcs increments)" in page
    # study 5 fit: ~2835 and ~204 bytes per task
    assert re.search(r"erlang_process \(beam\)</td><td class=\"l\">\d+, \d+</td><td>14</td><td>2,83\d\.\d", page)
    assert re.search(r"callback \(beam\)</td><td class=\"l\">\d+, \d+</td><td>14</td><td>20\d\.\d", page)


def test_sections_appear_only_with_data(cli, tmp_path):
    db = str(tmp_path / "one.db")
    store = Store(db)
    add_run(store, tmp_path, np.random.default_rng(0).integers(1000, 2000, 500))
    out = tmp_path / "one.html"
    r = cli("report", "--db", db, "-o", out, "--title", "only <one>")
    assert r.code == 0, r.err
    page = out.read_text()
    assert "<title>only &lt;one&gt;</title>" in page
    assert "Distributions" in page and "Samples in measurement order" in page
    for absent in ("Comparisons against", "Memory per task", "GC event", "Notes</h2>"):
        assert absent not in page
    assert len(specs(page)) == 5      # box, histogram, CDF, percentiles, one time series


def test_figures_and_tables(cli, mixed, tmp_path):
    figs, tabs = tmp_path / "figs", tmp_path / "tabs"
    r = cli("report", "--db", mixed, "-o", tmp_path / "r.html", "--baseline", "priority=normal",
            "--baseline", "kernel=normal", "--figures", figs, "--tables", tabs, "--dpi", "60")
    assert r.code == 0, r.err
    pngs = sorted(p.name for p in figs.glob("*.png"))
    assert sorted(p.name for p in figs.glob("*.svg")) == [p.replace(".png", ".svg") for p in pngs]
    assert {p.split("-")[0] for p in pngs} == {"box", "histogram", "cdf", "percentiles", "exceedance", "series",
                                               "task"}
    assert len(pngs) == 12          # the timer group's exceedance plot included (test_report_sections_...)
    import matplotlib.image as mpimg
    for p in pngs:
        img = mpimg.imread(figs / p)
        rgb = (img[..., :3] * 255).astype(np.uint32)
        assert img.shape[0] > 150 and len(np.unique(rgb[..., 0] << 16 | rgb[..., 1] << 8 | rgb[..., 2])) > 10, p
    svg = (figs / pngs[0].replace(".png", ".svg")).read_text()
    assert "<dc:date>" not in svg         # reproducible files
    assert sorted(p.name for p in tabs.iterdir()) == sorted(
        f"{n}.{e}" for n in ("statistics-microseconds", "comparisons", "task-memory") for e in ("md", "tex", "csv"))
    rows = list(csv.DictReader((tabs / "comparisons.csv").open()))
    assert len(rows) == 3 * 5 and {r["verdict"] for r in rows} >= {"better", "worse"}
    evil = [r for r in rows if "rtsInjected" in r["configuration"]]
    assert evil and evil[0]["configuration"].endswith(EVIL)             # CSV keeps the raw text
    tex = (tabs / "comparisons.tex").read_text()
    assert r"\$x\$ \& \textless{}!--" in tex and r"$\alpha$" in tex and "<script>" not in tex
    md = (tabs / "statistics-microseconds.md").read_text()
    assert "&lt;script&gt;" in md and "| AVG (µs) |" in md
    stats_rows = list(csv.reader((tabs / "statistics-microseconds.csv").open()))
    assert stats_rows[0][:4] == ["configuration", "runs", "n", "AVG (µs)"]
    assert float(stats_rows[1][3]) == pytest.approx(5101, rel=0.01)     # full precision, in µs


def test_report_usage_errors(cli, mixed, tmp_path):
    r = cli("report", "--db", mixed, "-o", tmp_path / "missing" / "r.html")
    assert r.code == 2 and "does not exist" in r.err
    r = cli("report", "--db", mixed, "-o", tmp_path)
    assert r.code == 2 and "is a directory" in r.err
    r = cli("report", "--db", mixed, "-o", tmp_path / "r.html", "--workload", "nosuch")
    assert r.code == 2 and "valid: exec, tasks, timer" in r.err
    r = cli("report", "--db", mixed, "-o", tmp_path / "r.html", "--figures", tmp_path / "f", "--dpi", "5")
    assert r.code == 2 and "--dpi must be 20..1200" in r.err


def test_no_baseline_means_defaults_or_none(tmp_path):
    db, _ = study_store(tmp_path, reps=1, n=300)
    store = Store(db)
    rep = model.build(store, select_runs(store, Selection()), title="t", selection="all")
    assert rep.comparisons is None
    assert rep.notes == ["no comparisons: give --baseline NAME=VALUE to compare configurations"]
    assert "Comparisons against" not in html_report.render(rep, plotly_gz="")
    assert [t.name for t in tables.all_tables(rep)] == ["statistics-microseconds"]


# --- pieces ---------------------------------------------------------------------------------------------

def test_decimate_keeps_every_spike():
    values = np.zeros(100_000)
    values[[17, 50_001, 99_999]] = [5, 9, 7]
    values[70_000] = -3
    idx, shown = model.decimate(values, 1000)
    assert len(idx) <= 1000 and set(values[[17, 50_001, 99_999, 70_000]]) <= set(shown)
    assert np.all(np.diff(idx) > 0) and np.array_equal(values[idx], shown)
    small = np.arange(10.0)
    assert np.array_equal(model.decimate(small, 1000)[1], small)


def test_gc_events():
    idx, src = model.gc_events({"minor_gcs": np.array([0, 0, 1, 1, 3, 3]), "heap_size": np.array([5, 1, 1, 1, 1, 1])})
    assert idx.tolist() == [2, 4] and src == "minor_gcs increments"
    idx, src = model.gc_events({"heap_size": np.array([100, 200, 50, 60, 10])})
    assert idx.tolist() == [2, 4] and src == "heap_size drops"
    assert model.gc_events({})[1] == ""


def test_box_and_histogram_pieces():
    values = np.concatenate([np.arange(100.0), [1000.0]])
    b = model.box_of("x", values)
    assert (b.q1, b.median, b.q3) == (25.0, 50.0, 75.0)
    assert b.whishi == 99.0 and b.whislo == 0.0 and b.n_outliers == 1 and b.outliers.tolist() == [1000.0]
    assert model.nice_width(1234, 400) == 5 and model.nice_width(0.3, 100) == 0.005
    assert model.id_ranges([7, 1, 2, 3, 9, 10]) == "1-3, 7, 9-10"


def test_figure_names_and_mathtext():
    assert slug("exec sum: a/b <c>") == "exec-sum-a-b-c" and slug("***") == "figure"
    assert tex_safe("$x$ \\n") == r"\$x\$ \n"
