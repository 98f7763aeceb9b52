"""What a finished tune says: its JSON document (`rtscope tune --json`), and the matrix spec of its confirmation.

The document holds the best configuration rtscope can prove and the baseline, the confirmation's rows
(each metric: baseline, value, CI, p, Holm-corrected p, verdict), the knobs' importance, and the search
itself: every candidate with its race runs, and the best goal value so far after each race run.
"""

from __future__ import annotations

import json
from typing import Any

from ...analysis.compare import STAT_KEY
from ...targets import LOCAL
from .confirm import BASELINE, RUNNER_UP, WINNER, Verdict
from .race import Standing


def build(tune, field_: list[Standing], chosen: dict[str, int], v: Verdict, importance: dict[str, float],
          slots: list[dict], runs: list, race_ended: str) -> dict:
    by_number = {s.number: s for s in field_}

    def config(number: int | None) -> dict | None:
        if number is None:
            return None
        s = by_number[number]
        req = tune.space.request(s.knobs)
        return {"candidate": number, "settings": s.knobs, "cell": s.cell_key,
                "run": {"workload": req.workload, "variant": req.variant, "runtime": req.runtime,
                        "params": req.params, "settings": req.settings}}

    shown = v.shown()
    per_run = {}
    for s in field_:
        for run_id, st in s.per_run.items():
            per_run[run_id] = st.get(STAT_KEY[tune.goal])
    best_so_far, best = [], None
    for slot in slots:
        if slot["phase"] != "race" or slot["run_id"] is None:
            continue
        value = per_run.get(slot["run_id"])
        if value is not None:
            best = value if best is None else min(best, value)
        best_so_far.append({"plan_index": slot["plan_index"], "run": slot["run_id"],
                            "candidate": slot["candidate"], "value": value, "best": best})
    goal_row = shown.row(tune.goal) if shown else None
    return {
        "tune": tune.id, "experiment": tune.experiment_id, "name": tune.name, "target": tune.target,
        "goal": tune.goal, "seed": tune.seed, "alpha": tune.alpha, "unit": runs[0].primary["unit"] if runs else None,
        "budget": {"runs": tune.budget.runs, "seconds": tune.budget.seconds},
        "runs_used": sum(1 for s in slots if s["run_id"] is not None),
        "verdict": "improved" if v.improved else "baseline kept",
        "best": {**config(chosen[v.best]), "role": v.best},
        "baseline": config(chosen[BASELINE]),
        "winner": config(chosen[WINNER]), "runner_up": config(chosen.get(RUNNER_UP)),
        "improvement": None if goal_row is None or goal_row.ratio is None else
        {"metric": tune.goal, "ratio": goal_row.ratio, "change": goal_row.ratio - 1, "verdict": goal_row.verdict},
        "confirmation": [r.to_json() for r in shown.rows] if shown else [],
        "confirmation_design": shown.design if shown else None,   # interleaved: judged on window pairs
        "confirmation_notes": list(shown.notes) if shown else [],
        "confirmations": {role: {"candidate": chosen[role], "runs": [r.id for r in k.cell.runs],
                                 "baseline_runs": [r.id for r in k.base.runs], "rows": [r.to_json() for r in k.rows]}
                          for role, k in v.comparisons.items()},
        "importance": importance,
        "race_ended": race_ended,
        "dropped_from_space": list(tune.space.dropped),
        "search": {
            "candidates": [{"candidate": s.number, "origin": s.origin, "settings": s.knobs, "cell": s.cell_key,
                            "entered_round": s.entered, "dropped_round": s.dropped_round, "reason": s.reason,
                            "runs": s.run_ids, "value": s.value} for s in field_],
            "best_so_far": best_so_far,
        },
    }


def _toml(value: Any) -> str:
    if isinstance(value, dict):
        return "{ " + ", ".join(f"{k} = {_toml(v)}" for k, v in value.items()) + " }"
    return json.dumps(value)


def matrix_spec(doc: dict, repetitions: int) -> str:
    """A plain matrix spec (rtscope run) that repeats the confirmation: one block per configuration."""
    roles = [("best", doc["best"]), ("baseline", doc["baseline"])]
    other = doc["runner_up"] if doc["best"]["role"] == WINNER else doc["winner"]
    if other is not None:
        roles.insert(1, ("runner-up" if doc["best"]["role"] == WINNER else "race winner", other))
    lines = [f"# The confirmation of tune {doc['tune']} (experiment {doc['experiment']}, goal {doc['goal']}) "
             "as a plain matrix spec: `rtscope run` on it repeats it.",
             f"name = {_toml(doc['name'].removesuffix(' (tune)') + '-confirmation')}",
             f"seed = {doc['seed']}", 'order = "random"', f"repetitions = {repetitions}", ""]
    seen = set()
    for role, c in roles:
        if c["cell"] in seen:
            continue
        seen.add(c["cell"])
        run = c["run"]
        settings = {k: v for k, v in run["settings"].items() if k != "target"}
        lines += [f"# {role}: candidate {c['candidate']}", "[[workload]]", f"name = {_toml(run['workload'])}",
                  f"variants = {_toml(run['variant'])}", f"runtime = {_toml(run['runtime'])}"]
        if run["settings"].get("target", LOCAL) != LOCAL:
            lines.append(f"target = {_toml(run['settings']['target'])}")
        lines.append(f"params = {_toml(run['params'])}")
        if settings:
            lines.append(f"settings = {_toml(settings)}")
        lines.append("")
    return "\n".join(lines)
