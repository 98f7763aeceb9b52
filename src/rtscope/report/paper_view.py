"""The paper's view of a study's experiment: its own table, published figures beside measured ones, and its claims.

A report of the runs of one experiment whose spec has a `[paper]` table or `[[claim]]` tables opens with:
the study's table in its layout (analysis/paper_published.py: AVG MAX VAR STDEV; min avg max above the latency
histograms; benchee's ips, average, deviation, median, 99th %; mean time per pass per environment; memory per
task with slope, intercept, r and r²), each measured figure with the published one beside it; then the claims
with their verdicts, judged as `rtscope reproduce SPEC --experiment ID` judges them (experiment/claim_runs.py).
The spec is the one stored with the experiment, re-read at the experiment's scale. Measured figures pool the
runs of a configuration, as the study's tables did; the claims' verdicts take the run as the unit. Each cell
carries its texts and its numbers, so that `report --tables` writes the same tables as files (report/tables.py).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from ..analysis.claims import UNITS, Judgement, machine_text, memory_slope, needed_command
from ..analysis.compare import Cell, load_cells
from ..analysis.defaults import ALPHA, POOLED
from ..analysis.fit import Series
from ..analysis.paper_published import LAYOUTS, UNITLESS, Published, hardware_of, published_figures
from ..analysis.results import display_unit, fmt, id_ranges
from ..analysis.select import Configuration, value_matches
from ..analysis.storage import MODES, build_tables, human_time
from ..errors import UsageError
from ..store import Run, Store
from ..words import unit_word

if TYPE_CHECKING:       # the spec package imports the runtimes and targets: only a study's report needs it
    from ..experiment.spec import Spec


@dataclass
class PaperRow:
    label: str
    runs: str
    cells: list[tuple[str, str]]       # per column: (measured, published) as shown ("" when none)
    values: list[tuple[float | None, float | None]]   # the same as numbers in the column's unit (None: none)


@dataclass
class PaperTable:
    title: str
    heads: list[str]
    rows: list[PaperRow]
    row_head: str = "configuration"
    value_heads: list[str] | None = None   # the columns with the unit of `values` when `heads` do not say it


@dataclass
class PaperView:
    spec: str                          # the spec's name
    layout: str
    source: str
    hardware: str                      # where the published figures were measured
    machine: str                       # where these runs were
    tables: list[PaperTable] = field(default_factory=list)
    histograms: bool = False           # latency: the overlaid histograms are drawn below the table
    claims: list[Judgement] = field(default_factory=list)
    commands: dict[str, str] = field(default_factory=dict)   # claim id -> the command that would decide it
    alpha: float = ALPHA
    notes: list[str] = field(default_factory=list)


def experiment_spec(store: Store, runs: list[Run]) -> tuple[Spec, str] | None:
    """The spec stored with the runs' one experiment, re-read at its scale, and `rtscope reproduce`'s command for
    it; None when the runs are of no or several experiments, or its spec has neither paper nor claims."""
    ids = {r.experiment_id for r in runs}
    if len(ids) != 1 or None in ids:
        return None
    from ..experiment import execute as experiment      # here: it imports the runtimes and SQLAlchemy
    from ..experiment.spec import parse
    exp = experiment.get(store, ids.pop())
    text = exp.spec.get("text")
    if not text:
        return None
    try:
        spec = parse(text, exp.spec_path or exp.name, exp.spec.get("scale"), exp.spec.get("targets"))
    except UsageError:      # a spec this version no longer reads: the report goes without the paper's view
        return None
    if spec.paper is None and not spec.claims:
        return None
    command = f"rtscope reproduce {exp.spec_path or exp.name}" + (f" --scale {spec.scale}" if spec.scale else "")
    return spec, command


class Lookup:
    """The published figures of a configuration: a figure names the spec cells its items select; runs the spec
    made carry their cell's key; other runs (imported) are matched by their settings."""

    def __init__(self, spec: Spec):
        from ..experiment.spec.claim_table import request_value
        self.figures = published_figures(spec.paper, spec.claims)
        self.keys = [{c.key for c in spec.cells
                      if all(value_matches(request_value(c.request, n), v) for n, v in p.items)}
                     for p in self.figures]

    def of(self, runs: list[Run]) -> dict[str, Published]:
        cells = {getattr(r, "cell", None) for r in runs} - {None}
        config = Configuration.of(runs[0])
        out: dict[str, Published] = {}
        for p, keys in zip(self.figures, self.keys):
            if p.figure in out:
                continue
            if (cells & keys) if cells else all(value_matches(config.get(n), v) for n, v in p.items):
                out[p.figure] = p
        return out


def _unit(paper_unit: str, stored: str) -> tuple[str, float]:
    """The unit figures are shown in and its size in the stored unit: the paper's when it is one of the stored
    unit's, else µs for ns and the stored unit."""
    if paper_unit in UNITS and UNITS[paper_unit][0] == stored:
        return unit_word(paper_unit), UNITS[paper_unit][1]
    shown, scale = display_unit(stored)
    return shown, 1 / scale


def _text(figure: str, value: float | None, factor: float) -> str:
    if value is None:
        return "–"
    if figure == "ips":
        return f"{value:,.2f}"
    if figure == "deviation":
        return f"±{value:.2f}%"
    if figure in ("r", "r2"):
        return f"{value:.4f}"
    return fmt(figure, value, 1 / factor)


def _measured(figure: str, stats: dict) -> float | None:
    mean, stdev = stats.get("mean"), stats.get("stdev")
    if figure == "ips":
        return 1e9 / mean if mean else None
    if figure == "deviation":
        return 100.0 * stdev / mean if mean and stdev is not None else None
    return stats.get({"median": "p50"}.get(figure, figure))


def _shown(figure: str, value: float | None, factor: float) -> float | None:
    """A figure in the stored unit as a number in the shown unit (a variance in its square)."""
    if value is None or figure in UNITLESS:
        return value
    return value / (factor * factor) if figure == "var" else value / factor


def _row(label: str, runs: list[Run], figures: list[tuple[str, float | None, Published | None]],
         factor: float) -> PaperRow:
    """A row of (figure, measured in the stored unit, published) per column."""
    cells, values = [], []
    for figure, measured, published in figures:
        pub = None if published is None else (published.stored if published.unit else
                                               published.value * (1 if figure in UNITLESS else factor))
        cells.append((_text(figure, measured, factor), "" if pub is None else _text(figure, pub, factor)))
        values.append((_shown(figure, measured, factor), _shown(figure, pub, factor)))
    return PaperRow(label, _ids(runs), cells, values)


def stats_tables(cells: list[Cell], labels: dict, layout: str, unit: str, lookup: Lookup) -> list[PaperTable]:
    """stats, latency, benchee: a row per configuration, a (measured, published) pair per column."""
    columns = LAYOUTS[layout]
    by_unit: dict[str, list[Cell]] = {}
    for c in cells:
        by_unit.setdefault(c.config.unit, []).append(c)
    out = []
    for stored, members in by_unit.items():
        shown, factor = _unit(unit, stored)
        heads = [h + ("" if f in UNITLESS else f" ({shown}²)" if f == "var" else f" ({shown})") for f, h in columns]
        rows = []
        for c in members:
            pub = lookup.of(c.runs)
            rows.append(_row(labels[c.config], c.runs, [(f, _measured(f, c.stats), pub.get(f)) for f, _ in columns],
                             factor))
        rows.sort(key=lambda r: not any(p for _, p in r.cells))     # the study's rows first
        out.append(PaperTable(f"{members[0].config.workload} {members[0].config.measure}, {POOLED}", heads, rows,
                              value_heads=[f"{h} ({UNITLESS[f]})" if UNITLESS.get(f) else h
                                           for (f, _), h in zip(columns, heads)]))
    return out


def storage_tables(store: Store, runs: list[Run], lookup: Lookup) -> list[PaperTable]:
    """storage: per file configuration, the modes as rows and the environments as columns (analysis/storage)."""
    from ..analysis.storage import GROUP_PARAMS
    out = []
    for t in build_tables(store, [r for r in runs if r.workload == "storage"]):
        rows = []
        for variant, label in MODES:
            cells = [t.cells.get((variant, c)) for c in t.columns]
            if not any(cells):
                continue
            pubs = [lookup.of(cell.runs).get("mean") if cell else None for cell in cells]
            measured = [cell.pass_mean if cell else None for cell in cells]
            published = [pub.stored if pub else None for pub in pubs]
            rows.append(PaperRow(label, _ids([r for c in cells if c for r in c.runs]),
                                 [("" if cell is None else human_time(m), "" if p is None else human_time(p))
                                  for cell, m, p in zip(cells, measured, published)],
                                 list(zip(measured, published))))
        size = t.params.get(GROUP_PARAMS[0])
        out.append(PaperTable(f"mean time per pass, {size:,} B file" if isinstance(size, int) else
                              "mean time per pass", list(t.columns), rows, "mode",
                              [f"{c} (ns)" for c in t.columns]))
    return out


def tasks_table(series: list[Series], runs: list[Run], unit: str, lookup: Lookup) -> list[PaperTable]:
    """tasks: per task model, the least-squares fit of memory against tasks."""
    by_id = {r.id: r for r in runs}
    shown, factor = _unit(unit, "bytes")
    heads = [f"memory per task ({shown}/task)", f"intercept ({shown})", "r", "r²"]
    rows = []
    for s in series:
        f = s.fit
        measured = {"memory_per_task": f.slope if f else None, "intercept": f.intercept if f else None,
                    "r": f.r if f else None, "r2": f.r2 if f else None}
        mine = [by_id[i] for i in s.run_ids if i in by_id]
        pub = lookup.of(mine)
        rows.append(_row(s.label, mine, [(k, measured[k], pub.get(k)) for k, _ in LAYOUTS["tasks"]], factor))
    return [PaperTable("memory per task: least-squares fits", heads, rows, "task model")]


def claim_rows(v: PaperView) -> list[dict]:
    """The claims as the report's claims table shows them (HTML and table files): texts per column."""
    return [{"id": j.claim.id, "text": j.claim.text, "source": j.claim.source, "metric": j.metric_text,
             "expect": j.claim.expect_text, "published": j.published_text(), "measured": j.values_text(),
             "runs": f"{j.runs[1]} vs {j.runs[0]}" if j.claim.two_sided else str(j.runs[0]),
             "interval": j.interval_text(), "verdict": j.verdict,
             "why": "; ".join(x for x in (
                 f"{j.runs_needed} runs per configuration would decide it at 80 % power"
                 if j.runs_needed is not None else "", j.reason,
                 f"`{v.commands[j.claim.id]}`" if j.claim.id in v.commands else "") if x)}
            for j in v.claims]


def _ids(runs: list[Run]) -> str:
    return id_ranges([r.id for r in runs])


def view(store: Store, runs: list[Run], cells: list[Cell], labels: dict, task_series: list[Series],
         memory_runs: list[Run], alpha: float) -> PaperView | None:
    """The paper's view of these runs, or None when they are not one study experiment's (module doc)."""
    found = experiment_spec(store, runs)
    if found is None:
        return None
    spec, command = found
    paper, lookup = spec.paper, Lookup(spec)
    layout = paper.layout if paper else ""
    v = PaperView(spec.name, layout, paper.source if paper else "", hardware_of(paper, spec.claims) or "not stated",
                  machine_text(runs[0].machine or {}), alpha=alpha)
    unit = paper.unit if paper else ""
    if layout in ("stats", "latency", "benchee"):
        v.tables = stats_tables(cells, labels, layout, unit, lookup)
        v.histograms = layout == "latency"
    elif layout == "storage":
        v.tables = storage_tables(store, runs, lookup)
    elif layout == "tasks":
        v.tables = tasks_table(task_series, runs, unit, lookup) if task_series else []
    if spec.claims:
        claim_cells = cells + (load_cells(store, memory_runs) if memory_runs else [])
        from ..experiment import claim_runs
        v.claims, aside = claim_runs.judge_stored(spec, claim_cells, memory_slope(store), alpha=alpha,
                                                  command=command)
        v.commands = {j.claim.id: cmd for j in v.claims if (cmd := needed_command(j, command, aside))}
    return v
