"""Checking a tune spec: range tables `{ min, max, log, step }` and the `[tune]` table (docs/tune.md).

A spec with a `[tune]` table is a search space rather than a matrix: a list is a categorical axis, a range
table an integer or real axis, a single value a fixed setting. The checker (check.py) calls these functions
and collects their problems with the spec's lines, like every other problem.
"""

from __future__ import annotations

import re
from typing import Any, Callable

from ...errors import UsageError, choices
from .model import Budget, Knob, Range, TuneTable

GOALS = ("p99", "max", "stdev", "mean")
TUNE_KEYS = ("goal", "budget", "baseline", "alpha", "width", "confirm", "first_length")
# The parameter that says how long a run is, per workload: the race may shorten it (first_length).
LENGTH_PARAMS = {"exec": "iterations", "timer": "loops", "gpio": "iterations", "storage": "repetitions"}
RANGE_KEYS = ("min", "max", "log", "step")
DEFAULT_GOAL = "p99"
DEFAULT_BUDGET = Budget(runs=60)
DEFAULT_ALPHA = 0.05
DEFAULT_WIDTH = 4       # candidates raced at once
DEFAULT_CONFIRM = 3     # runs per configuration in the confirmation
RACE_MINIMUM = 4        # the smallest race: the baseline and one candidate, two runs each
_DURATION = re.compile(r"^\s*(?:(\d+(?:\.\d+)?)h)?\s*(?:(\d+(?:\.\d+)?)m)?\s*(?:(\d+(?:\.\d+)?)s)?\s*$")


def parse_budget(value: Any) -> Budget:
    """A number of runs (40, "40") or a duration ("90m", "2h", "1h30m", "45s")."""
    if isinstance(value, int) and not isinstance(value, bool):
        if value < 1:
            raise UsageError(f"budget must be at least 1 run, not {value}")
        return Budget(runs=value)
    if isinstance(value, str):
        text = value.strip()
        if text.isdigit():
            return parse_budget(int(text))
        m = _DURATION.match(text)
        if text and m and any(m.groups()):
            h, mi, s = (float(g) if g else 0.0 for g in m.groups())
            seconds = h * 3600 + mi * 60 + s
            if seconds > 0:
                return Budget(seconds=seconds)
    raise UsageError(f"invalid budget {value!r}: give a number of runs (40) or a duration (90m, 2h, 1h30m, 45s)")


def minimum_runs(confirm: int) -> int:
    """The smallest budget in runs: one confirmation (winner, runner-up, baseline) and the smallest race."""
    return 3 * confirm + RACE_MINIMUM


def budget_problem(budget: Budget, confirm: int) -> str | None:
    if budget.runs is not None and budget.runs < minimum_runs(confirm):
        return (f"budget of {budget.runs} runs is too small: the confirmation alone takes {3 * confirm} runs "
                f"(winner, runner-up and baseline, {confirm} each) and the race at least {RACE_MINIMUM}; "
                f"give at least {minimum_runs(confirm)}")
    return None


def check_range(ck, table: dict, path: tuple, key: str, parse: Callable[[Any], Any]) -> tuple[Range | None, list]:
    """A range table of a tune spec: (the Range, its (raw, parsed, path) end values) or (None, []) with problems."""
    ck.unknown_keys(table, RANGE_KEYS, path, f"the range of {key}")
    bad = len(ck.problems)
    for end in ("min", "max"):
        if end not in table:
            ck.error(path, f"the range of {key} needs min and max (keys: {choices(RANGE_KEYS)})")
            return None, []
        v = table[end]
        if isinstance(v, bool) or not isinstance(v, (int, float)):
            ck.error(path + (end,), f"{end} of the range of {key} must be a number, not {v!r}")
    log = table.get("log", False)
    if not isinstance(log, bool):
        ck.error(path + ("log",), f"log of the range of {key} must be true or false, not {log!r}")
    step = table.get("step")
    if step is not None and (isinstance(step, bool) or not isinstance(step, (int, float)) or step <= 0):
        ck.error(path + ("step",), f"step of the range of {key} must be a number > 0, not {step!r}")
    if len(ck.problems) > bad:
        return None, []
    lo, hi = table["min"], table["max"]
    integer = all(isinstance(v, int) for v in (lo, hi, step if step is not None else 1))
    if lo == hi:
        ck.error(path, f"empty range of {key}: min = max = {lo}; give the single value instead of a range")
    elif lo > hi:
        ck.error(path, f"inverted range of {key}: min {lo} is above max {hi}")
    if log and step is not None:
        ck.error(path + ("step",), f"the range of {key} has both log and step: a log axis has no fixed step")
    if log and (lo < 0 or (lo == 0 and not integer)):
        ck.error(path + ("min",), f"the log range of {key} needs min > 0 (an integer range may start at 0), "
                 f"not {lo}")
    ends = []
    for end, v in (("min", lo), ("max", hi)):
        try:
            ends.append((v, parse(v), path + (end,)))
        except UsageError as e:
            ck.error(path + (end,), f"{e}; a range table needs a knob that takes numbers, else list its values")
            break
    if len(ck.problems) > bad:
        return None, []
    return Range(ends[0][1], ends[1][1], log, step, integer), ends


def check_tune(ck, raw: dict, blocks: list, axes: list, param_option: Callable[[str], Any],
               setting_option: Callable[[str], Any]) -> tuple[TuneTable | None, list[Knob]]:
    """The [tune] table and the knobs of the one workload block (axes: that block's checked axes)."""
    path = ("tune",)
    table = ck.typed(raw, "tune", (), "table", {})
    ck.unknown_keys(table, TUNE_KEYS, path, "[tune]")
    goal = ck.one_of(table, "goal", path, GOALS, DEFAULT_GOAL)
    budget = DEFAULT_BUDGET
    if "budget" in table:
        try:
            budget = parse_budget(table["budget"])
        except UsageError as e:
            ck.error(path + ("budget",), str(e))
    alpha = ck.typed(table, "alpha", path, "number", DEFAULT_ALPHA)
    if not 0 < alpha < 1:
        ck.error(path + ("alpha",), f"alpha must be between 0 and 1 (exclusive), not {alpha}")
        alpha = DEFAULT_ALPHA
    width = ck.positive(table, "width", path, "int", DEFAULT_WIDTH)
    confirm = ck.positive(table, "confirm", path, "int", DEFAULT_CONFIRM)
    for key, value, least in (("width", width, 2), ("confirm", confirm, 2)):
        if value < least:
            ck.error(path + (key,), f"{key} must be at least {least}, not {value}")
    first_length = ck.typed(table, "first_length", path, "number", 1.0)
    if not 0 < first_length <= 1:
        ck.error(path + ("first_length",), f"first_length must be a share of the run length, > 0 and <= 1, "
                 f"not {first_length}")
        first_length = 1.0
    elif first_length < 1:
        wname = blocks[0].get("name") if blocks and isinstance(blocks[0], dict) else None
        if goal == "max":
            ck.error(path + ("first_length",), "first_length shortens race runs, but the maximum grows with a "
                     "run's length: use it with goal mean, p99 or stdev")
        elif isinstance(wname, str) and wname not in LENGTH_PARAMS:
            ck.error(path + ("first_length",), f"first_length: rtscope cannot shorten a {wname} run (it can: "
                     f"{choices(f'{w} ({p})' for w, p in LENGTH_PARAMS.items())})")
    why = budget_problem(budget, confirm)
    if why:
        ck.error(path + ("budget",) if "budget" in table else path, why)

    if len(blocks) != 1:
        ck.error(("workload", 1) if len(blocks) > 1 else (),
                 f"a tune spec has exactly one [[workload]] block (it measures one thing), not {len(blocks)}")
    block = blocks[0] if blocks and isinstance(blocks[0], dict) else {}
    for key in ("variants", "runtime"):
        if isinstance(block.get(key), list) and len(block[key]) > 1:
            ck.error(("workload", 0, key), f"a tune spec measures one {key.rstrip('s')}: give one, not "
                     f"{len(block[key])} (tune each in a spec of its own)")
    knobs = [Knob(a.name, a.kind, () if a.range else tuple(p for _, p, _ in a.values), a.range,
                  ck.loc.line(a.path) if ck.loc else None)
             for a in axes if a.kind in ("setting", "param") and a.name != "target"
             and (a.range is not None or len(a.values) > 1)]
    if not knobs and blocks and not ck.problems:
        ck.error(("workload", 0), "nothing to tune: give a setting or parameter a list of values or a range "
                 "table ({ min = ..., max = ... })")

    baseline: dict[str, Any] = {}
    by_name = {k.name: k for k in knobs}
    for name, value in ck.typed(table, "baseline", path, "table", {}).items():
        bp = path + ("baseline", name)
        if name not in by_name:
            ck.error(bp, f"baseline names {name!r}, which is no knob of this tune; knobs: "
                     f"{choices(by_name) or 'none'}")
            continue
        knob = by_name[name]
        try:
            baseline[name] = (param_option if knob.kind == "param" else setting_option)(name).value(value)
        except UsageError as e:
            ck.error(bp, f"baseline: {e}")
    length = LENGTH_PARAMS.get(block.get("name")) if isinstance(block.get("name"), str) else None
    if first_length < 1 and any(k.name == length for k in knobs):
        ck.error(path + ("first_length",), f"first_length shortens {length}, which is a knob of this tune")
    return TuneTable(goal, budget, baseline, alpha, width, confirm, first_length), knobs
