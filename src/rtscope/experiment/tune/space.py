"""The search space of a tune: the spec's knobs (lists and range tables), the fixed rest, run requests.

A configuration is a dict knob -> value. The baseline sets only the knobs its [tune] table names; a knob it
does not name keeps its default (a setting is left unset, a parameter keeps the workload's default).
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Any

from ...runtimes.base import RunRequest
from ...settings.registry import SETTINGS
from ...targets import LOCAL
from ...workloads import WORKLOADS
from ..spec import Spec, cell_key
from ..spec.model import Knob

TUNE_TAG = "tune"


@dataclass
class Space:
    knobs: list[Knob]
    base: RunRequest                  # the fixed part: workload, variant, runtime, params and settings
    baseline: dict[str, Any]
    dropped: list[str] = field(default_factory=list)   # knobs or values left out on this target, with why

    @classmethod
    def of(cls, spec: Spec, target: str | None = None) -> "Space":
        first = spec.cells[0].request
        names = {k.name for k in spec.knobs}
        w = WORKLOADS[first.workload]
        defaults = w.defaults(first.variant)
        params = {n: v for n, v in first.params.items() if n not in names}
        params.update({k.name: defaults[k.name] for k in spec.knobs if k.kind == "param" and k.name in defaults})
        settings = {n: v for n, v in first.settings.items() if n not in names}
        if target is not None and target != LOCAL:
            settings["target"] = target
        elif target == LOCAL:
            settings.pop("target", None)
        base = RunRequest(first.workload, first.variant, first.runtime, params, settings,
                          tuple(sorted({*first.tags, TUNE_TAG})))
        return cls(list(spec.knobs), base, dict(spec.tune.baseline if spec.tune else {}))

    @property
    def target(self) -> str:
        return self.base.settings.get("target", LOCAL)

    def knob(self, name: str) -> Knob:
        return next(k for k in self.knobs if k.name == name)

    def request(self, values: dict[str, Any]) -> RunRequest:
        params, settings = dict(self.base.params), dict(self.base.settings)
        for name, value in values.items():
            (params if self.knob(name).kind == "param" else settings)[name] = value
        return replace(self.base, params=params, settings=settings)

    def key(self, values: dict[str, Any]) -> str:
        return cell_key(self.request(values))

    def pause(self) -> tuple[int, float, str] | None:
        """(calls, pause_ms, whether pause_ms is the workload's default, a knob or neither: "default", "knob",
        "set") of a full-length baseline
        run whose workload pauses between calls (exec; gpio's timed variants); None when it has no pause. Such a
        run lasts at least calls × pause_ms whatever the code it times: exec's default pause (5 ms) makes a
        1,000-call run 5 s where the calls themselves take a fraction of a second."""
        req = self.request(self.baseline)
        params = {**WORKLOADS[req.workload].defaults(req.variant), **req.params}
        calls, pause_ms = params.get("iterations"), params.get("pause_ms")
        if not isinstance(calls, int) or not isinstance(pause_ms, (int, float)) or pause_ms <= 0:
            return None
        default = WORKLOADS[req.workload].defaults(req.variant).get("pause_ms")
        where = ("knob" if any(k.name == "pause_ms" for k in self.knobs) else
                 "default" if pause_ms == default else "set")
        return calls, float(pause_ms), where

    def contains(self, name: str, value: Any) -> bool:
        """Whether a value lies in a knob's axis (a baseline's value may lie outside it)."""
        knob = next((k for k in self.knobs if k.name == name), None)
        if knob is None:
            return False
        if knob.range is None:
            return value in knob.values
        return isinstance(value, (int, float)) and knob.range.low <= value <= knob.range.high

    def restrict(self, target) -> "Space":
        """The space without the values this target cannot apply (a governor without cpufreq...): each left
        out with its reason; a knob with no value left is dropped."""
        knobs, dropped = [], list(self.dropped)
        for knob in self.knobs:
            setting = SETTINGS.get(knob.name) if knob.kind == "setting" else None
            check = setting.unavailable if setting is not None else None
            if check is None:
                knobs.append(knob)
                continue
            if knob.range is not None:
                why = check(knob.range.low, target) or check(knob.range.high, target)
                if why:
                    dropped.append(f"{knob.name}: {why}")
                else:
                    knobs.append(knob)
                continue
            keep = []
            for value in knob.values:
                why = check(value, target)
                if why:
                    dropped.append(f"{knob.name}={value}: {why}")
                else:
                    keep.append(value)
            if keep:
                knobs.append(replace(knob, values=tuple(keep)))
            else:
                dropped.append(f"{knob.name}: no value of it can be applied on target {self.target}")
        names = {k.name for k in knobs}
        baseline = {n: v for n, v in self.baseline.items() if n in names}
        return Space(knobs, self.base, baseline, dropped)
