"""The JSON documents of stored results: what `runs --json`, `show --json` and `compare --json` print, and what
`rtscope serve`'s API returns — built here once, so that both give the same document for the same arguments."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:  # `runs --json` needs none of the numbers: numpy and scipy are imported by what uses them
    from ..store import Run, Store
    from .compare import ComparisonSet
    from .distribution import Distribution
    from .select import Selection


def run_summary(run: Run) -> dict:
    """One run's identity and metadata (a row of `runs --json`)."""
    return {"id": run.id, "workload": run.workload, "variant": run.variant, "runtime": run.runtime,
            "settings": run.settings, "params": run.params, "n_samples": run.n_measured,
            "stored_samples": run.n_samples,
            "started_at": run.started_at, "finished_at": run.finished_at, "tags": run.tags,
            "experiment_id": run.experiment_id, "cell": run.cell, "repetition": run.repetition, **_started(run)}


def _started(run: Run) -> dict:
    """`started_at_source`: null when the tool or rtscope recorded the start, `file modified` (an import's file
    time), `not recorded` (then `started_at` is null)."""
    source = run.started_from
    return {"started_at_source": source, **({"started_at": None} if source == "not recorded" else {})}


def _tool_version(run: Run) -> dict:
    """`tool_version`, and `tool_version_source`: null when the file records the version, `not recorded` (then
    `tool_version` is null: an import whose tool prints none), as `started_at_source` says of the start."""
    recorded = run.tool_version not in (None, "", "unknown")
    return {"tool_version": run.tool_version if recorded else None,
            "tool_version_source": None if recorded else "not recorded"}


def show_document(store: Store, run: Run, dist: Distribution | None = None, *, worst_case: bool = True) -> dict:
    """`show --json`: the run, its machine record, statistics, resolution, threads and worst case (the largest
    sample and the tail's bound at p = 1e-9 per sample; null for a run not measured in ns). worst_case=False:
    without it (a tail fit per run: for a page that shows many runs' statistics only)."""
    from . import distribution, stats, threads
    from .tail_bound import run_worst_case
    dist = distribution.of_run(store, run) if dist is None else dist
    summary = run_summary(run)
    summary.update(environment=run.machine, trailer=run.trailer, tool=run.tool, **_tool_version(run),
                   columns=run.columns, unit=run.primary["unit"],
                   percentile_definition=dist.percentile_definition if dist else stats.PERCENTILE_DEFINITION)
    return {"run": summary, "settings": run.settings, "stats": dist.stats if dist else stats.summarize([]),
            "resolution": dist.resolution if dist else None,
            "threads": [p.to_json() for p in threads.breakdown(store, run)],
            **({"worst_case": run_worst_case(store, run, dist).to_json() if run.primary["unit"] == "ns" else None}
               if worst_case else {})}


def comparison_set(store: Store, sel: Selection, baseline: list[str] | None, *, alpha: float,
                   per_thread: bool = False, baseline_sel: Selection | None = None,
                   tail: bool = False, fallback: list[str] | None = None) -> ComparisonSet:
    """The comparison `compare` prints (its `--json` is this set's to_json()). With `baseline_sel`, the
    baselines are those runs, stored earlier (compare.compare_with_earlier); `baseline` is then optional.
    Without either, the baseline the runs' experiment named in its spec (compare.spec_baseline), else
    `fallback` (recommend's: `defaults`). tail: with the tail row (compare --tail)."""
    from .compare import compare_runs, spec_baseline
    from .select import select_runs
    if baseline_sel is None:
        runs = select_runs(store, sel)
        return compare_runs(store, runs, baseline or spec_baseline(store, runs) or fallback or [],
                            per_thread=per_thread, alpha=alpha, tail=tail)
    return earlier_comparison_set(store, sel, baseline_sel, baseline, alpha=alpha, per_thread=per_thread, tail=tail)


def earlier_comparison_set(store: Store, sel: Selection, baseline_sel: Selection, baseline: list[str] | None, *,
                           alpha: float, per_thread: bool = False, tail: bool = False) -> ComparisonSet:
    """The runs of `sel` compared with the runs of `baseline_sel` (another experiment, a tag); runs in both
    are baseline runs only."""
    from ..errors import UsageError
    from .compare import Baseline, compare_with_earlier, load_cells
    from .select import select_runs
    source = baseline_sel.describe()
    try:
        base_runs = select_runs(store, baseline_sel)
    except UsageError as e:
        raise UsageError(f"baseline runs ({source}): {e}") from None
    base_ids = {r.id for r in base_runs}
    runs = [r for r in select_runs(store, sel) if r.id not in base_ids]
    if not runs:
        raise UsageError(f"every selected run ({sel.describe()}) is a baseline run ({source}): select the runs "
                         "to check with --experiment, --tag, --where or --run")
    return compare_with_earlier(load_cells(store, runs, per_thread=per_thread),
                                load_cells(store, base_runs, per_thread=per_thread),
                                Baseline.parse(baseline) if baseline else None, source=source, alpha=alpha,
                                tail=tail)


def compare_document(store: Store, cs: ComparisonSet, shares: list | None = None) -> dict:
    """`compare --json`: the comparison set, and the cause shares of its explained runs where there are any
    (`shares`: analysis.explain_shares.comparison_shares's, when the caller has them already)."""
    from . import explain_shares
    shares = explain_shares.comparison_shares(store, cs) if shares is None else shares
    return {**cs.to_json(), **({"causes": [c.to_json() for c in shares]} if shares else {})}


def explain_document(store: Store, run: Run, worst: int | None = None) -> dict | None:
    """`explain --json`: the run's explained samples (the `worst` largest), each with its causes, and the shares
    of the excess above the run's median per cause kind and culprit; None when the run was not explained."""
    from . import explain_shares
    explained = store.causes(run.id)
    if not explained:
        return None
    explained = explained[:worst] if worst is not None else explained
    median = explain_shares.run_median(store, run) or 0
    return {"run": run.id, "reference": {"what": "median", "value_ns": median},
            "trace": run.trailer.get("explain"),
            "samples": [{"index": s["sample_index"], "value_ns": s["value_ns"], "cpu": s["cpu"],
                         "thread": s["thread"], "scheduler": s.get("scheduler"), "start_ns": s["start_ns"],
                         "causes": [explain_shares.shown_cause(c) for c in s.get("causes", [])],
                         "self_ns": s.get("self_ns", 0), "idle_ns": s.get("idle_ns", 0),
                         "unexplained_ns": s["unexplained_ns"], "measuring_pid": s.get("measuring_pid"),
                         "note": s.get("note")} | ({"cycle": s["cycle"]} if "cycle" in s else {}) for s in explained],
            "summary": [r.to_json() for r in explain_shares.shares(explained, median)],
            "steal": explain_shares.steal(run, explained, median)}
