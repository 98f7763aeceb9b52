"""rtscope recommend: the configuration that best meets a goal, with its evidence and its cost."""

from __future__ import annotations

from typing import Annotated

import typer

from ..analysis.defaults import ALPHA, GOALS
from .common import DbOption, JsonOption, app, console, err_console, escape, layout_width, print_json, wrapped
from .compare import (AlphaOpt, BaselineOpt, Experiment, PerThreadOpt, RunIds, Runtime, Tag, Variant, Where, Workload,
                      comparisons, print_unmatched_and_warnings, selection)


@app.command()
def recommend(
    goal: Annotated[str, typer.Option(help=f"What to minimise: {', '.join(GOALS)}.")] = "p99",
    baseline: BaselineOpt = None,
    experiment: Experiment = None, workload: Workload = None, variant: Variant = None, runtime: Runtime = None,
    tag: Tag = None, where: Where = None, run: RunIds = None,
    alpha: AlphaOpt = ALPHA,
    per_thread: PerThreadOpt = False, db: DbOption = None, json_out: JsonOption = False,
) -> None:
    """The configuration that best meets a goal, its evidence and its cost on the other metrics."""
    from ..analysis.recommend import check_goal, recommend as make_recommendations
    check_goal(goal)
    cs = comparisons(db, selection(experiment, workload, variant, runtime, tag, where, run), baseline, alpha,
                     per_thread, fallback=["defaults"])
    recs = make_recommendations(cs, goal)
    labels = cs.labels
    if json_out:
        print_json({"goal": goal, "alpha": alpha, "recommendations": [r.to_json(labels) for r in recs],
                    "warnings": cs.warnings,
                    "unmatched": [{"configuration": labels[c.config], "reason": w} for c, w in cs.unmatched]})
        return
    width = layout_width()
    if not recs:
        console.print("nothing to recommend: no configuration could be compared with a baseline")
    for rec in recs:
        base = rec.baseline.config
        head = f"{base.workload} {base.variant}, minimise {goal}:"
        text = escape(wrapped(f"{head} {rec.summary(labels)}", width))
        console.print(f"[bold]{escape(head)}[/]{text[len(escape(head)):]}", soft_wrap=True)
        if rec.best is not None:
            console.print(escape(wrapped("cost: " + ", ".join(rec.cost()), width, indent="  ")), soft_wrap=True)
        for other in rec.others(labels):
            console.print(escape(wrapped(other, width, indent="  ")), soft_wrap=True)
    print_unmatched_and_warnings(cs, err_console)
