"""Every report figure and serve page stays readable (issue 31, items 3, 4, 11).

A store of real stored runs with one extreme sample (4,917 µs among samples of a few µs, as a user's timer
runs had): every distribution figure of the HTML report, of the paper figures and of serve's pages shows the
bulk (its axis ends near the largest p99.99, the histogram's buckets come from the data so most of the bulk's
buckets hold samples) and states the outlier beyond it with its count and max; in Chromium the histogram
plotly draws has that range and those bars. The machine table names each run's tool as `show` does (a real
rtprobe run and a real cyclictest run). serve's lab page says the settings common to the listed runs once;
no plot's toolbar covers its title, at 1280 px and at an 80-column 640 px.
"""

from __future__ import annotations

import json
import re
import shutil

import numpy as np
import pytest

from report_fixtures import add_experiment, add_histogram_run, add_run
from rtscope.store import Store
from served import Served, new_page, open_page, report_page

pytestmark = pytest.mark.real

OUTLIER_NS = 4_917_000
N = 20_000
COMMON = {"elixir_version": "1.14.0", "otp_release": "25", "schedulers_online": 4, "vm_flags": ""}
PRIORITIES = (("normal", 0), ("high", 1500), ("fifo", 3000), ("idle", 4500))
# The far sample explained (the run page's timeline of it: an interrupt, then a thread, on its CPU)
WHY = [{"sample_index": N // 2, "thread": 0, "cpu": 1, "value_ns": OUTLIER_NS, "start_ns": 1_000_000,
        "self_ns": 3_000, "unexplained_ns": 14_000, "note": None,
        "causes": [{"kind": "irq", "name": "local_timer", "irq": 236, "duration_ns": 900_000,
                    "intervals": [[100_000, 1_000_000]]},
                   {"kind": "thread", "name": "kworker/1:2", "pid": 77, "prio": 120, "duration_ns": 4_000_000,
                    "intervals": [[1_000_000, 4_900_000]]}]}]


def specs(page: str) -> list[dict]:
    return [json.loads(m) for m in re.findall(r'<script type="application/json" id="plot-\d+-spec">(.*?)</script>',
                                              page, re.S)]


@pytest.fixture(scope="module")
def outliers(tmp_path_factory):
    """Four timer configurations of two runs each (a few µs), the first run with one 4,917 µs sample, and a
    histogram-only configuration with one value as far out; every run records the same four BEAM settings."""
    tmp = tmp_path_factory.mktemp("outliers")
    db = str(tmp / "outliers.db")
    store = Store(db)
    rng = np.random.default_rng(31)
    exp = add_experiment(store, "timer with one far sample")
    values: dict[str, list[np.ndarray]] = {}
    ids: dict[str, list[int]] = {}
    for rep in range(2):
        for prio, shift in PRIORITIES:
            v = (4000 + shift + rng.gamma(3, 1500, N)).astype(np.int64)
            if prio == "normal" and rep == 0:
                v[N // 2] = OUTLIER_NS
            values.setdefault(prio, []).append(v)
            ids.setdefault(prio, []).append(add_run(
                store, tmp, v, workload="timer", variant="absolute", measure="latency", experiment_id=exp,
                settings={**COMMON, "priority": prio}, causes=WHY if prio == "normal" and rep == 0 else None))
    kept = (4000 + rng.gamma(3, 1500, N)).astype(np.int64)
    kept[7] = OUTLIER_NS
    hist_id = add_histogram_run(store, tmp, kept, bucket_width=1000, buckets=10_000, workload="timer",
                                variant="absolute", runtime="cyclictest", measure="latency", experiment_id=exp,
                                settings={**COMMON, "priority": "kept"})
    p9999 = {k: float(np.quantile(np.concatenate(v), 0.9999)) / 1000 for k, v in values.items()}
    p9999["kept"] = float(np.quantile(kept, 0.9999)) / 1000
    return {"db": db, "tmp": tmp, "exp": exp, "ids": ids, "hist": hist_id, "p9999": p9999,
            "outlier_run_p9999": float(np.quantile(values["normal"][0], 0.9999)) / 1000,
            "kept_p9999": p9999["kept"]}


DISTRIBUTION = {": histogram": "xaxis", ": cumulative distribution": "xaxis", ": percentiles": "yaxis",
                ": box plot per configuration": "xaxis"}


def check_distribution_figures(figures: list[dict], p9999_us: float) -> int:
    """Each distribution figure: its axis ends at most 2 × the largest p99.99 (never near the outlier), the
    outlier is stated on the plot (count and max), a histogram's traces have many non-empty buckets in view.
    Returns how many figures it checked."""
    checked = 0
    for f in figures:
        title = f["layout"]["title"]["text"].replace("<br>", " ")
        axis = next((a for suffix, a in DISTRIBUTION.items() if title.endswith(suffix)), None)
        if axis is None:
            continue
        checked += 1
        lo, hi = f["layout"][axis].get("range") or (None, OUTLIER_NS / 1000)
        assert hi <= 2 * p9999_us, (title, hi, p9999_us)
        notes = " ".join(a["text"] for a in f["layout"].get("annotations", []))
        assert "beyond" in notes and "max 4,917 µs" in notes, (title, notes)
        beyond = int(re.search(r"(\d[\d,]*) beyond", notes).group(1).replace(",", ""))
        assert 1 <= beyond <= 10, notes        # the far samples and the last few of the tail, no more
        if axis == "xaxis" and title.endswith(": histogram"):
            for tr in f["data"]:
                y = np.array([v or 0 for v in tr["y"]], float)
                x = np.asarray(tr["x"], float) if "x" in tr else tr["x0"] + tr["dx"] * np.arange(len(y))
                in_view = (x >= lo) & (x < hi)
                assert in_view.sum() <= 400
                assert np.count_nonzero(y[in_view] > 0) >= 10, (title, tr["name"])
                # most buckets of the bulk hold samples: between the first non-empty one and the trace's p99
                filled = np.flatnonzero(y > 0)
                cum = np.cumsum(y) / y.sum()
                end = int(np.searchsorted(cum, 0.99))
                span = y[filled[0]:end + 1]
                assert np.count_nonzero(span) >= 0.9 * len(span), (title, tr["name"], span)
    return checked


def test_report_figures_show_the_bulk_and_mark_the_outlier(cli, outliers, tmp_path):
    out, figs = tmp_path / "r.html", tmp_path / "figs"
    r = cli("report", "--db", outliers["db"], "-o", out, "--figures", figs, "--dpi", "40")
    assert r.code == 0, r.err
    figures = specs(out.read_text())
    assert check_distribution_figures(figures, max(outliers["p9999"].values())) == 4

    # the paper figures (matplotlib): the same ranges, the outlier stated in the axes
    from rtscope.report import figures as paper, model
    from rtscope.report.figures import _pyplot
    store = Store(outliers["db"])
    rep = model.build(store, store.runs(), title="t", selection="all")
    plt = _pyplot()
    kinds = set()
    for builder, arg, stem in paper._names(rep):
        kind = stem.split("-")[0]
        if kind not in ("box", "histogram", "cdf", "percentiles"):
            continue
        kinds.add(kind)
        fig = builder(plt, arg)
        ax = fig.axes[0]
        hi = (ax.get_xlim() if kind in ("histogram", "cdf", "box") else ax.get_ylim())[1]
        assert hi <= 2 * max(outliers["p9999"].values()), (stem, hi)
        # the note above the axes (its right-hand title), or a latency histogram's legend below them
        text = " ".join([ax.get_title(loc="right")] + [t.get_text() for lg in fig.legends for t in lg.get_texts()])
        text = text.replace("\n", " ")
        assert "beyond" in text and ("4,917" in text or kind == "histogram"), (stem, text)
        plt.close(fig)
    assert kinds == {"box", "histogram", "cdf", "percentiles"}
    assert len(list(figs.glob("*.png"))) == len(list(figs.glob("*.svg"))) > 4


def test_serve_pages_show_the_bulk(outliers):
    s = Served(outliers["db"], log=outliers["tmp"] / "serve-bulk.log")
    try:
        status, page, _ = s.get(f"/experiments/{outliers['exp']}")
        assert status == 200
        assert check_distribution_figures(specs(page), max(outliers["p9999"].values())) == 4
        status, page, _ = s.get(f"/runs/{outliers['ids']['normal'][0]}")
        assert status == 200
        assert check_distribution_figures(specs(page), outliers["outlier_run_p9999"]) == 4
        status, page, _ = s.get(f"/runs/{outliers['hist']}")        # histogram-only: histogram, CDF, percentiles
        assert status == 200
        assert check_distribution_figures(specs(page), outliers["kept_p9999"]) == 3
    finally:
        s.stop()


def test_lab_page_says_common_settings_once(outliers):
    """serve's home page: each row shows the settings that differ between the listed runs, the rest once."""
    s = Served(outliers["db"], log=outliers["tmp"] / "serve-lab.log")
    try:
        status, page, _ = s.get("/")
    finally:
        s.stop()
    assert status == 200
    latest = page.split('id="latest"')[1].split("</table>")[0]
    assert latest.count("elixir_version=1.14.0") == 1 and latest.count("vm_flags=") == 1
    common = re.search(r'id="common-settings">([^<]*)<', latest).group(1)
    assert "Settings common to all 9 runs listed: elixir_version=1.14.0, otp_release=25, schedulers_online=4, " \
           "vm_flags=" in common
    rows = re.findall(r"<tr><td class=\"l\"><a href=\"/runs/\d+\">.*?</tr>", latest, re.S)
    assert len(rows) == 9
    for prio in ("normal", "high", "fifo", "idle", "kept"):
        assert sum(f"<td class=\"l\">priority={prio}</td>" in row for row in rows) >= 1


# --- in Chromium ------------------------------------------------------------------------------------------

HISTOGRAM = """(() => {
  const d = [...document.querySelectorAll('div.plot')].find(d => d.layout.title.text.endsWith(': histogram'));
  const r = d._fullLayout.xaxis.range;
  const xs = tr => tr.x || tr.y.map((_, i) => tr.x0 + i * tr.dx);   // evenly spaced buckets: x0 and dx
  const bars = d.data.map(tr => xs(tr).filter((x, i) => tr.y[i] > 0 && x >= r[0] && x < r[1]).length);
  const notes = [...d.querySelectorAll('.annotation-text')].map(e => e.textContent).join(' ');
  return {id: d.id, range: r, bars: bars, notes: notes};
})()"""

# Per plot: the bounding boxes of its toolbar (plotly's modebar) and its title's text, and of the plot itself.
BOXES = """(() => [...document.querySelectorAll('div.plot')].map(d => {
  const box = e => { if (!e) { return null; } const r = e.getBoundingClientRect();
                     return [r.left, r.top, r.right, r.bottom]; };
  return {id: d.id, plot: box(d), modebar: box(d.querySelector('.modebar')), title: box(d.querySelector('.gtitle')),
          area: box(d.querySelector('.draglayer .nsewdrag'))};
}))()"""


def overlap(a, b) -> bool:
    return a[0] < b[2] and b[0] < a[2] and a[1] < b[3] and b[1] < a[3]


def check_toolbars(page, where: str) -> int:
    """Hover each plot (its toolbar shows) and check the toolbar and the title do not intersect, and the title
    lies inside the plot and above its plot area. Returns the plots checked."""
    boxes = page.evaluate(BOXES)
    for b in boxes:
        page.locator(f"#{b['id']}").hover()
        b = next(x for x in page.evaluate(BOXES) if x["id"] == b["id"])
        assert b["modebar"] and b["title"], (where, b)
        assert not overlap(b["modebar"], b["title"]), (where, b)
        assert b["plot"][0] - 1 <= b["title"][0] and b["title"][2] <= b["plot"][2] + 1, (where, b)
        assert b["title"][3] <= b["area"][1] + 1, (where, b)      # above the plot area, not over the data
    return len(boxes)


def test_report_histogram_in_chromium(cli, outliers, browser, tmp_path):
    """The report in Chromium: the histogram plotly drew spans the bulk (its live x range ends below 2 × the
    largest p99.99), each configuration has ≥ 10 visible non-empty bars, and the outlier's note is drawn."""
    page = report_page(cli, outliers["db"], tmp_path / "r.html", browser)
    h = page.evaluate(HISTOGRAM)
    assert h["range"][1] <= 2 * max(outliers["p9999"].values()), h
    assert len(h["bars"]) == 5 and min(h["bars"]) >= 10, h
    assert "beyond" in h["notes"] and "max 4,917 µs" in h["notes"], h
    shot = tmp_path / "histogram.png"
    page.locator(f"#{h['id']}").screenshot(path=str(shot))
    import matplotlib.image as mpimg
    img = mpimg.imread(shot)
    # plotly's first two colours, blue and red, each draw a visible curve (not one bucket at the left edge)
    for colour in ((0x1f, 0x77, 0xb4), (0xd6, 0x27, 0x28)):
        near = np.abs(img[..., :3] - np.array(colour) / 255).sum(axis=-1) < 0.08
        columns = np.flatnonzero(near.any(axis=0))
        assert len(columns) and columns.max() - columns.min() > img.shape[1] // 4, colour
    assert check_toolbars(page, "report") >= 5
    assert page.problems == [], page.problems
    shutil.copy(shot, outliers["tmp"] / "report-histogram.png")


@pytest.mark.parametrize("width", [1280, 640])
def test_toolbar_never_covers_a_title(outliers, browser, width):
    """serve's run, experiment and lab pages at a wide and an 80-column viewport: every plot drawn without
    error, no toolbar on a title, no title outside its plot."""
    s = Served(outliers["db"], log=outliers["tmp"] / f"serve-{width}.log")
    try:
        page = browser.new_page(viewport={"width": width, "height": 900})
        page.problems = []
        page.on("pageerror", lambda e: page.problems.append(f"page error: {e}"))
        checked = 0
        for path in (f"/runs/{outliers['ids']['normal'][0]}", f"/runs/{outliers['hist']}",
                     f"/experiments/{outliers['exp']}", "/"):
            counters = open_page(page, s.url + path)
            assert counters["errors"] == 0 and counters["drawn"] == counters["plots"], (path, counters)
            checked += check_toolbars(page, f"{path} at {width} px")
            if path == f"/runs/{outliers['ids']['normal'][0]}":     # the explained sample's timeline is one
                titles = page.evaluate("[...document.querySelectorAll('div.plot .gtitle')].map(e => e.textContent)")
                assert any(f"sample {N // 2}" in t for t in titles), titles
            if path.startswith("/runs/") and width == 640:
                page.locator("div.plot").first.screenshot(path=str(outliers["tmp"] / f"run-{width}.png"))
        assert checked >= 10
        assert page.problems == [], page.problems
    finally:
        s.stop()


@pytest.mark.parametrize("kind", ["samples", "histogram-only", "constant"])
def test_one_run_renders_at_80_columns(cli, browser, tmp_path, kind):
    """A store of one run (every sample kept, a kept histogram only, or one value throughout): the report and
    serve's lab and run pages draw every plot without error at 640 px, no toolbar on a title."""
    db = str(tmp_path / "one.db")
    store = Store(db)
    values = np.random.default_rng(3).integers(5_000, 9_000, 3000)
    if kind == "histogram-only":
        add_histogram_run(store, tmp_path, values, workload="timer", variant="cyclic", runtime="cyclictest",
                          measure="latency", settings=COMMON)
    else:
        add_run(store, tmp_path, values if kind == "samples" else np.full(500, 7_000), workload="timer",
                variant="absolute", measure="latency", settings=COMMON)
    page = report_page(cli, db, tmp_path / "one.html", browser, browser.new_page(viewport={"width": 640,
                                                                                            "height": 900}))
    assert page.evaluate("+document.body.dataset.jsErrors") == 0
    assert check_toolbars(page, f"report of one {kind} run") >= 3
    s = Served(db, log=tmp_path / "serve.log")
    try:
        for path in ("/", "/runs/1"):
            counters = open_page(page, s.url + path)
            assert counters["errors"] == 0 and counters["drawn"] == counters["plots"], (path, counters)
            check_toolbars(page, f"{path} of one {kind} run")
            if path == "/":     # one run: its row shows its settings, nothing is said to be common
                text = page.inner_text("#latest + table")
                assert text.count("elixir_version=1.14.0") == 1 and "Settings common to" not in page.inner_text("main")
    finally:
        s.stop()


# --- the tool each run names ------------------------------------------------------------------------------

@pytest.mark.skipif(shutil.which("cyclictest") is None, reason="cyclictest not installed (apt-get install rt-tests)")
def test_machine_table_names_each_runs_tool(cli, db, tmp_path, rtprobe):
    """A real rtprobe run and a real cyclictest run on this machine: the report's and serve's machine tables
    name the tool `show` names for each run, and no other."""
    spec = tmp_path / "two.toml"
    spec.write_text('name = "two tools"\n[[workload]]\nname = "exec"\nvariants = ["sum"]\nruntime = "native"\n'
                    "[workload.params]\niterations = 50\npause_ms = 0\n"
                    '[[workload]]\nname = "timer"\nvariants = ["absolute"]\nruntime = "cyclictest"\n'
                    "[workload.params]\ninterval_us = 200\nloops = 200\n")
    r = cli("run", spec, "--db", db)
    assert r.code == 0, r.err
    runs = Store(db).runs()
    assert {x.runtime for x in runs} == {"native", "cyclictest"}
    tools = {}
    for run in runs:
        shown = cli("show", str(run.id), "--db", db)
        m = re.search(r"tool (\S+) (\S+)", shown.out)
        tools[run.id] = f"{m.group(1)} {m.group(2)}"
    assert len(set(tools.values())) == 2 and any(t.startswith("rtprobe ") for t in tools.values())
    out = tmp_path / "r.html"
    r = cli("report", "--db", db, "-o", out)
    assert r.code == 0, r.err
    machines = out.read_text().split('<h2 id="machines">')[1].split("<h2")[0]
    row = re.search(r'<td class="l">tool</td><td class="l">([^<]*)</td>', machines).group(1)
    for run_id, tool in tools.items():
        assert f"{tool} (run {run_id})" in row, (row, tools)
    assert "rtscope-beam" not in machines and '<td class="l">probe</td>' not in machines
    s = Served(db, log=tmp_path / "serve.log")
    try:
        for run_id, tool in tools.items():
            status, page, _ = s.get(f"/runs/{run_id}")
            assert status == 200
            table = page.split('id="machine"')[1]
            assert re.search(rf'<td class="l">tool</td><td class="l">{re.escape(tool)}</td>', table), (tool, table)
            other = next(t for i, t in tools.items() if i != run_id)
            assert other not in table
    finally:
        s.stop()
