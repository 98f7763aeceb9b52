"""The registry of workloads: what is measured, its variants and parameters."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from .options import Option, integer, number


@dataclass(frozen=True)
class Workload:
    name: str
    help: str
    variants: tuple[str, ...]
    params: tuple[Option, ...]
    variant_defaults: dict[str, dict[str, Any]] = field(default_factory=dict)

    def param(self, name: str) -> Option:
        from .options import lookup
        return lookup({p.name: p for p in self.params}, f"{self.name} parameter", name)

    def defaults(self, variant: str) -> dict[str, Any]:
        out = {p.name: p.default for p in self.params if p.default is not None}
        out.update(self.variant_defaults.get(variant, {}))
        return out


WORKLOADS: dict[str, Workload] = {}


def register(w: Workload) -> Workload:
    WORKLOADS[w.name] = w
    return w


register(Workload(
    name="exec",
    help="execution time of a function called repeatedly (study 1: sum, fib, sleep; nothing = overhead)",
    variants=("sum", "fib", "sleep", "nothing"),
    params=(
        Option("n", integer(0), "an integer >= 0", "problem size: sum 1..n, fib(n), sleep n ms"),
        Option("iterations", integer(1), "an integer >= 1", "recorded calls (one extra warm-up call is not recorded)",
               10_000),
        Option("pause_ms", number(0), "a number of ms >= 0", "pause between calls", 5),
    ),
    variant_defaults={"sum": {"n": 4000}, "fib": {"n": 20}, "sleep": {"n": 5}},
))
