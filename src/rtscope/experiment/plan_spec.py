"""`rtscope plan SPEC`: size a spec from its pilot runs, and write the sized spec.

The pilot is the latest experiment stored under the spec's name (or one named with --experiment). Its runs are
grouped into configurations (analysis.compare.load_cells); each configuration gives the variance components of
the chosen metric (analysis.variance) and its cost per run (analysis.plan_sizing.estimate_cost, from the runs' probe
times and the gaps between runs). analysis.plan_sizing sizes each configuration alone, then one runs × samples per
`[[workload]]` block (a block has one `repetitions` and one iteration count): the cheapest samples per run at
which the configuration that needs the most runs still gets them. The sized spec is the spec with, in every
planned block, `repetitions = R` and the workload's sample-count parameter set so that a run records about N
samples; the same keys are removed from every `[scale.*]` table, so that every scale runs the plan
(docs/plan.md).
"""

from __future__ import annotations

import json
import math
import re
import tomllib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..analysis import plan_sizing
from ..analysis.defaults import ALPHA, METRICS
from ..errors import UsageError
from ..store import Run, Store
from ..workloads import WORKLOADS
from . import spec as spec_mod

# The parameter that sets how many samples a run records, per workload (timer: per thread).
SAMPLE_PARAM = {"exec": "iterations", "gpio": "iterations", "msgq": "iterations", "tasks": "iterations",
                "timer": "loops"}
PAUSE_PARAM = {"exec": "pause_ms", "gpio": "pause_ms"}   # ms slept between two samples


@dataclass
class ConfigPlan:
    label: str
    block: int | None                  # the spec block its runs come from (None: not in the spec any more)
    cells: list[str]                   # the spec's cell keys of its runs
    components: Any                    # variance.Components
    cost: plan_sizing.Cost
    own: plan_sizing.Plan | None          # sized alone
    between_var: float = 0.0           # σ²_b planned with: the estimate, or its upper limit (--upper)
    common: plan_sizing.Plan | None = None  # at its block's runs × samples
    runs: list[Run] = field(default_factory=list, repr=False)

    def to_json(self) -> dict:
        return {"configuration": self.label, "block": None if self.block is None else self.block + 1,
                "cells": self.cells, "components": self.components.to_json(),
                "planned_between_run_var": self.between_var, "cost": self.cost.to_json(),
                "alone": None if self.own is None else self.own.to_json(),
                "in_block": None if self.common is None else self.common.to_json()}


@dataclass
class BlockPlan:
    block: int                         # 0-based
    workload: str
    cells: int                         # cells of the spec's block
    measured: int                      # of them with pilot runs
    samples: int | None = None
    runs: int | None = None
    param: str | None = None
    param_value: int | None = None
    run_ns: float = 0.0                # a run of each cell, summed over the block's cells
    notes: list[str] = field(default_factory=list)

    @property
    def wall_ns(self) -> float | None:
        return None if self.runs is None else self.runs * self.run_ns

    def to_json(self) -> dict:
        return {"block": self.block + 1, "workload": self.workload, "cells": self.cells, "measured": self.measured,
                "runs": self.runs, "samples": self.samples, "param": self.param, "param_value": self.param_value,
                "wall_s": None if self.wall_ns is None else self.wall_ns / 1e9, "notes": self.notes}


@dataclass
class SpecPlan:
    spec: str
    experiment_id: int
    experiment: str
    scale: str | None
    metric: str
    detect: float
    alpha: float
    power: float
    configs: list[ConfigPlan]
    blocks: list[BlockPlan]
    notes: list[str] = field(default_factory=list)
    written: str | None = None
    sized_name: str | None = None
    upper: float | None = None         # σ²_b at this upper confidence limit (None: the estimate)
    tests: int = 1                     # compare's Holm family: each test planned at alpha / tests

    @property
    def test_alpha(self) -> float:
        return self.alpha / self.tests

    @property
    def feasible(self) -> bool:
        return bool(self.blocks) and all(b.runs is not None for b in self.blocks)

    @property
    def wall_ns(self) -> float | None:
        walls = [b.wall_ns for b in self.blocks]
        return None if not walls or any(w is None for w in walls) else sum(walls)

    def command(self) -> str:
        where = self.written or "SIZED.toml"
        return f"rtscope run {where}" + (f" --scale {self.scale}" if self.scale else "")

    def to_json(self) -> dict:
        return {"spec": self.spec, "experiment": {"id": self.experiment_id, "name": self.experiment},
                "scale": self.scale, "metric": self.metric, "detect": self.detect, "alpha": self.alpha,
                "tests": self.tests, "alpha_per_test": self.test_alpha,
                "power": self.power, "upper": self.upper, "feasible": self.feasible,
                "wall_s": None if self.wall_ns is None else self.wall_ns / 1e9,
                "blocks": [b.to_json() for b in self.blocks], "configurations": [c.to_json() for c in self.configs],
                "written": self.written, "sized_name": self.sized_name,
                "command": self.command() if self.feasible else None, "notes": self.notes}


# --- the pilot ---------------------------------------------------------------------------------------------------

def pilot_experiment(store: Store, spec: spec_mod.Spec, spec_arg: str, ref: str | None):
    """The experiment to plan from: --experiment ID|NAME, else the latest with the spec's name."""
    from ..analysis.select import experiment_id
    from . import execute
    if ref is not None:
        return execute.get(store, experiment_id(store, ref))
    named = [i for i, name in store.experiment_names() if name == spec.name]
    if not named:
        raise UsageError(f"no runs of experiment {spec.name!r} in store {store.url} to plan from: run a pilot "
                         f"first, `rtscope run {spec_arg}` (its quick scale), then `rtscope plan {spec_arg}` again")
    return execute.get(store, named[-1])


def _seconds(stamp: str | None) -> float | None:
    if not stamp:
        return None
    from datetime import datetime
    try:
        return datetime.fromisoformat(stamp.replace("Z", "+00:00")).timestamp()
    except ValueError:
        return None


def probe_and_gaps(runs: list[Run]) -> tuple[dict[int, float], dict[int, float]]:
    """Per run: its probe time (finished_at − started_at) and the gap before it (the previous run's finish on the
    same machine to its start), both in ns."""
    spans = {}
    for r in runs:
        a, b = _seconds(r.started_at), _seconds(r.finished_at)
        if a is not None and b is not None and b >= a:
            spans[r.id] = (a, b)
    probe = {i: (b - a) * 1e9 for i, (a, b) in spans.items()}
    gaps: dict[int, float] = {}
    by_machine: dict[str, list[Run]] = {}
    for r in runs:
        if r.id in spans:
            by_machine.setdefault(str(r.machine.get("hostname", "")), []).append(r)
    for members in by_machine.values():
        members.sort(key=lambda r: spans[r.id][0])
        for prev, cur in zip(members, members[1:]):
            gap = spans[cur.id][0] - spans[prev.id][1]
            if gap >= 0:
                gaps[cur.id] = gap * 1e9
    return probe, gaps


def _cost(cell, probe: dict[int, float], gaps: dict[int, float]) -> plan_sizing.Cost:
    runs = [r for r in cell.runs if r.id in probe and r.n_samples > 0]
    if not runs:
        raise UsageError(f"configuration {cell.config.label}: no run with samples and start/finish times; "
                         "rtscope plan needs runs measured by `rtscope run`")
    hint = None
    pause = PAUSE_PARAM.get(runs[0].workload)
    mean = cell.stats.get("mean")
    if pause is not None and mean is not None and runs[0].primary.get("unit") == "ns":
        hint = float(mean) + 1e6 * float(runs[0].params.get(pause, 0) or 0)
    return plan_sizing.estimate_cost([r.n_samples for r in runs], [probe[r.id] for r in runs],
                                  [gaps[r.id] for r in runs if r.id in gaps], hint)


# --- the plan ------------------------------------------------------------------------------------------------------

def plan_spec(store: Store, spec_path: str | Path, detect: float, metric: str = "mean", *, alpha: float = ALPHA,
              power: float = plan_sizing.POWER, experiment: str | None = None,
              upper: float | None = None, tests: int | None = None) -> SpecPlan:
    """tests: the size of compare's Holm family the verdict must survive (default: every metric of every
    configuration against one baseline per block); each test is planned at alpha / tests, Holm's worst case."""
    from ..analysis.compare import load_cells
    from ..analysis.select import short_labels
    from ..analysis.variance import components
    plan_sizing.check_options(metric, alpha, power)
    text = spec_mod.read_text(spec_path)
    first = spec_mod.parse(text, str(spec_path))
    exp = pilot_experiment(store, first, str(spec_path), experiment)
    spec = spec_mod.parse(text, str(spec_path), exp.scale) if exp.scale in first.scales else first
    notes = []
    if exp.text and exp.text != text:
        notes.append(f"{spec_path} differs from the text experiment {exp.id} was run with; the plan applies the "
                     "pilot's figures to the spec as it is now")
    runs = [r for r in store.runs(experiment_id=exp.id) if r.n_samples > 0]
    if not runs:
        raise UsageError(f"experiment {exp.id} ({exp.name}) has no stored run with samples: run a pilot first, "
                         f"`rtscope run {spec_path}` (its quick scale)")
    cells = load_cells(store, runs)
    labels = short_labels([c.config for c in cells])
    block_of = {c.key: c.block for c in spec.cells}
    if tests is None:
        tests = len(METRICS) * max(1, len(spec.cells) - len({c.block for c in spec.cells}))
    family_alpha, alpha = alpha, alpha / tests
    probe, gaps = probe_and_gaps(runs)
    configs: list[ConfigPlan] = []
    for cell in cells:
        comp = components(cell, metric)
        keys = sorted({r.cell for r in cell.runs if r.cell})
        blocks = sorted({block_of[k] for k in keys if k in block_of})
        label = labels[cell.config]
        if comp.value is None:
            raise UsageError(f"configuration {label} has no value of {metric} (runs kept only as histograms?); "
                             f"choose another --metric")
        if comp.between_var is None:
            raise UsageError(f"configuration {label} has {comp.runs} run: the between-run variance needs at "
                             f"least 2 (3 or more is better); run the pilot with `repetitions = 3` in {spec_path}")
        cost = _cost(cell, probe, gaps)
        between = comp.between_var if upper is None else \
            plan_sizing.upper_between(comp.total_var, comp.within_var, comp.runs, upper)
        own = plan_sizing.plan_one(metric, comp.value, between, comp.within_var, comp.runs,
                                comp.samples_per_run, cost, detect, alpha=alpha, power=power,
                                total_var=comp.total_var)
        configs.append(ConfigPlan(label, blocks[0] if blocks else None, keys, comp, cost, own, between,
                                  runs=cell.runs))
    orphans = [c.label for c in configs if c.block is None]
    if orphans:
        notes.append(f"not in {spec_path} any more (planned alone, not in the matrix): {', '.join(orphans)}")
    block_plans = []
    for b in sorted({c.block for c in spec.cells}):
        block_cells = [c for c in spec.cells if c.block == b]
        workload = block_cells[0].request.workload
        members = [c for c in configs if c.block == b]
        measured_keys = {k for c in members for k in c.cells}
        bp = BlockPlan(b, workload, len(block_cells), sum(1 for c in block_cells if c.key in measured_keys))
        block_plans.append(bp)
        if not members:
            bp.notes.append(f"block {b + 1} ({workload}): no pilot runs, not planned")
            continue
        demands = [plan_sizing.Demand(c.label, metric, c.components.value, c.between_var,
                                   c.components.within_var, c.components.total_var, c.components.runs,
                                   c.components.samples_per_run, c.cost, max(1, sum(k in block_of for k in c.cells)))
                   for c in members]
        n, r, plans = plan_sizing.plan_matrix(demands, detect, alpha=alpha, power=power)
        for c in members:
            c.common = plans[c.label]
        bp.samples, bp.runs = n, r
        mean_run = sum(p.run_ns * d.cells for p, d in zip(plans.values(), demands)) / sum(d.cells for d in demands)
        bp.run_ns = sum(p.run_ns * d.cells for p, d in zip(plans.values(), demands)) + \
            mean_run * (bp.cells - bp.measured)
        if bp.cells > bp.measured:
            bp.notes.append(f"block {b + 1}: {bp.cells - bp.measured} of its {bp.cells} cells have no pilot runs: "
                            "their runs are costed as the block's average")
        param = SAMPLE_PARAM.get(workload)
        if param is not None:
            per_unit = [r.n_samples / float(r.params[param]) for c in members for r in c.runs
                        if isinstance(r.params.get(param), (int, float)) and r.params[param] > 0]
            if per_unit:
                bp.param = param
                bp.param_value = max(1, math.ceil(n / (sum(per_unit) / len(per_unit))))
        if bp.param is None:
            bp.notes.append(f"block {b + 1} ({workload}): no parameter sets its samples per run; only its "
                            "repetitions are sized")
        if r is None:
            bp.notes.append(f"block {b + 1}: more than {plan_sizing.MAX_RUNS} runs per configuration would be "
                            f"needed to detect {detect:.1%} on {metric}")
    return SpecPlan(str(spec_path), exp.id, exp.name, exp.scale, metric, detect, family_alpha, power, configs,
                    block_plans, notes, upper=upper, tests=tests)


# --- the sized spec -------------------------------------------------------------------------------------------------

def sized_name(name: str) -> str:
    return name if name.endswith("-sized") else f"{name}-sized"


def sized_text(text: str, sp: SpecPlan) -> str:
    """The spec with every planned block's repetitions and sample count set (docs/plan.md), as TOML."""
    raw = tomllib.loads(text)
    raw["name"] = sized_name(raw.get("name") or Path(sp.spec).stem)
    params = {b.block: (b.param, b.param_value) for b in sp.blocks if b.runs is not None}
    reps = {b.block: b.runs for b in sp.blocks if b.runs is not None}
    blocks = raw.get("workload") or []
    names = {p for p, _ in params.values() if p}
    scales = raw.get("scale") or {}
    for i, block in enumerate(blocks):       # an unplanned block keeps what the spec's scales gave it
        if i in reps:
            continue
        known = {o.name for o in WORKLOADS[block["name"]].params} if block.get("name") in WORKLOADS else set()
        for sname, scale in scales.items():
            own = block.setdefault("scale", {}).setdefault(sname, {})
            if "repetitions" in scale:
                own.setdefault("repetitions", scale["repetitions"])
            for p in names & set(scale.get("params") or {}) & known:
                own.setdefault("params", {}).setdefault(p, scale["params"][p])
            if not own:
                del block["scale"][sname]
        if not block.get("scale"):
            block.pop("scale", None)
    for scale in scales.values():
        scale.pop("repetitions", None)
        for p in names:
            (scale.get("params") or {}).pop(p, None)
    for i, block in enumerate(blocks):
        if i not in reps:
            continue
        block["repetitions"] = reps[i]
        param, value = params[i]
        if param:
            block.setdefault("params", {})[param] = value
        for scale in (block.get("scale") or {}).values():
            scale.pop("repetitions", None)
            if param:
                (scale.get("params") or {}).pop(param, None)
    head = (f"# Sized by `rtscope plan` from experiment {sp.experiment_id} ({sp.experiment}): detect {sp.detect:.3g} "
            f"relative change of {sp.metric} with {sp.power:.0%} power at alpha {sp.alpha:g} over {sp.tests} tests.\n"
            f"# Run it with `{sp.command()}`.\n")
    return head + toml_text(raw)


def write_sized(text: str, sp: SpecPlan, path: str | Path) -> None:
    """Write the sized spec, checked: it must parse and give every planned block its runs and samples."""
    sp.written = str(path)
    sized = sized_text(text, sp)
    parsed = spec_mod.parse(sized, str(path), sp.scale)
    for b in sp.blocks:
        if b.runs is None:
            continue
        for c in (c for c in parsed.cells if c.block == b.block):
            if c.repetitions != b.runs or (b.param and c.request.params.get(b.param) != b.param_value):
                raise AssertionError(f"sized spec: cell {c.key} has {c.repetitions} repetitions, "
                                     f"{b.param}={c.request.params.get(b.param)}")
    sp.sized_name = parsed.name
    try:
        Path(path).write_text(sized)
    except OSError as e:
        raise UsageError(f"cannot write {path}: {e.strerror or e}") from None


# --- a small TOML writer (tomllib reads only) ------------------------------------------------------------------------

_BARE = re.compile(r"^[A-Za-z0-9_-]+$")


def _key(k: str) -> str:
    return k if _BARE.match(k) else json.dumps(k, ensure_ascii=False)


def _value(v: Any) -> str:
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, (int, str)):
        return json.dumps(v, ensure_ascii=False)
    if isinstance(v, float):
        if not math.isfinite(v):
            return ("-" if v < 0 else "") + ("inf" if math.isinf(v) else "nan")
        return repr(v)
    if isinstance(v, list):
        return "[" + ", ".join(_value(x) for x in v) + "]"
    if isinstance(v, dict):
        return "{ " + ", ".join(f"{_key(k)} = {_value(x)}" for k, x in v.items()) + " }"
    if hasattr(v, "isoformat"):
        return v.isoformat()
    raise TypeError(f"cannot write {type(v).__name__} as TOML")


def _is_aot(v: Any) -> bool:
    return isinstance(v, list) and bool(v) and all(isinstance(x, dict) for x in v)


def toml_text(doc: dict) -> str:
    out: list[str] = []
    _table(doc, [], out, header=False)
    return "\n".join(out).strip() + "\n"


def _table(d: dict, path: list[str], out: list[str], header: bool = True, aot: bool = False) -> None:
    dotted = ".".join(_key(p) for p in path)
    if header:
        out.append("")
        out.append(f"[[{dotted}]]" if aot else f"[{dotted}]")
    for k, v in d.items():
        if not isinstance(v, dict) and not _is_aot(v):
            out.append(f"{_key(k)} = {_value(v)}")
    for k, v in d.items():
        if isinstance(v, dict):
            _table(v, path + [k], out)
    for k, v in d.items():
        if _is_aot(v):
            for x in v:
                _table(x, path + [k], out, aot=True)
