"""The static figures (`report --figures`) can be read, judged on matplotlib's own text extents (issue 50, item 3).

The Chromium half is tests/test_figures_geometry.py; this one draws every figure of the same two reports (the
Nerves study's shape: 12 configurations with long labels and one far sample; an imported cyclictest
histogram whose MAX lies beyond its last bucket) with matplotlib's renderer and measures each text's window
extent: no two overlap, none leaves the figure, no legend, title or note lies on a drawn line or marker,
every box has its whole label, log axes carry full numbers, and the histogram reaches its MAX or says what
it could not draw.
"""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pytest

from report_fixtures import NERVES_FLAGS as FLAGS, nerves_store
from rtscope.store import Store

pytestmark = pytest.mark.fast

FIXTURES = Path(__file__).parent / "fixtures" / "cyclictest"


@pytest.fixture(scope="module")
def reports(tmp_path_factory):
    from rtscope.report import model
    tmp = tmp_path_factory.mktemp("static")
    nerves = nerves_store(tmp)
    hist_db = str(tmp / "hist.db")
    import subprocess
    import sys
    r = subprocess.run([sys.executable, "-m", "rtscope", "import", "cyclictest-histogram",
                        str(FIXTURES / "rpi_overflow_h.txt"), "--db", hist_db], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    out = {}
    for name, db in (("nerves", nerves), ("histogram", hist_db)):
        store = Store(db)
        out[name] = model.build(store, store.runs(), title=name, selection="all")
    return out


def drawn_points(ax) -> np.ndarray:
    """Display coordinates of the data drawn in `ax`: each line's and step patch's path, a point every 3 px."""
    from matplotlib.lines import Line2D
    from matplotlib.patches import PathPatch, StepPatch
    out = []
    for artist in [*ax.lines, *ax.patches, *ax.collections]:
        if isinstance(artist, Line2D):
            xy = artist.get_transform().transform(artist.get_xydata())
        elif isinstance(artist, (StepPatch, PathPatch)):
            xy = artist.get_transform().transform(artist.get_path().vertices)
        elif hasattr(artist, "get_offsets") and len(artist.get_offsets()):
            xy = artist.get_offset_transform().transform(artist.get_offsets())
        else:
            continue
        xy = xy[np.all(np.isfinite(xy), axis=1)]
        for a, b in zip(xy[:-1], xy[1:]):
            steps = int(min(2000, np.hypot(*(b - a)) // 3)) + 1
            out.append(a + (b - a) * np.linspace(0, 1, steps, endpoint=False)[:, None])
        if len(xy):
            out.append(xy[-1:])
    if not out:
        return np.empty((0, 2))
    pts = np.concatenate(out)
    box = ax.get_window_extent()
    return pts[(pts[:, 0] >= box.x0) & (pts[:, 0] <= box.x1) & (pts[:, 1] >= box.y0) & (pts[:, 1] <= box.y1)]


def texts_of(fig, renderer) -> list[tuple[str, str, object, object]]:
    """(kind, text, window extent, axes it belongs to) of every visible text of the figure."""
    out = []

    def add(kind, t, ax=None):
        if t.get_visible() and t.get_text().strip():
            out.append((kind, t.get_text(), t.get_window_extent(renderer), ax))

    if fig._suptitle is not None:
        add("title", fig._suptitle)
    for ax in fig.axes:
        for axis, kind in ((ax.xaxis, "xtick"), (ax.yaxis, "ytick")):
            lo, hi = sorted(axis.get_view_interval())
            for tick in axis.get_major_ticks():
                if lo - 1e-9 * abs(hi - lo) <= tick.get_loc() <= hi + 1e-9 * abs(hi - lo):
                    add(kind, tick.label1, ax)
        add("xlabel", ax.xaxis.label, ax)
        add("ylabel", ax.yaxis.label, ax)
        for t in (ax.title, ax._left_title, ax._right_title):
            add("title", t, ax)
        for t in ax.texts:
            add("note", t, ax)
        if ax.get_legend():
            for t in [*ax.get_legend().get_texts(), ax.get_legend().get_title()]:
                add("legend", t, ax)
    for legend in fig.legends:
        for t in [*legend.get_texts(), legend.get_title()]:
            add("legend", t)
    return out


def check_figure(fig, where: str) -> list[tuple]:
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    if not isinstance(fig.canvas, FigureCanvasAgg):
        FigureCanvasAgg(fig)          # a bare Figure (figures/latency.py) drawn as `report --figures` saves it
    fig.canvas.draw()
    renderer = fig.canvas.get_renderer()
    drawn = [drawn_points(a) for a in fig.axes]
    whole = fig.bbox
    texts = texts_of(fig, renderer)
    for i, (kind, text, box, ax) in enumerate(texts):
        assert "…" not in text, (where, text)
        assert box.x0 >= whole.x0 - 1 and box.x1 <= whole.x1 + 1 and box.y0 >= whole.y0 - 1 \
            and box.y1 <= whole.y1 + 1, (where, kind, text, "outside the figure", box, whole)
        for kind2, text2, box2, _ in texts[i + 1:]:
            inter = box.intersection(box, box2)
            assert inter is None or inter.width < 1 or inter.height < 1, (where, "overlap", kind, text, kind2, text2)
        if kind in ("note", "legend", "title"):
            for pts in drawn:
                inside = pts[(pts[:, 0] > box.x0) & (pts[:, 0] < box.x1) & (pts[:, 1] > box.y0) & (pts[:, 1] < box.y1)]
                assert not len(inside), (where, kind, text, "on the data", inside[:3])
    return texts


SUPERSCRIPT = str.maketrans("⁰¹²³⁴⁵⁶⁷⁸⁹⁻", "0123456789-")


def number(text: str) -> float:
    """A tick label's value: '0.5', '2k', '10M', '10⁻³'."""
    text = text.replace("−", "-")
    if m := re.fullmatch(r"10([⁰¹²³⁴⁵⁶⁷⁸⁹⁻]+)", text):
        return 10.0 ** int(m.group(1).translate(SUPERSCRIPT))
    if m := re.fullmatch(r"\$\\mathdefault\{10\^\{(-?\d+)\}\}\$", text):      # matplotlib's own 10^k
        return 10.0 ** int(m.group(1))
    for suffix, size in (("k", 1e3), ("M", 1e6), ("G", 1e9)):
        if text.endswith(suffix):
            return float(text[:-1]) * size
    return float(text)


def check_log_ticks(fig, where: str) -> None:
    """Each log axis' tick labels are the full numbers at their positions (no bare mantissa)."""
    for ax in fig.axes:
        for axis in (ax.xaxis, ax.yaxis):
            if axis.get_scale() != "log":
                continue
            lo, hi = sorted(axis.get_view_interval())
            for tick in axis.get_major_ticks():
                text = tick.label1.get_text()
                if tick.label1.get_visible() and text and lo <= tick.get_loc() <= hi:
                    assert number(text) == pytest.approx(tick.get_loc(), rel=1e-6), (where, text, tick.get_loc())


def figures_of(rep):
    """Every figure of the report as `report --figures` draws it, checked (check_figure, check_log_ticks):
    (kind, file stem, figure, its texts)."""
    from rtscope.report import figures as paper
    from rtscope.report.figures import _pyplot
    plt = _pyplot()
    series = 0
    for builder, arg, stem in paper._names(rep):
        if builder is paper.task_memory_plot:
            continue
        if builder is paper.series_plot:
            series += 1
            if series > 2:          # one per configuration, all alike: the first two (a short label, a long one)
                continue
        with plt.rc_context(paper.STYLE):
            fig = builder(plt, arg)
            texts = check_figure(fig, stem)
            check_log_ticks(fig, stem)
            yield stem.split("-")[0], stem, fig, texts
        plt.close(fig)


def test_nerves_shaped_figures_are_readable(reports):
    seen = set()
    for kind, stem, fig, texts in figures_of(reports["nerves"]):
        seen.add(kind)
        if kind == "box":
            labels = [re.sub(r"\s+", " ", t) for k, t, _, _ in texts if k == "ytick"]
            assert len(labels) == 12, labels
            for fullsweep in (0, 6, 65535, 131071):
                assert sum(bool(re.search(rf"fullsweep_after={fullsweep}\b", x)) for x in labels) == 3, labels
            assert sum(FLAGS in x for x in labels) == 4, labels
        if kind in ("box", "histogram", "cdf", "percentiles"):
            notes = " ".join(t for k, t, _, _ in texts if k == "title")
            assert "beyond" in re.sub(r"\s+", " ", notes) and "max 40,000 µs" in re.sub(r"\s+", " ", notes), \
                (stem, notes)
    assert {"box", "histogram", "cdf", "percentiles", "series"} <= seen


def test_imported_histogram_figures_reach_the_max(reports):
    seen = set()
    for kind, stem, fig, texts in figures_of(reports["histogram"]):
        seen.add(kind)
        if kind == "histogram":
            ax = fig.axes[0]
            assert ax.get_xlim()[1] >= 76, ax.get_xlim()
            legend = " ".join(t for k, t, _, _ in texts if k == "legend")
            assert "3 beyond the last bucket (65.0 µs), max 76.0 µs, not drawn" in legend, legend
    assert {"histogram", "cdf", "percentiles"} <= seen
