"""rtscope check: a spec validated without running it, every problem at once, and the plan per scale."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from .. import paths
from ..errors import RtscopeError, UsageError
from ..words import counted
from .common import app, console, err_console, escape
from .run import ScaleOption, print_warnings

if TYPE_CHECKING:
    from ..experiment import execute as exp_mod


@app.command()
def check(spec: Annotated[Path, typer.Argument(help="Experiment spec (TOML) to validate, see docs/spec.md.")],
          scale: ScaleOption = None) -> None:
    """Validate a spec without running it: every problem at once, each as file:line; the plan per scale."""
    from ..experiment import execute as exp_mod, spec as spec_mod
    from ..targets import Pool
    spec = paths.find_spec(spec)
    text = spec_mod.read_text(spec)
    first = spec_mod.analyse(text, str(spec), scale)
    scales = [scale] if scale is not None or not first.scales else list(first.scales)
    analysed = [first if s == first.scale else spec_mod.analyse(text, str(spec), s) for s in scales]
    problems = sorted({p for a in analysed for p in a.problems}, key=lambda p: (p.line or 0, p.message))
    print_warnings(first)
    if problems:   # said as `run` says them: SpecError's one text, printed by cli.main
        raise spec_mod.SpecError(str(spec), problems)
    with Pool() as pool:
        availability = exp_mod.Availability(pool, boot=False)
        refused = _check_availability(spec, analysed, availability)
        for line in exp_mod.stale_traces([p for a in analysed for p in exp_mod.plan(a, 0)], availability):
            console.print(f"  [yellow]stale trace:[/] {escape(line)}")
        for line in exp_mod.stale_changes([p for a in analysed for p in exp_mod.plan(a, 0)], availability):
            console.print(f"  [yellow]left changed:[/] {escape(line)}")
    if refused:
        raise RtscopeError(f"{spec} is valid, but this machine cannot make every run and the spec says "
                           "on_unavailable = \"fail\"")
    console.print(f"{escape(str(spec))}: OK")


def _check_availability(spec: Path, analysed: list, availability: exp_mod.Availability) -> bool:
    """Print, per scale, what the targets cannot run; True when a run that must not be skipped cannot."""
    from ..experiment import execute as exp_mod
    refused = False
    for a in analysed:
        planned = exp_mod.plan(a, 0)
        cant = exp_mod.unavailable_runs(planned, availability)
        if a.tune is not None:
            console.print(f"{escape(str(spec))}: {escape(a.name)}: a tune of {len(a.knobs)} knobs "
                          f"({', '.join(k.name for k in a.knobs)}), goal {a.tune.goal}, budget {a.tune.budget.text}")
        else:
            console.print(f"{escape(str(spec))}: {escape(a.name)}, scale {a.scale or '-'}: "
                          f"{counted(len(a.cells), 'cell')}, {counted(len(planned), 'run')}, order {a.order}")
        for why in sorted({w for _, w in cant}):
            n = sum(1 for _, w in cant if w == why)
            fail = any(p.on_unavailable == "fail" for p, w in cant if w == why)
            refused |= fail
            what = '[bold red]cannot run here[/]' if fail else '[yellow]would skip[/]'
            console.print(f"  {what} {counted(n, 'run')}: "
                          f"{escape(why)}")
    return refused
