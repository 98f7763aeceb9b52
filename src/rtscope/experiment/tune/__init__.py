"""`rtscope tune`: a search of a spec's knob space for a goal, raced on fresh runs, confirmed against a baseline.

Modules, each one job: `space` (the knobs and run requests), `propose` (Optuna's TPE, seeded), `race` (who
leads, who is dropped), `confirm` (the verdict from fresh runs), `rounds` (the next round from the store),
`session` (the tune in the store and the work loop of one or many processes), `result` (the JSON document and
the matrix spec of the confirmation). docs/tune.md explains the method.
"""

from __future__ import annotations

from .rounds import CONFIRM, FINISHED, RACE
from .result import matrix_spec
from .session import Discarded, Tune, create, load, unfinished, work
from .space import Space

__all__ = ["CONFIRM", "Discarded", "FINISHED", "RACE", "Space", "Tune", "create", "load", "matrix_spec", "unfinished", "work"]
