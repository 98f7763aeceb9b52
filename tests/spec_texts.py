"""Spec texts more than one test file runs."""

from __future__ import annotations

NATIVE_TUNE = """name = "{name}"
{top}
[tune]
goal = "mean"
budget = 10
confirm = 2

[[workload]]
name = "exec"
variants = "sum"
runtime = "native"
params = {{ {params} }}

[workload.settings]
mlock = [false, true]
"""


def native_tune(name: str, params: str, top: str = "") -> str:
    """A tune of mlock on real native exec sum runs (goal mean, 10 candidates' budget, 2 confirmation runs)."""
    return NATIVE_TUNE.format(name=name, params=params, top=top)
