"""How long a run may take on its target, and what is tried when a target goes away under a run (docs/lab.md,
"When a board hangs, reboots or its probe never returns").

A run's deadline is its expected duration with a generous margin (MARGIN_FACTOR × expected + MARGIN_S): the
expected duration from its parameters (iterations × (pause_ms + PER_CALL_S), loops × interval_us, duration_s)
or the longest earlier run of its cell in this invocation, whichever is longer. `timeout_s` in the spec, then
`rtscope run --run-timeout`, replace it. A run past its deadline on a target that still answers is stopped (its
probe's whole process group killed), recorded as failed, and the target's next run starts.

A run whose target connection was lost (targets.TargetLost: a reboot, a power cut) is tried once more after the
target is reconnected within `reconnect_for` seconds (`--reconnect-for`); the attempt is recorded with the run
and in the experiment. A target that stops answering with its connection open (targets.TargetSilent) is a hung
board: its session's keepalives found it (targets/ssh.py), and nothing is tried again.
"""

from __future__ import annotations

from ..runtimes.base import RunRequest
from ..targets.base import RECONNECT_FOR_S

MARGIN_FACTOR = 3.0   # a run may take this many times its expected duration ...
MARGIN_S = 60.0       # ... plus this (a VM or tool starting, a deploy, a slow link)
PER_CALL_S = 0.001    # the time of one measured call assumed by the estimate (its pause comes on top)


def expected_s(req: RunRequest) -> float | None:
    """What a run should take from its parameters (seconds), None when they do not say."""
    p = req.params

    def num(key: str) -> float | None:
        value = p.get(key)
        return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else None

    guesses = []
    if (duration := num("duration_s")) is not None:
        guesses.append(duration)
    if (loops := num("loops")) is not None and (interval := num("interval_us")) is not None:
        guesses.append(loops * interval / 1e6)
    if duration is not None and guesses[-1] != duration:  # loops and duration_s: the first limit wins
        guesses = [min(guesses)]
    if (iterations := num("iterations")) is not None:
        pause = num("pause_ms") or num("send_interval_ms") or num("period_ms") or 0.0
        guesses.append(iterations * (pause / 1000 + PER_CALL_S))
    return max(guesses) if guesses else None


def deadline_s(expected: float | None) -> float | None:
    return None if expected is None else MARGIN_FACTOR * expected + MARGIN_S


class Bounds:
    """The bounds of one invocation's runs: the deadlines (`run_timeout` overrides the estimate, a planned run's
    timeout_s overrides both) and how long a lost target is tried again (0: never)."""

    def __init__(self, run_timeout: float | None = None, reconnect_for: float = RECONNECT_FOR_S):
        self.run_timeout, self.reconnect_for = run_timeout, reconnect_for
        self.longest: dict[str, float] = {}  # cell -> the longest run of it made by this invocation (seconds)

    def deadline(self, cell: str, req: RunRequest, timeout_s: float | None) -> float | None:
        if timeout_s is not None:
            return timeout_s
        if self.run_timeout is not None:
            return self.run_timeout
        guesses = [g for g in (expected_s(req), self.longest.get(cell)) if g is not None]
        return deadline_s(max(guesses)) if guesses else None

    def took(self, cell: str, seconds: float) -> None:
        self.longest[cell] = max(seconds, self.longest.get(cell, 0.0))
