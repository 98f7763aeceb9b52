"""The parsed spec: its cells (one configuration each), its problems with their lines, and cell names."""

from __future__ import annotations

import shlex
from dataclasses import dataclass, field
from typing import Any

from ...analysis.claims import Claim
from ...analysis.paper_published import Paper
from ...errors import UsageError
from ...runtimes.base import RunRequest
from ...workloads import WORKLOADS
from ...words import counted
from .locate import Locator


DESIGNS = ("runs", "interleaved", "duet", "auto")   # the spec's `design` (experiment/design.py)


@dataclass(frozen=True)
class Problem:
    line: int | None
    message: str

    def text(self, source: str) -> str:
        return f"{source}:{self.line}: {self.message}" if self.line else f"{source}: {self.message}"


class SpecError(UsageError):
    """A spec with problems; the message lists every one, each with file:line."""

    def __init__(self, source: str, problems: list[Problem]):
        problems = sorted(problems, key=lambda p: p.line or 0)
        self.source, self.problems = source, problems
        lines = [p.text(source) for p in problems]
        text = lines[0] if len(lines) == 1 else (f"{len(lines)} problems in spec {source}:\n  "
                                                  + "\n  ".join(lines))
        super().__init__(text)


@dataclass
class Cell:
    """One configuration of the matrix: a run request made `repetitions` times."""

    key: str
    block: int                     # index of its [[workload]] block (0-based)
    request: RunRequest
    repetitions: int
    timeout_s: float | None
    on_unavailable: str
    line: int | None               # the block's line, for messages


@dataclass(frozen=True)
class Range:
    """A tune axis over numbers: `{ min, max, log, step }` (integer when min, max and step are integers)."""

    low: float
    high: float
    log: bool = False
    step: float | None = None
    integer: bool = True


@dataclass(frozen=True)
class Knob:
    """One axis of a tune's search space: a setting or parameter with a list of values or a range."""

    name: str
    kind: str                      # setting | param
    values: tuple = ()             # the categories (a list in the spec)
    range: Range | None = None
    line: int | None = None


@dataclass(frozen=True)
class Budget:
    """What a tune may spend: a number of runs, or a wall-clock duration (the confirmation included)."""

    runs: int | None = None
    seconds: float | None = None

    @property
    def text(self) -> str:
        return counted(self.runs, "run") if self.runs is not None else f"{self.seconds:g} s"


@dataclass(frozen=True)
class TuneTable:
    """The spec's [tune] table, checked: the goal, budget, baseline and test level (docs/tune.md)."""

    goal: str
    budget: Budget
    baseline: dict[str, Any]       # knob -> parsed value; knobs not named keep their defaults
    alpha: float
    width: int                     # candidates raced at once
    confirm: int                   # runs per configuration in the confirmation
    first_length: float = 1.0      # the first race round's runs at this share of the spec's run length


@dataclass
class Spec:
    name: str
    description: str
    source: str                    # the file name as given (used in messages)
    text: str
    raw: dict[str, Any]
    scale: str | None              # the scale selected
    scales: tuple[str, ...]        # every scale the spec defines
    seed: int | None               # None: a fresh seed is drawn at run time (and recorded)
    order: str
    cells: list[Cell] = field(default_factory=list)
    problems: list[Problem] = field(default_factory=list)
    warnings: list[Problem] = field(default_factory=list)
    locator: Locator | None = None
    tune: TuneTable | None = None  # a tune spec: its [tune] table, and the knobs its ranges and lists make
    knobs: list[Knob] = field(default_factory=list)
    baseline: list[str] = field(default_factory=list)  # `baseline = {...}`: NAME=VALUE items (compare's --baseline)
    claims: list[Claim] = field(default_factory=list)   # `[[claim]]` tables (claim_table.py), judged by reproduce
    paper: Paper | None = None     # `[paper]`: the study's table layout and published figures (paper_table.py)
    design: str = "runs"           # runs | interleaved | auto (experiment/design.py)
    block: int | None = None       # an interleaved block's samples per arm (None: design.default_block)

    @property
    def path(self) -> str:
        return self.source

    @property
    def total_runs(self) -> int:
        return sum(c.repetitions for c in self.cells)

    def line(self, *path) -> int | None:
        return self.locator.line(path) if self.locator else None


def value_text(value: Any) -> str:
    if isinstance(value, (list, tuple)):
        return ",".join(value_text(v) for v in value)
    return str(value).lower() if isinstance(value, bool) else str(value)


def cell_key(req: RunRequest) -> str:
    """A readable name of a configuration: workload/variant/runtime, the settings, the non-default params."""
    defaults = WORKLOADS[req.workload].defaults(req.variant)
    knobs = [shlex.quote(f"{k}={value_text(v)}") for k, v in sorted(req.settings.items())]
    knobs += [shlex.quote(f"{k}={value_text(v)}") for k, v in sorted(req.params.items()) if defaults.get(k) != v]
    return " ".join([f"{req.workload}/{req.variant}/{req.runtime}", *knobs])
