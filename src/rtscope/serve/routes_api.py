"""The JSON API under /api/: runs, experiments, comparisons, worst cases and targets.

Each document is the text the CLI's --json prints for the same question, cached until the store changes (a
run's, under its id: a stored run never changes). FastAPI validates the parameters from their types and
describes them in /openapi.json.
"""

from __future__ import annotations

from typing import Annotated, Optional

from fastapi import APIRouter, Query
from fastapi.responses import Response

from ..analysis.compare import ALPHA
from ..analysis.documents import compare_document, comparison_set, explain_document, run_summary
from ..analysis.select import Selection
from . import views
from .shared import Shared, document_text

router = APIRouter()


def json_text(text: str) -> Response:
    return Response(text, media_type="application/json")


@router.get("/api/runs", summary="Stored runs, a page at a time (filtered like `rtscope runs`)")
def api_runs(srv: Shared,
             workload: Annotated[Optional[str], Query(description="Only runs of this workload.")] = None,
             experiment: Annotated[Optional[int], Query(ge=1, description="Only runs of this experiment id.")]
             = None,
             limit: Annotated[int, Query(ge=1, le=1000, description="Runs per page.")] = 100,
             offset: Annotated[int, Query(ge=0, description="Runs to skip.")] = 0):
    def make():
        found, total = srv.store.run_page(workload=workload, experiment_id=experiment, limit=limit, offset=offset)
        return document_text({"total": total, "limit": limit, "offset": offset,
                              "runs": [run_summary(r) for r in found]})
    return json_text(srv.current(("runs", workload, experiment, limit, offset), make))


@router.get("/api/runs/{run_id}", summary="One run: exactly what `rtscope show RUN --json` prints")
def api_run(run_id: int, srv: Shared):
    return json_text(srv.run_doc(run_id)[1])


@router.get("/api/runs/{run_id}/explain",
            summary="Why the run's worst samples were late: exactly what `rtscope explain RUN --json` prints")
def api_explain(run_id: int, srv: Shared):
    def make():
        doc = explain_document(srv.store, views.get_run(srv.store, run_id))
        if doc is None:
            raise views.NotFound(f"run {run_id} has no explained samples (setting explain, docs/explain.md)")
        return document_text(doc)
    return json_text(srv.current(("explain", run_id), make))


@router.get("/api/runs/{run_id}/tail",
            summary="The run's worst case with a bound: exactly what `rtscope tail RUN --json` prints")
def api_run_tail(run_id: int, srv: Shared):
    def make():
        from ..analysis.tail_bound import of_run
        return document_text(of_run(srv.store, views.get_run(srv.store, run_id)).to_json())
    return json_text(srv.current(("tail", run_id), make))


@router.get("/api/experiments/{exp_id}", summary="An experiment: its record, progress and runs")
def api_experiment(exp_id: int, srv: Shared):
    def make():
        exp = views.get_experiment(srv.store, exp_id)
        runs = srv.store.runs(experiment_id=exp_id)
        parsed = exp.spec.get("parsed") or {}
        return document_text({"experiment": {
            "id": exp.id, "name": exp.name, "description": parsed.get("description", ""),
            "tags": parsed.get("tags") or [], "status": exp.status, "created_at": exp.created_at,
            "finished_at": exp.finished_at, "seed": exp.seed, "scale": exp.scale, "planned": len(exp.plan),
            "stored": len(runs), "monitor": (exp.spec_path or "").startswith(views.MONITOR_PREFIX)},
            "runs": [run_summary(r) for r in runs]})
    return json_text(srv.current(("experiment-doc", exp_id), make))


@router.get("/api/experiments/{exp_id}/compare",
            summary="Each configuration against a baseline: exactly `rtscope compare --experiment ID --json`")
def api_compare(exp_id: int, srv: Shared,
                baseline: Annotated[Optional[list[str]], Query(
                    description="NAME=VALUE of a setting, parameter, workload, variant or runtime (repeatable),"
                                " or `defaults`: compare's --baseline")] = None,
                alpha: Annotated[float, Query(gt=0, lt=1)] = ALPHA, per_thread: bool = False):
    def make():
        views.get_experiment(srv.store, exp_id)
        cs = comparison_set(srv.store, Selection(experiment=str(exp_id)), baseline, alpha=alpha,
                            per_thread=per_thread)
        return document_text(compare_document(srv.store, cs))
    return json_text(srv.current(("compare", exp_id, tuple(baseline or ()), alpha, per_thread), make))


@router.get("/api/experiments/{exp_id}/tail",
            summary="One configuration's worst case with a bound: exactly "
                    "`rtscope tail --experiment ID --where NAME=VALUE --run RUN --json`")
def api_experiment_tail(exp_id: int, srv: Shared,
                        where: Annotated[Optional[list[str]], Query(
                            description="NAME=VALUE of a setting, parameter, workload, variant or runtime "
                                        "(repeatable): tail's --where; the selection must leave one "
                                        "configuration")] = None,
                        run: Annotated[Optional[list[int]], Query(
                            description="Only this run id (repeatable): tail's --run")] = None):
    def make():
        from ..analysis.select import select_runs
        from ..analysis.tail_bound import of_runs
        views.get_experiment(srv.store, exp_id)
        sel = Selection.from_cli(str(exp_id), where=where, run_ids=run)
        return document_text(of_runs(srv.store, select_runs(srv.store, sel)).to_json())
    return json_text(srv.current(("experiment-tail", exp_id, tuple(where or ()), tuple(run or ())), make))


@router.get("/api/targets", summary="Every target that has runs: kind, description, runs, last seen, machine")
def api_targets(srv: Shared):
    return json_text(srv.current(("targets",), lambda: document_text([t.to_json() for t in srv.targets()])))
