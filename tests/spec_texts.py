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


BEAM_BESIDE_NATIVE = """name = "paired"
{top}
[[workload]]
name = "exec"
variants = {variants}
runtime = "beam"
[workload.params]
iterations = {iterations}
pause_ms = 0
[workload.settings]
fullsweep_after = [0, 65535]
[[workload]]
name = "exec"
variants = "sum"
runtime = "native"
[workload.params]
iterations = {native_iterations}
"""


def beam_beside_native(top: str, variants: str = '"sum"', iterations: int = 60, native_iterations: int = 60) -> str:
    """BEAM exec cells that one VM can hold as arms (fullsweep_after 0 vs 65535) beside a native exec cell that
    cannot share their process: what design auto interleaves and what it runs alone."""
    return BEAM_BESIDE_NATIVE.format(top=top, variants=variants, iterations=iterations,
                                     native_iterations=native_iterations)


DUET_SPEC = """name = "duet"
design = "{design}"
repetitions = {repetitions}
[[workload]]
name = "exec"
variants = "sum"
runtime = "{runtime}"
[workload.params]
iterations = {iterations}
pause_ms = {pause_ms}
[workload.settings]
{settings}
"""


def duet_spec(settings: str, design_: str = "duet", repetitions: int = 2, runtime: str = "beam",
              iterations: int = 200, pause_ms: float = 0, extra: str = "") -> str:
    """One exec sum block whose configurations differ in `settings` (TOML lines), in design `design_`, and `extra`
    (more blocks) after it: what tests/test_duet*.py lay out and run side by side."""
    return DUET_SPEC.format(design=design_, repetitions=repetitions, runtime=runtime, iterations=iterations,
                            pause_ms=pause_ms, settings=settings) + extra
