"""What each page shows, computed from the store with the report's own pieces (report.model builds the
figures' data, report.html draws the same plotly figures and tables, report.lab the monitoring views).

Every function returns plain data for a jinja2 template (autoescaped: store text is shown as text).
"""

from __future__ import annotations

from dataclasses import dataclass

from .. import sysinfo
from ..analysis.recommend import GOALS, recommend
from ..analysis.results import DISPLAY, display_unit, fmt
from ..analysis.select import not_in_force, setting_text, value_text
from ..errors import UsageError
from ..experiment import execute as experiment, monitor
from ..report import html as report_html, lab, model
from ..store import Run, Store

LATEST_RESULTS = 12
EXPERIMENTS_LISTED = 50
MONITOR_ROWS = 20          # the newest intervals in the monitor page's table
MONITOR_PREFIX = "monitor:"  # how `rtscope monitor` names its experiments' identity


class NotFound(LookupError):
    """An id the store does not hold: 404."""


def settings_text(settings: dict, run: Run | None = None) -> str:
    """`k=v, ...`; with the run they are of, a setting it did not get says what was in force."""
    in_force = {k: f for k, _, f in not_in_force(run)} if run is not None else {}
    return ", ".join(setting_text(k, v, in_force) for k, v in sorted(settings.items())) or "defaults"


def target_of(settings: dict) -> str:
    return str(settings.get("target", "local"))


def get_run(store: Store, run_id: int) -> Run:
    found = store.runs(ids=[run_id])
    if not found:
        raise NotFound(f"no run {run_id} in this store")
    return found[0]


def get_experiment(store: Store, exp_id: int) -> experiment.Experiment:
    if store.experiment_row(exp_id) is None:
        raise NotFound(f"no experiment {exp_id} in this store")
    return experiment.get(store, exp_id)


# --- the lab ----------------------------------------------------------------------------------------------

@dataclass
class TargetRow:
    name: str
    kind: str
    description: str
    runs: int
    last_seen: str
    last_run: int
    machine: dict

    def to_json(self) -> dict:
        return {"name": self.name, "kind": self.kind, "description": self.description, "runs": self.runs,
                "last_seen": self.last_seen, "last_run": self.last_run, "machine": self.machine}

    @property
    def machine_text(self) -> str:
        m = self.machine
        parts = [m.get("hostname"), m.get("board") or m.get("cpu_model"), m.get("machine"),
                 m.get("kernel_release") and f"kernel {m['kernel_release']}", m.get("preemption")]
        return ", ".join(str(p) for p in parts if p) or "-"


def targets(newest: dict, machines: dict[int, dict]) -> list[TargetRow]:
    """Every target that has runs (newest: per target its runs and newest run, serve/origins.py): its kind and
    description from its newest run's machine record (machines: run id -> machine)."""
    rows = []
    for name in sorted(newest):
        t = newest[name]
        machine = machines.get(t.run_id) or {}
        rows.append(TargetRow(name, str(machine.get("target_kind") or ("local" if name == "local" else "-")),
                              str(machine.get("target_description") or ""), t.runs, t.stored_at, t.run_id,
                              machine))
    return rows


def experiment_rows(store: Store, limit: int = EXPERIMENTS_LISTED) -> list[dict]:
    out = []
    for e in store.experiment_rows()[:limit]:
        identity = e["spec_path"] or ""
        planned = len(e["plan"] or [])
        out.append({"id": e["id"], "name": e["name"], "status": e["status"], "created_at": e["created_at"],
                    "finished_at": e["finished_at"], "planned": planned, "stored": e["stored"],
                    "progress": f"{e['stored']}/{planned}" if planned else str(e["stored"]),
                    "percent": round(100 * e["stored"] / planned) if planned else None,
                    "monitor": identity.startswith(MONITOR_PREFIX),
                    "target": identity[len(MONITOR_PREFIX):] if identity.startswith(MONITOR_PREFIX) else None})
    return out


def common_settings(runs: list[Run]) -> dict:
    """The settings every one of several runs recorded with the same value (a BEAM run records a dozen:
    elixir_version, vm_flags ...): the lab page says them once instead of in every row."""
    if len(runs) < 2:
        return {}
    first = runs[0].settings
    return {k: v for k, v in first.items()
            if all(k in r.settings and value_text(r.settings[k]) == value_text(v) for r in runs[1:])}


def latest_results(runs: list[Run], docs: list[dict]) -> tuple[list[dict], str]:
    """The lab page's latest results: each row with the settings that differ between the listed runs, and
    the settings common to all of them as one text ('' when there are none)."""
    common = common_settings(runs)
    return [headline(r, d, common) for r, d in zip(runs, docs)], settings_text(common, runs[0]) if common else ""


def headline(run: Run, doc: dict, common: dict | None = None) -> dict:
    """A run's row: its settings without those in `common` (the ones every listed run shares)."""
    shown, scale = display_unit(run.primary["unit"])
    st = doc["stats"]
    own = {k: v for k, v in run.settings.items() if k not in (common or {})}
    settings = settings_text(own, run) if own or not run.settings else "only the common ones"
    return {"id": run.id, "label": run.label, "target": target_of(run.settings), "settings": settings,
            "stored_at": run.stored_at, "experiment_id": run.experiment_id, "unit": shown,
            "n": fmt("n", st.get("n"), scale), "p99": fmt("p99", st.get("p99"), scale),
            "max": fmt("max", st.get("max"), scale)}


# --- one run ----------------------------------------------------------------------------------------------

def stats_rows(st: dict, scale: float) -> list[tuple[str, str]]:
    return [(head, fmt(key, st.get(key), scale)) for key, head in DISPLAY]


def run_page(store: Store, run: Run, doc: dict) -> dict:
    """The run's statistics (show's numbers: `doc` is its show document), its figures, settings and machine."""
    shown, scale = display_unit(run.primary["unit"])
    rep = model.build(store, [run], title=f"run {run.id}", selection=f"run {run.id}")
    plots = report_html.Plots()
    parts = report_html.sections(rep, plots)
    threads = [{"label": f"thread {p['thread']}" + ("" if p["cpu"] is None else f" (CPU {p['cpu']})"),
                "cells": [fmt(k, p["stats"].get(k), scale) for k, _ in DISPLAY], "overflow": p["overflow"]}
               for p in doc["threads"]]
    notes = list(run.trailer.get("notes", [])) + (sysinfo.warnings(run.machine) if "kernel_release" in run.machine
                                                  else [])
    return {"run": run, "doc": doc, "unit": shown, "stats": stats_rows(doc["stats"], scale),
            "resolution": None if doc["resolution"] is None else fmt("min", doc["resolution"], scale),
            "threads": threads, "heads": [h for _, h in DISPLAY], "settings": sorted(run.settings.items()),
            "params": sorted(run.params.items()), "machines": rep.machines, "plots": plots.entries,
            "groups": parts["groups"], "series": parts["series"], "notes": notes + rep.notes,
            "why": parts["why"], "why_table": report_html.why_table(rep), "explained": bool(store.causes(run.id)),
            "counters": sorted((run.trailer.get("counters") or {}).items()),
            "tails": [(f"run {run.id}", f"/api/runs/{run.id}/tail")] if any(g.exceedance for g in rep.groups) else [],
            "tags": run.tags, "target": target_of(run.settings)}


# --- one experiment ---------------------------------------------------------------------------------------

def baseline_choices(runs: list[Run]) -> list[str]:
    """`defaults` and every NAME=VALUE of a setting that varies between the runs: what the page offers as
    the baseline (compare --baseline takes the same items)."""
    values: dict[str, set[str]] = {}
    for r in runs:
        for k, v in r.settings.items():
            values.setdefault(k, set()).add(value_text(v))
    names = [k for k, vs in sorted(values.items()) if len(vs) > 1 or any(k not in r.settings for r in runs)]
    return ["defaults"] + [f"{k}={v}" for k in names for v in sorted(values[k])]


def experiment_page(store: Store, exp_id: int, baseline: list[str] | None) -> dict:
    exp = get_experiment(store, exp_id)
    runs = store.runs(experiment_id=exp_id)
    parsed = exp.spec.get("parsed") or {}
    tags = parsed.get("tags") or []
    problem = None
    try:
        rep = model.build(store, runs, title=exp.name, selection=f"experiment {exp_id}", baseline=baseline)
    except UsageError as e:          # a baseline that matches nothing: say why, show the rest
        if not baseline:
            raise
        problem = str(e)
        rep = model.build(store, runs, title=exp.name, selection=f"experiment {exp_id}")
    plots = report_html.Plots()
    parts = report_html.sections(rep, plots)
    cs = rep.comparisons
    recommendations = []
    if cs is not None and cs.comparisons:
        for goal in GOALS:
            for rec in recommend(cs, goal):
                recommendations.append({"goal": goal, "summary": rec.summary(cs.labels),
                                        "cost": ", ".join(rec.cost()) if rec.best is not None else ""})
    return {"exp": exp, "final": exp.status == experiment.FINISHED, "description": str(parsed.get("description", "")),
            "tags": [str(t) for t in (tags if isinstance(tags, list) else [tags])],
            "monitor": (exp.spec_path or "").startswith(MONITOR_PREFIX), "runs": runs, "planned": len(exp.plan),
            "stats_tables": report_html.stats_tables(rep), "comparisons": report_html.comparison_rows(rep),
            "baseline": cs.baseline.text if cs else None, "chosen": baseline or [], "problem": problem,
            "choices": baseline_choices(runs), "recommendations": recommendations,
            "unmatched": [(cs.labels[c.config], why) for c, why in cs.unmatched] if cs else [],
            "warnings": cs.warnings if cs else [], "plots": plots.entries, "groups": parts["groups"],
            "why": parts["why"], "why_table": report_html.why_table(rep),
            "series": parts["series"], "task": parts["task"], "notes": rep.notes, "machines": rep.machines,
            "labels": {r.id: rep_label(rep, r) for r in runs}, "tails": tail_links(rep, exp_id)}


def tail_links(rep: model.Report, exp_id: int) -> list[tuple[str, str]]:
    """(configuration, its tail analysis in the API) for each configuration an exceedance plot shows: its
    runs by id, so the selection is exactly that configuration."""
    out = []
    for g in rep.groups:
        if g.exceedance:
            out += [(g.labels[c.config], f"/api/experiments/{exp_id}/tail?"
                     + "&".join(f"run={r.id}" for r in c.runs)) for c in g.cells]
    return out


def rep_label(rep: model.Report, run: Run) -> str:
    """The configuration label the tables use for this run's cell."""
    for c in rep.cells:
        if any(r.id == run.id for r in c.runs):
            return rep.labels[c.config]
    return run.label


# --- a monitoring -----------------------------------------------------------------------------------------

def monitor_page(store: Store, exp_id: int) -> dict:
    exp = get_experiment(store, exp_id)
    runs = store.runs(experiment_id=exp_id)
    if not (exp.spec_path or "").startswith(MONITOR_PREFIX) and not any("monitor" in r.tags for r in runs):
        raise NotFound(f"experiment {exp_id} is not a monitoring (see /experiments/{exp_id})")
    views = lab.monitor_views(runs)
    plots = report_html.Plots()
    figures = []
    for v in views:
        figures.append(plots(report_html.monitor_series_figure(v), "The maximum of each interval per CPU; shaded: "
                                                                   "intervals under load."))
        figures.append(plots(report_html.monitor_histogram_figure(v), "Every sample of every interval, per CPU, "
                                                                      "in 1 µs bins (log y), as OSADL plots its "
                                                                      "farm's latency."))
    rows = []
    by_index = {r.plan_index: r for r in runs}
    for v in views:
        for index, end, load, maxima in reversed(v.intervals[-MONITOR_ROWS:]):
            run = by_index.get(index)
            rows.append({"interval": index + 1, "end": end, "load": load,
                         "maxima": ", ".join(f"CPU {c}: {m / 1000:,.1f}" for c, m in sorted(maxima.items())),
                         "run": run.id if run else None,
                         "why": monitor.top_cause(store, run) if run and run.settings.get("explain") else None})
    stored = sum(len(v.intervals) for v in views)
    return {"exp": exp, "final": exp.status == experiment.FINISHED, "target": (exp.spec_path or "")[len(MONITOR_PREFIX):] or (views[0].target if views else "?"),
            "planned": len(exp.plan), "stored": stored, "plots": plots.entries, "figures": figures, "rows": rows}
