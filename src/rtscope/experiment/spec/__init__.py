"""Experiment specs (TOML): which runs to make, how often, and under which scale.

A spec names an experiment and lists workload blocks. In a block, `variants`,
`runtime`, every parameter and every setting may be a list: the lists expand
as a Cartesian product (minus the `exclude` rules) into cells, one cell per
configuration, and each cell is run `repetitions` times. `[scale.NAME]` tables
override parameters and repetitions (quick here, full for the study).

    name = "demo"
    repetitions = 2
    [scale.quick]
    iterations = 300

    [[workload]]
    name = "exec"
    variants = ["sum", "fib", "sleep"]
    runtime = "native"
    [workload.params]
    iterations = 10000
    [workload.settings]
    rt_priority = [50, 90]

Checking collects every problem at once, each with the line it is on
(`file:line: message`); tomllib gives no positions, so `Locator` scans the
TOML text for them. The reference of every key is docs/spec.md.

Modules: `parse` (entry points), `check` (the checker), `claim_table` (the [[claim]] tables, judged by
`rtscope reproduce`), `locate` (source lines), `model` (the parsed spec),
`request` (a run request from names), `tune` (range tables and the [tune] table of a tune spec,
docs/tune.md). This package imports the settings, runtimes and targets below it.
"""

from __future__ import annotations

from .check import DEFAULT_RUNTIME, DEFAULT_SCALE
from .locate import Locator
from .model import Cell, Problem, Spec, SpecError, cell_key
from .parse import analyse, load, parse, read_text
from .request import build_request

__all__ = ["DEFAULT_RUNTIME", "DEFAULT_SCALE", "Cell", "Locator", "Problem", "Spec", "SpecError", "analyse",
           "build_request", "cell_key", "load", "parse", "read_text"]
