"""The report's figures can be read, judged on what Chromium draws (issue 50, item 3).

Two reports: one of the Nerves study's shape (12 configurations whose labels are long, as settings with
` (in force: …)` suffixes make them; one far sample) and one of an imported cyclictest histogram whose last
bucket ends below its MAX (3 overflows at 67, 72 and 76 µs). In Chromium, at a wide and an 80-column page,
every plot's text elements (tick labels, axis titles, legend entries, notes, the title) are measured: none
overlaps another, none leaves its plot, no note lies on the plot area (the data), every box has its whole
label (no `…`, nothing dropped), log axes carry full numbers; the histogram's x range reaches the MAX or
a note says what lies beyond it. One Chromium for the module; each report is written once.
"""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from report_fixtures import NERVES_FLAGS as FLAGS, nerves_store
from served import DRAWN, new_page, wait_until

pytestmark = pytest.mark.real

FIXTURES = Path(__file__).parent / "fixtures" / "cyclictest"


def rtscope(*argv: str) -> None:
    r = subprocess.run([sys.executable, "-m", "rtscope", *argv], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr


@pytest.fixture(scope="module")
def nerves_html(tmp_path_factory):
    """The report of a store of the Nerves study's shape (report_fixtures.nerves_store)."""
    tmp = tmp_path_factory.mktemp("nerves")
    rtscope("report", "--db", nerves_store(tmp), "-o", str(tmp / "nerves.html"))
    return tmp / "nerves.html"


@pytest.fixture(scope="module")
def histogram_html(tmp_path_factory):
    """The report of the imported cyclictest histogram with 3 overflows."""
    tmp = tmp_path_factory.mktemp("histogram")
    db = str(tmp / "hist.db")
    rtscope("import", "cyclictest-histogram", str(FIXTURES / "rpi_overflow_h.txt"), "--db", db)
    rtscope("report", "--db", db, "-o", str(tmp / "hist.html"))
    return tmp / "hist.html"


# Per plot: its box, its plot area (plotly's drag layer) and every text element drawn, by kind.
TEXTS = """(() => [...document.querySelectorAll('div.plot')].map(d => {
  const box = e => { const r = e.getBoundingClientRect(); return [r.left, r.top, r.right, r.bottom]; };
  const shown = e => { const r = e.getBoundingClientRect(); const s = getComputedStyle(e);
                       return r.width > 0 && r.height > 0 && s.display !== 'none' && s.visibility !== 'hidden'
                              && (e.getAttribute('opacity') ?? '1') !== '0' && e.textContent.trim() !== ''; };
  const texts = (sel, kind) => [...d.querySelectorAll(sel)].filter(shown)
      .map(e => ({kind: kind, box: box(e),        // a label wrapped over lines: its lines joined by a space
                  text: [...e.querySelectorAll('tspan.line')].map(x => x.textContent).join(' ') || e.textContent}));
  const areas = [...d.querySelectorAll('.draglayer .nsewdrag')].map(box);
  // the data as drawn: points along every line (every 3 px, from the path's M/L/H/V commands) and every marker
  const points = [];
  const notes = [...d.querySelectorAll('.annotation')].filter(shown).map(box);
  for (const path of (notes.length ? d.querySelectorAll('.scatterlayer path.js-line, .boxlayer path.box') : [])) {
    const m = path.getScreenCTM(); let x = 0, y = 0;
    const add = (px, py) => points.push([m.a * px + m.c * py + m.e, m.b * px + m.d * py + m.f]);
    for (const [, cmd, args] of (path.getAttribute('d') || '').matchAll(/([MLHVZ])([^MLHVZ]*)/g)) {
      const v = args.split(/[ ,]+/).filter(a => a !== '').map(Number);
      let nx = x, ny = y;
      if (cmd === 'M' || cmd === 'L') { nx = v[0]; ny = v[1]; } else if (cmd === 'H') { nx = v[0]; }
      else if (cmd === 'V') { ny = v[0]; } else { continue; }
      if (cmd !== 'M') { const steps = Math.ceil(Math.hypot(nx - x, ny - y) / 3);
        for (let i = 1; i < steps; i++) { add(x + (nx - x) * i / steps, y + (ny - y) * i / steps); } }
      x = nx; y = ny; add(x, y);
    }
  }
  for (const e of d.querySelectorAll('.scatterlayer path.point')) { const r = e.getBoundingClientRect();
    if (r.width > 0) { points.push([(r.left + r.right) / 2, (r.top + r.bottom) / 2]); } }
  // per note: the drawn points under it (a few, to name them)
  const covered = notes.map(n => points.filter(q => n[0] < q[0] && q[0] < n[2] && n[1] < q[1] && q[1] < n[3])
                                      .slice(0, 3));
  return {id: d.id, title: (d.layout.title || {}).text || '', plot: box(d), areas: areas, covered: covered,
          ranges: Object.fromEntries(Object.entries(d._fullLayout).filter(([k]) => /^[xy]axis\\d*$/.test(k))
                                     .map(([k, a]) => [k, {range: a.range, type: a.type}])),
          texts: [...texts('.xtick text', 'xtick'), ...texts('.ytick text', 'ytick'),
                  ...texts('.g-xtitle text, .g-x2title text', 'xtitle'), ...texts('.g-ytitle text', 'ytitle'),
                  ...texts('.legend .legendtext', 'legend'), ...texts('.annotation', 'note'),
                  ...texts('.gtitle', 'title')]};
}))()"""


def overlap(a, b, slack: float = 0.5) -> bool:
    return a[0] + slack < b[2] and b[0] + slack < a[2] and a[1] + slack < b[3] and b[1] + slack < a[3]


def check_plot(p: dict, where: str) -> None:
    """No two text elements overlap (ticks of one axis among themselves included); every text lies inside the
    plot; no legend entry or title lies on the plot area, no note on a drawn line or marker."""
    texts = p["texts"]
    for i, a in enumerate(texts):
        lo, top, hi, bottom = p["plot"]
        assert lo - 1 <= a["box"][0] and a["box"][2] <= hi + 1 and top - 1 <= a["box"][1] \
            and a["box"][3] <= bottom + 1, (where, p["title"], "outside its plot", a, p["plot"])
        for b in texts[i + 1:]:
            assert not overlap(a["box"], b["box"]), (where, p["title"], "overlap", a, b)
        if a["kind"] in ("legend", "title"):
            for area in p["areas"]:
                assert not overlap(a["box"], area), (where, p["title"], "on the plot area", a, area)
    # a note may sit inside a plot area, where nothing is drawn
    notes = [a for a in texts if a["kind"] == "note"]
    for a, on in zip(notes, p["covered"]):
        assert not on, (where, p["title"], "a note on the data", a, on)
        assert "…" not in a["text"], (where, a)


def open_report(browser, path: Path, width: int):
    page = new_page(browser)
    page.set_viewport_size({"width": width, "height": 900})
    page.goto(path.as_uri())
    wait_until(page, DRAWN)
    return page


@pytest.mark.parametrize("width", [1280, 640])
def test_nerves_shaped_report_is_readable(browser, nerves_html, width):
    page = open_report(browser, nerves_html, width)
    plots = page.evaluate(TEXTS)
    assert len(plots) >= 5
    for p in plots:
        check_plot(p, f"{width} px")
    # every box has its whole label beside it: the configurations' settings, complete, one label per box
    box = next(p for p in plots if p["title"].endswith("box plot per configuration"))
    labels = [re.sub(r"\s+", " ", t["text"]) for t in box["texts"] if t["kind"] == "ytick"]
    assert len(labels) == 12, labels
    for fullsweep in (0, 6, 65535, 131071):
        assert sum(bool(re.search(rf"fullsweep_after={fullsweep}\b", x)) for x in labels) == 3, (fullsweep, labels)
    assert sum(FLAGS in x for x in labels) == 4, labels
    # the far sample is stated above the plot area, not on it (check_plot): count and max
    notes = [t["text"] for p in plots for t in p["texts"] if t["kind"] == "note"]
    assert any("beyond" in n and "max 40,000 µs" in n for n in notes), notes
    # log axes: full numbers, never a bare mantissa below 1
    for p in plots:
        for axis, a in p["ranges"].items():
            if a["type"] == "log":
                ticks = [t["text"] for t in p["texts"] if t["kind"] == ("ytick" if axis.startswith("y") else "xtick")]
                assert ticks and all(not re.fullmatch(r"[25]", t) or float(t) >= 1 for t in ticks), (p["title"], ticks)
    page.screenshot(path=str(nerves_html.parent / f"nerves-{width}.png"), full_page=True)
    assert page.problems == [], page.problems


@pytest.mark.parametrize("width", [1280, 640])
def test_imported_histogram_reaches_its_max(browser, histogram_html, width):
    page = open_report(browser, histogram_html, width)
    plots = page.evaluate(TEXTS)
    for p in plots:
        check_plot(p, f"{width} px")
    hists = [p for p in plots if "histogram" in p["title"] or "per CPU" in p["title"].replace("<br>", " ")]
    assert hists
    for p in hists:
        hi = p["ranges"]["xaxis"]["range"][1]
        notes = " ".join(t["text"] for t in p["texts"] if t["kind"] == "note")
        # the MAX (76 µs) is on the axis, and the 3 values the histogram could not place are stated
        assert hi >= 76, (p["title"], hi)
        assert "3 values beyond the histogram's last bucket" in notes and re.search(r"max 76(\.0)? µs", notes), \
            (p["title"], notes)
    page.screenshot(path=str(histogram_html.parent / f"hist-{width}.png"), full_page=True)
    assert page.problems == [], page.problems


@pytest.fixture(scope="module")
def tail_html(tmp_path_factory):
    """A report shaped like a real quick run of specs/nerves-rt.toml: fib under priority and fullsweep_after,
    a few samples per configuration far beyond the bulk (a 31 ms outlier, several at 2-3 times the median), so
    that the percentile curves leave the axis' range before their last point; settings as long as the study's,
    so that the runs' titles fill a narrow page."""
    from report_fixtures import add_experiment, add_run
    from rtscope.store import Store
    tmp = tmp_path_factory.mktemp("tail")
    db = str(tmp / "tail.db")
    store = Store(db)
    rng = np.random.default_rng(6)
    exp = add_experiment(store, "nerves-rt")
    configs = [(65535, 233, "low"), (65535, 233, "normal"), (65535, 233, "high"), (0, 233, "normal"),
               (131071, 233, "normal"), (65535, 6765, "normal")]
    for variant in ("fib", "sum"):
        for i, (fullsweep, heap, priority) in enumerate(configs):
            v = (75_000 + rng.gamma(2, 20_000, 100)).astype(np.int64)
            v[rng.choice(100, 3, replace=False)] = [31_094_000, 324_000, 1_096_000][: 1 + i % 3] + [380_000] * (2 - i % 3)
            add_run(store, tmp, v, workload="exec", variant=variant, runtime="beam", experiment_id=exp,
                    settings={"fullsweep_after": fullsweep, "min_heap_size": heap, "priority": priority},
                    params={"n": 4000, "pause_ms": 5})
        add_run(store, tmp, (38_000 + rng.gamma(2, 5_000, 100)).astype(np.int64), workload="exec", variant=variant,
                runtime="native", experiment_id=exp, params={"n": 4000, "pause_ms": 5})
    # sleep(5 ms) from 5,020 to 6,020 µs: its percentile axis starts at 5,000 µs (2 % below), a y tick label at
    # the x axis beside the first x tick label
    for priority in ("normal", "high"):
        v = rng.integers(5_020_000, 6_020_000, 100)
        v[:2] = [5_020_000, 6_020_000]
        add_run(store, tmp, v, workload="exec", variant="sleep", runtime="beam", experiment_id=exp,
                settings={"priority": priority}, params={"pause_ms": 5})
    rtscope("report", "--db", db, "-o", str(tmp / "tail.html"))
    return tmp / "tail.html"


@pytest.mark.parametrize("width", [1280, 640])
def test_tails_beyond_the_axis_stay_off_the_note(browser, tail_html, width):
    """Curves whose tail leaves the axis' range end at its edge: no point of them under the `beyond` note
    (check_plot), nothing drawn outside the plot area; every title fits its plot at 640 px; a y tick label at
    the x axis clear of the first x tick label."""
    page = open_report(browser, tail_html, width)
    plots = page.evaluate(TEXTS)
    assert any(t["kind"] == "note" and "beyond" in t["text"] for p in plots for t in p["texts"]
               if p["title"].endswith("percentiles")), [p["title"] for p in plots]
    for p in plots:
        check_plot(p, f"{width} px")
    page.screenshot(path=str(tail_html.parent / f"tail-{width}.png"), full_page=True)
    assert page.problems == [], page.problems
