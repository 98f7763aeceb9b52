"""What a report shows, computed once for the HTML page, the figures and the tables.

Every number here is in the stored unit (ns, bytes); the renderers convert
for display. Plots never carry every raw sample: box plots carry their
quartiles, whiskers and (thinned) outliers, histograms their bucket counts,
CDFs a fixed set of quantiles, time series a min/max decimation that keeps
every spike. Sections hold data only when the runs have it.
"""

from __future__ import annotations

import math
import multiprocessing
import os
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass, field
from datetime import datetime, timezone

import numpy as np

from .. import sysinfo
from ..analysis import explain_shares, stats
from ..analysis.compare import Baseline, Cell, ComparisonSet, check_options, compare, load_cells, spec_baseline
from ..analysis.fit import Series, memory_series
from ..analysis.results import display_unit, id_ranges
from ..analysis.select import Configuration, short_labels
from ..analysis.stats import merge_histograms
from ..analysis.threads import run_histogram, thread_histograms, thread_samples
from ..errors import UsageError
from ..analysis.tail_bound import MIN_SAMPLES as TAIL_MIN_SAMPLES
from ..figures import bulk as bulk_range, exceedance as exceedance_plot
from ..store import Run, Store
from ..words import tool_text
from . import lab, paper_view, tune

# What the plots embed is thinned so that a report of 100 runs stays under 1 MB (bench/compare_report.py); the
# store keeps every sample.
MAX_OUTLIERS = 100          # outliers drawn per box (thinned evenly by rank beyond that, the extremes kept)
MAX_HIST_BINS = 400
CDF_POINTS = 201            # levels 0, 0.005, ..., 1: short numbers in the page
TAIL_LEVELS = (0.9, 0.99, 0.999, 0.9999, 0.99999)
SERIES_POINTS = 500         # drawn points per time series (min/max per block: every spike kept)
MAX_SERIES = 40             # time-series plots per report
MAX_GC_MARKERS = 500
GC_COLUMNS = ("minor_gcs", "heap_size")


def is_task_memory(run: Run) -> bool:
    """Runs of study 5's memory-per-task measurement: analysed by a fit, not as a distribution."""
    return run.workload == "tasks" and run.variant == "memory" and \
        any(c["name"] == "tasks" for c in run.columns)


@dataclass
class Box:
    label: str
    n: int
    q1: float
    median: float
    q3: float
    whislo: float
    whishi: float
    mean: float
    outliers: np.ndarray
    n_outliers: int


@dataclass
class Curve:
    """A histogram (edges, density per unit) or a CDF (values, fractions) of one configuration."""

    label: str
    x: np.ndarray
    y: np.ndarray
    note: str = ""
    overflow: int = 0           # a kept histogram's values beyond its last bucket (position unknown) ...
    top: float | None = None    # ... and their maximum (stored unit): the figures state them


@dataclass
class Group:
    """Configurations measuring the same thing (workload, variant, measure, unit): one set of plots."""

    title: str
    unit: str
    cells: list[Cell]
    labels: dict[Configuration, str]
    boxes: list[Box] = field(default_factory=list)
    histograms: list[Curve] = field(default_factory=list)
    cdfs: list[Curve] = field(default_factory=list)
    per_thread: list[tuple[str, list[Curve], bulk_range.Bulk]] = field(default_factory=list)
    # (configuration, a curve per CPU, their range)
    notes: list[str] = field(default_factory=list)
    bulk: bulk_range.Bulk | None = None   # the range every distribution plot of the group shows (figures/bulk.py)
    exceedance: list[exceedance_plot.Exceedance] = field(default_factory=list)   # per configuration (time only)


@dataclass
class TimeSeries:
    label: str
    run_id: int
    unit: str
    index: np.ndarray
    values: np.ndarray
    n: int
    gc_index: np.ndarray        # sample indexes of GC events (thinned to MAX_GC_MARKERS)
    gc_values: np.ndarray
    gc_events: int              # all of them
    gc_source: str              # which column marked them ("" when none)
    gc_mean: float | None = None      # mean of samples with a GC event
    other_mean: float | None = None   # mean of the others


@dataclass
class Machine:
    """One machine state the runs were measured on (their machine records grouped), for the report."""

    fields: list[tuple[str, str]]
    run_ids: list[int]
    warnings: list[str]

    @property
    def runs_text(self) -> str:
        return id_ranges(self.run_ids)


@dataclass
class ExperimentInfo:
    """What the report says about an experiment of its runs (user text: escaped when rendered)."""

    id: int
    name: str
    description: str
    tags: list[str]
    created_at: str
    status: str


def experiment_infos(store: Store, runs: list[Run]) -> list[ExperimentInfo]:
    out = []
    for exp_id in sorted({r.experiment_id for r in runs if r.experiment_id}):
        from ..experiment import execute as experiment      # here: its imports (SQLAlchemy...) cost 0.2 s
        exp = experiment.get(store, exp_id)
        parsed = exp.spec.get("parsed") or {}
        tags = parsed.get("tags") or []
        out.append(ExperimentInfo(exp.id, exp.name, str(parsed.get("description", "")),
                                  [str(t) for t in (tags if isinstance(tags, list) else [tags])],
                                  exp.created_at, exp.status))
    return out


@dataclass
class Report:
    title: str
    generated_at: str
    selection: str
    runs: list[Run]
    machines: list[Machine]
    cells: list[Cell]
    labels: dict[Configuration, str]
    groups: list[Group]
    series: list[TimeSeries]
    series_omitted: int
    task_memory: list[Series]
    task_memory_unit: str
    comparisons: ComparisonSet | None
    notes: list[str]
    experiments: list[ExperimentInfo] = field(default_factory=list)  # the experiments the runs belong to
    monitoring: list = field(default_factory=list)   # lab.MonitorView: OSADL-style views of `rtscope monitor` runs
    fleet: list = field(default_factory=list)        # lab.FleetRow: the worst case per target, for several targets
    tunes: list = field(default_factory=list)        # tune.TuneView: the search and confirmation of `rtscope tune`
    why: list = field(default_factory=list)          # WhySample: the worst explained samples (setting explain)
    why_shares: list = field(default_factory=list)   # explain_shares.ConfigShares: cause shares per configuration
    paper: paper_view.PaperView | None = None        # a study experiment's own table and claims (paper_view.py)


@dataclass
class WhySample:
    """One explained sample for the report's timeline: its interval and each cause's stretches in it."""

    label: str          # configuration, run and sample
    value_ns: int
    where: str          # "CPU 1", "scheduler 2"
    causes: list[dict]
    self_ns: int
    unexplained_ns: int


# --- pieces ---------------------------------------------------------------------------------------------

WHY_PER_CELL = 2    # timelines per configuration: its worst explained samples
MAX_WHY = 12


def why_samples(store: Store, cells: list[Cell], labels: dict) -> list[WhySample]:
    out = []
    for cell in cells:
        found = [(r, s) for r in cell.runs for s in store.causes(r.id) if not s.get("note")]
        found.sort(key=lambda rs: -rs[1]["value_ns"])
        for run, s in found[:WHY_PER_CELL]:
            where = (f"CPU {s['cpu']}" if s.get("cpu") is not None else
                     f"scheduler {s['scheduler']}" if s.get("scheduler") is not None else "")
            out.append(WhySample(f"{labels[cell.config]}, run {run.id}, sample {s['sample_index']}", s["value_ns"],
                                 where, s.get("causes", []), s.get("self_ns", 0), s["unexplained_ns"]))
    return out[:MAX_WHY]


def box_of(label: str, values: np.ndarray) -> Box:
    """Tukey box: quartiles (type 7), whiskers at the furthest data within 1.5 IQR, outliers beyond."""
    q1, med, q3 = np.percentile(values, [25, 50, 75])
    iqr = q3 - q1
    inside = values[(values >= q1 - 1.5 * iqr) & (values <= q3 + 1.5 * iqr)]
    out = np.sort(values[(values < q1 - 1.5 * iqr) | (values > q3 + 1.5 * iqr)])
    shown = out if len(out) <= MAX_OUTLIERS else out[np.unique(np.linspace(0, len(out) - 1, MAX_OUTLIERS).round()
                                                                   .astype(np.int64))]
    return Box(label, len(values), float(q1), float(med), float(q3), float(inside.min()), float(inside.max()),
               float(values.mean()), shown, len(out))


def nice_width(span: float, bins: int) -> float:
    """The smallest 1, 2 or 5 × 10^k that covers `span` in at most `bins` buckets."""
    return bulk_range.nice(span / bins) if span > 0 else 1.0


def cell_bulk(cells: list[Cell], labels: dict) -> bulk_range.Bulk | None:
    """The range a group's distribution plots show: the bulk of every configuration, what lies beyond counted."""
    hists = {}
    for c in cells:
        if not len(c.samples) and c.hist_runs:
            merged = merge_histograms([run_histogram(r) for r in c.hist_runs])
            if merged is not None:
                hists[labels[c.config]] = merged
    return bulk_range.of_series({labels[c.config]: c.samples for c in cells if len(c.samples)}, hists)


def sample_curves(named: dict[str, np.ndarray], unit_scale: float,
                  bulk: bulk_range.Bulk | None = None) -> list[Curve]:
    """Raw samples as histograms on common buckets over the bulk's range (`bulk`, else theirs), samples per
    display unit; the bucket width from the data (Freedman–Diaconis on the bulk, a nice width in display
    units). Values beyond the range are not drawn: the bulk counts them."""
    if not named:
        return []
    bulk = bulk or bulk_range.of_series(named)
    integer = all(a.dtype.kind in "iu" for a in named.values())
    width = bulk_range.fd_width(list(named.values()), bulk, unit_scale, integer)
    start = math.floor(bulk.lo / width) * width
    nb = max(1, int(math.floor((bulk.hi - start) / width)) + 1)
    curves = []
    for label, a in named.items():
        h = stats.histogram(a[a <= start + nb * width], width, nb, start)
        curves.append(Curve(label, h.edges, h.counts / (width * unit_scale)))
    return curves


def histogram_curve(label: str, merged: dict, unit_scale: float) -> Curve:
    """A kept histogram in its own buckets, as samples per display unit (comparable with sample_curves)."""
    w = float(merged["bucket_width"])
    edges = float(merged.get("min_value", 0)) + w * np.arange(len(merged["counts"]) + 1)
    overflow = int(merged.get("overflow") or 0)
    return Curve(label, edges, np.asarray(merged["counts"], float) / (w * unit_scale), overflow=overflow,
                 top=float(merged["max"]) if overflow and merged.get("max") is not None else None)


def per_thread_curves(store: Store, cell: Cell, unit_scale: float) -> tuple[list[Curve], bulk_range.Bulk | None]:
    """A configuration's multi-thread runs as one histogram curve per CPU (thread when the CPU is unknown),
    as OSADL draws its latency plots, with their range; ([], None) when its runs have one thread."""
    hists: dict[str, list[dict]] = {}
    arrays: dict[str, list[np.ndarray]] = {}
    for run in cell.runs:
        if run.n_samples == 0:
            for index, cpu, h in thread_histograms(run):
                hists.setdefault(f"CPU {cpu}" if cpu is not None else f"thread {index}", []).append(h)
        else:
            for index, cpu, values in thread_samples(store, run):
                arrays.setdefault(f"CPU {cpu}" if cpu is not None else f"thread {index}", []).append(values)
    named = {k: np.concatenate(v) for k, v in arrays.items()}
    merged_hists = {key: merged for key, hs in hists.items() if (merged := merge_histograms(hs)) is not None}
    if len(named) + len(merged_hists) < 2:
        return [], None
    bulk = bulk_range.of_series(named, merged_hists)
    curves = sample_curves(named, unit_scale, bulk)
    curves += [histogram_curve(key, merged, unit_scale) for key, merged in merged_hists.items()]
    curves.sort(key=lambda c: (c.label.split()[0], int(c.label.split()[1])))
    return curves, bulk


def histogram_curves(cells: list[Cell], labels: dict, unit_scale: float,
                     bulk: bulk_range.Bulk | None = None) -> tuple[list[Curve], list[str]]:
    """Histograms on common buckets (over the bulk's range, a width from the data), as samples per display
    unit.

    Histogram-only configurations keep their own buckets; dividing by the bucket width
    makes all of them comparable on one axis (samples per µs, as study 2 plotted)."""
    notes = []
    curves = sample_curves({labels[c.config]: c.samples for c in cells if len(c.samples)}, unit_scale, bulk)
    for c in cells:
        if len(c.samples) or not c.hist_runs:
            continue
        merged = merge_histograms([run_histogram(r) for r in c.hist_runs])
        if merged is None:
            notes.append(f"{labels[c.config]}: histograms with different buckets cannot be overlaid")
            continue
        curve = histogram_curve(labels[c.config], merged, unit_scale)
        if merged["overflow"]:
            curve.note = overflow_note(curve, *display_unit(c.config.unit))
            notes.append(f"{labels[c.config]}: {curve.note}")
        curves.append(curve)
    return curves, notes


def overflow_note(curve: Curve, shown: str, scale: float) -> str:
    """'3 values beyond the histogram's last bucket (65 µs), max 76 µs' for a kept histogram with overflows."""
    if not curve.overflow:
        return ""
    end = float(curve.x[-1]) * scale
    head = f"{curve.overflow:,} value{'s' if curve.overflow != 1 else ''} beyond the histogram's last bucket " \
           f"({bulk_range.num(end)} {shown}), not drawn"
    return head + (f", max {bulk_range.num(curve.top * scale)} {shown}" if curve.top is not None else "")


def exceedance_cells(cells: list[Cell]) -> list[Cell]:
    """The cells of a group that get an exceedance plot: times (ns) where one has the samples a bound needs."""
    if cells[0].config.unit != "ns" or not any((c.stats.get("n") or 0) >= TAIL_MIN_SAMPLES for c in cells):
        return []
    return cells


def _exceedance(cell: Cell, label: str) -> exceedance_plot.Exceedance | None:
    try:
        return exceedance_plot.of_cell(cell, label)
    except UsageError:         # nothing to draw (no samples, no histogram)
        return None


# The tail analyses of a report, read by the forked worker from inherited memory (build(parallel=True)).
_TAIL_JOBS: list[tuple[Cell, str]] = []


def _tail_job(i: int) -> exceedance_plot.Exceedance | None:
    return _exceedance(*_TAIL_JOBS[i])


class Exceedances:
    """Every group's exceedance data, computed while the rest of the report is built: with parallel=True by one
    forked process (its tail fits, a third of a report's CPU time, beside the rest), from the first job on,
    while this process, once the rest is built, takes the jobs the worker has not started from the last one
    back (`results`); else here when asked. Fork only from a single-threaded process (the CLI), never from
    serve's threads."""

    def __init__(self, jobs: list[tuple[Cell, str]], parallel: bool):
        global _TAIL_JOBS
        self.jobs, self.futures, self.pool = jobs, None, None
        if parallel and jobs and _cpus() > 1 and "fork" in multiprocessing.get_all_start_methods():
            # what both sides need, imported once, not in each: the special functions (the tests, the checks) and
            # numpy.ma (numpy's unique and quantile import it on first use: 50 ms or more of CPU)
            import numpy.ma  # noqa: F401

            from ..analysis import special  # noqa: F401
            _TAIL_JOBS = jobs
            self.pool = ProcessPoolExecutor(1, mp_context=multiprocessing.get_context("fork"))
            self.futures = [self.pool.submit(_tail_job, i) for i in range(len(jobs))]

    def results(self) -> list[exceedance_plot.Exceedance | None]:
        global _TAIL_JOBS
        if self.futures is None:
            return [_exceedance(c, label) for c, label in self.jobs]
        try:
            here = {}
            for i in reversed(range(len(self.jobs))):
                if not self.futures[i].cancel():       # the worker has it (running or done): so has it the rest
                    break
                here[i] = _exceedance(*self.jobs[i])
            return [here[i] if i in here else f.result() for i, f in enumerate(self.futures)]
        finally:
            self.pool.shutdown()
            _TAIL_JOBS = []


def _cpus() -> int:
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)


def cdf_curve(cell: Cell, label: str) -> Curve | None:
    """Quantiles at evenly spaced levels plus the tail levels; from the histogram for histogram-only cells."""
    if len(cell.samples):
        n = len(cell.samples)
        levels = np.unique(np.concatenate([np.linspace(0, 1, CDF_POINTS), [t for t in TAIL_LEVELS if t < 1 - 1 / n]]))
        return Curve(label, np.quantile(cell.sorted, levels), levels)
    if cell.hist_runs:
        merged = merge_histograms([run_histogram(r) for r in cell.hist_runs])
        if merged is None:
            return None
        counts = np.asarray(merged["counts"], float)
        w = float(merged["bucket_width"])
        edges = float(merged.get("min_value", 0)) + w * np.arange(1, len(counts) + 1)
        frac = np.cumsum(counts) / merged["n"]
        keep = counts > 0
        x = np.concatenate([[merged["min"]], edges[keep], [merged["max"]]])
        y = np.concatenate([[0.0], frac[keep], [1.0]])
        return Curve(label, x, y, "from the histogram (bucket upper edges)")
    return None


def decimate(values: np.ndarray, points: int = SERIES_POINTS) -> tuple[np.ndarray, np.ndarray]:
    """(index, value) with at most ~points entries: each block's min and max, in order, so no spike is lost."""
    n = len(values)
    if n <= points:
        return np.arange(n), values
    size = math.ceil(n / (points // 2))
    blocks = math.ceil(n / size)  # so the padding stays inside the last block (a block of padding only has no min)
    pad = blocks * size - n
    v = np.concatenate([values, np.full(pad, np.nan)]).reshape(blocks, size)
    imin = np.nanargmin(v, axis=1)
    imax = np.nanargmax(v, axis=1)
    base = np.arange(blocks) * size
    idx = np.sort(np.unique(np.concatenate([base + imin, base + imax])))
    idx = idx[idx < n]
    return idx, values[idx]


def gc_events(side: dict[str, np.ndarray]) -> tuple[np.ndarray, str]:
    """Indexes of samples with a GC event: minor_gcs increments, else heap_size drops."""
    if "minor_gcs" in side:
        return np.flatnonzero(np.diff(side["minor_gcs"].astype(np.int64)) > 0) + 1, "minor_gcs increments"
    if "heap_size" in side:
        return np.flatnonzero(np.diff(side["heap_size"].astype(np.int64)) < 0) + 1, "heap_size drops"
    return np.empty(0, dtype=np.int64), ""


def time_series(store: Store, cell: Cell, label: str) -> TimeSeries:
    """The first repetition's samples in measurement order, with its GC events."""
    run = cell.sample_runs[0]
    values = cell.run_samples(run)
    names = [c["name"] for c in run.columns]
    side = store.samples(run.id, [c for c in GC_COLUMNS if c in names]) if any(c in names for c in GC_COLUMNS) \
        else {}
    events, source = gc_events(side)
    idx, shown = decimate(values)
    ts = TimeSeries(label, run.id, cell.config.unit, idx, shown, len(values), events, values[events], len(events),
                    source)
    if len(events):
        mask = np.zeros(len(values), bool)
        mask[events] = True
        ts.gc_mean = float(values[mask].mean())
        ts.other_mean = float(values[~mask].mean()) if (~mask).any() else None
        if len(events) > MAX_GC_MARKERS:
            keep = np.unique(np.linspace(0, len(events) - 1, MAX_GC_MARKERS).round().astype(np.int64))
            ts.gc_index, ts.gc_values = events[keep], values[events[keep]]
    return ts


ENV_FIELDS = (("target", "target"), ("target_description", "target description"), ("hostname", "host"),
              ("board", "board"), ("cpu_model", "CPU"), ("cpu_count", "CPUs online"),
              ("machine", "architecture"), ("kernel_release", "kernel"), ("preemption", "preemption"),
              ("kernel_cmdline", "kernel command line"),
              ("isolated_cpus", "isolated CPUs"), ("memory_bytes", "memory"), ("loadavg", "load average"),
              ("rtscope_version", "rtscope"), ("python_version", "Python"),
              ("note", "note"))


def env_text(key: str, value) -> str:
    if key == "memory_bytes" and isinstance(value, (int, float)):
        return f"{value / 2 ** 30:.1f} GiB"
    if value in (None, ""):
        return "-"
    return str(value)


def tools_text(runs: list[Run]) -> str:
    """The tool that measured each run, as `show` names it ('tool rtprobe 0.1.0'): 'rtprobe 0.1.0' when one
    tool measured them all, else each with its runs ('rtprobe 0.1.0 (runs 1-3); cyclictest 2.60 (run 4)').
    The machine record's probe_version is not it: a record is shared by runs of several tools."""
    by_tool: dict[str, list[int]] = {}
    for r in runs:
        by_tool.setdefault(tool_text(r.tool, r.tool_version) if r.tool else "-", []).append(r.id)
    if len(by_tool) == 1:
        return next(iter(by_tool))
    return "; ".join(f"{tool} (run{'s' if len(ids) > 1 else ''} {id_ranges(ids)})" for tool, ids in by_tool.items())


def machines(runs: list[Run]) -> list[Machine]:
    """One entry per distinct machine state (host, kernel, CPU, board, governors), with the tools that
    measured its runs."""
    groups: dict[tuple, list[Run]] = {}
    for r in runs:
        e = r.machine or {}
        key = (e.get("target"), e.get("target_description"), e.get("hostname"), e.get("kernel_release"),
               e.get("cpu_model"), e.get("board"), tuple(sorted(set((e.get("governors") or {}).values()))),
               e.get("preemption"), e.get("kernel_cmdline"), e.get("note"))
        groups.setdefault(key, []).append(r)
    out = []
    for members in groups.values():
        e = members[0].machine or {}
        fields = [(head, env_text(k, e[k])) for k, head in ENV_FIELDS if k in e]
        govs = sorted(set((e.get("governors") or {}).values()))
        if govs:
            fields.insert(4, ("CPU governors", ", ".join(govs)))
        fields.append(("tool", tools_text(members)))
        out.append(Machine(fields, [r.id for r in members], sysinfo.warnings(e) if "kernel_release" in e else []))
    return out


@dataclass
class MachineRow:
    field: str
    values: list[str]      # one per machine, "-" where that machine's record lacks the field
    differs: bool          # the machines disagree on it: what a reader compares first


def machine_rows(machines: list[Machine]) -> list[MachineRow]:
    """The machines as one table, a column each (a fleet's boards side by side), fields as rows in the order
    of their first appearance, each row marked where the machines differ."""
    fields: list[str] = []
    for m in machines:
        fields += [k for k, _ in m.fields if k not in fields]
    rows = []
    for f in fields:
        values = [dict(m.fields).get(f, "-") for m in machines]
        rows.append(MachineRow(f, values, len(set(values)) > 1))
    return rows


# --- the whole report --------------------------------------------------------------------------------------

def build(store: Store, runs: list[Run], *, title: str, selection: str, baseline: list[str] | None = None,
          alpha: float = 0.05, parallel: bool = False) -> Report:
    """Everything the report shows; comparisons only when a baseline is given, named by the runs' experiment's
    spec, or `defaults` exists. parallel: the tail analyses in a forked process beside the rest (Exceedances;
    only from a single-threaded process)."""
    check_options(alpha)
    baseline = baseline or spec_baseline(store, runs)
    notes: list[str] = []
    memory_runs = [r for r in runs if is_task_memory(r)]
    other = [r for r in runs if not is_task_memory(r)]
    cells = load_cells(store, other) if other else []
    labels = short_labels(c.config for c in cells)
    groups: dict[tuple, list[Cell]] = {}
    for c in cells:
        groups.setdefault((c.config.workload, c.config.variant, c.config.measure, c.config.unit), []).append(c)
    plot_groups = [Group(f"{workload} {variant}: {measure}", unit, members, short_labels(c.config for c in members))
                   for (workload, variant, measure, unit), members in groups.items()]
    tails = Exceedances([(c, g.labels[c.config]) for g in plot_groups for c in exceedance_cells(g.cells)], parallel)
    for g in plot_groups:
        members, measure, unit = g.cells, g.cells[0].config.measure, g.unit
        _, scale = display_unit(unit)
        g.boxes = [box_of(g.labels[c.config], c.samples) for c in members if len(c.samples)]
        hist_only = [g.labels[c.config] for c in members if not len(c.samples) and c.hist_runs]
        if hist_only:
            g.notes.append("histogram-only (no box): " + ", ".join(hist_only))
        g.bulk = cell_bulk(members, g.labels)
        g.histograms, hist_notes = histogram_curves(members, g.labels, scale, g.bulk)
        g.notes += hist_notes
        g.cdfs = [cv for c in members if (cv := cdf_curve(c, g.labels[c.config])) is not None]
        if measure == "latency":
            g.per_thread = [(g.labels[c.config], curves, thread_bulk) for c in members
                            for curves, thread_bulk in [per_thread_curves(store, c, scale)] if curves]
    with_samples = [c for c in cells if c.sample_runs]
    series = [time_series(store, c, labels[c.config]) for c in with_samples[:MAX_SERIES]]
    omitted = max(0, len(with_samples) - MAX_SERIES)
    task_series = memory_series(store, memory_runs) if memory_runs else []
    units = {r.primary.get("unit", "") for r in memory_runs}
    comparisons = None
    if cells and baseline:
        comparisons = compare(cells, Baseline.parse(baseline), alpha=alpha)
    elif cells and not baseline:
        try:
            comparisons = compare(cells, Baseline.parse(["defaults"]), alpha=alpha)
        except UsageError:    # no configuration without settings: no comparison section, said below
            comparisons = None
        if comparisons is not None and not comparisons.comparisons:
            comparisons = None
        if comparisons is None and len(cells) > 1:
            notes.append("no comparisons: give --baseline NAME=VALUE to compare configurations")
    for c in cells:
        notes += [f"{labels[c.config]}: {n}" for n in c.notes]
    why = why_samples(store, cells, labels)
    why_shares = []
    if why:
        why_shares = (explain_shares.comparison_shares(store, comparisons) if comparisons is not None else
                      explain_shares.cell_shares(store, cells, labels))
    done = iter(tails.results())
    for g in plot_groups:
        g.exceedance = [e for c in exceedance_cells(g.cells) if (e := next(done)) is not None]
    return Report(title, datetime.now(timezone.utc).isoformat(timespec="seconds"), selection, runs,
                  machines(runs), cells, labels, plot_groups, series, omitted, task_series,
                  units.pop() if len(units) == 1 else "bytes", comparisons, notes,
                  experiment_infos(store, runs), lab.monitor_views(runs), lab.fleet_rows(store, runs),
                  tune.tune_views(store, runs), why, why_shares,
                  paper_view.view(store, runs, cells, labels, task_series, memory_runs, alpha) if runs else None)
