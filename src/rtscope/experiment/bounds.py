"""How long a run may take on its target, and what is tried when a target goes away under a run (docs/lab.md,
"When a board hangs, reboots or its probe never returns").

A run's deadline is its expected duration with a generous margin (MARGIN_FACTOR × expected + MARGIN_S). Once a
run of its cell has been made (by this invocation, or stored before by the experiment it resumes), the expected
duration is the longest such run; before, it is estimated from the parameters, generously, since what one call
costs is not known: iterations × (pause_ms + PER_CALL_S), loops × interval_us, duration_s, a storage run's bytes
at SLOW_WRITE_BPS; UNKNOWN_S when they say nothing. `timeout_s` in the spec, then `rtscope run --run-timeout`,
replace it. A run past its deadline on a target that still answers is stopped (its
probe's whole process group killed), recorded as failed, and the target's next run starts.

A run whose target connection was lost (targets.TargetLost: a reboot, a power cut) is tried once more after the
target is reconnected within `reconnect_for` seconds (`--reconnect-for`); the attempt is recorded with the run
and in the experiment. A target that stops answering with its connection open (targets.TargetSilent) is a hung
board: its session's keepalives found it (targets/ssh.py), and nothing is tried again.
"""

from __future__ import annotations

import threading
import time
from contextlib import nullcontext
from datetime import datetime, timezone
from typing import Any, Callable

from ..runtimes.base import RunRequest
from ..signals import held_signals
from ..store import Store, unreachable
from ..targets.base import RECONNECT_FOR_S, CommandTimedOut, Target, TargetLost, TargetSilent

MARGIN_FACTOR = 3.0   # a run may take this many times its expected duration ...
MARGIN_S = 60.0       # ... plus this (a VM or tool starting, a deploy, a slow link)
PER_CALL_S = 0.1      # one measured call (an exec call, a msgq round, a tasks batch) as the estimate assumes it
SLOW_WRITE_BPS = 5e6  # bytes a second a storage run is assumed to write at (a slow SD card)
UNKNOWN_S = 3600.0    # the deadline of a run whose parameters say nothing of its length, before one is made
SIZE_UNITS = {"": 1, "k": 1 << 10, "m": 1 << 20, "g": 1 << 30, "t": 1 << 40}


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
        pause = num("pause_ms") or num("period_ms") or (num("send_interval_ms") or 0.0) * (num("messages") or 1)
        guesses.append(iterations * (pause / 1000 + PER_CALL_S))
    if (size := _bytes(p.get("size"))) is not None:
        guesses.append((num("repetitions") or 1) * size / SLOW_WRITE_BPS)
    return max(guesses) if guesses else None


def _bytes(value) -> float | None:
    """A size parameter (4096, "4K", "16M", "1G") in bytes, None when it is not one."""
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return float(value)
    if isinstance(value, str):
        text = value.strip().lower().removesuffix("b").removesuffix("i")
        number, unit = (text[:-1], text[-1]) if text and text[-1] in SIZE_UNITS else (text, "")
        try:
            return float(number) * SIZE_UNITS[unit]
        except ValueError:
            return None
    return None


def deadline_s(expected: float) -> float:
    return MARGIN_FACTOR * expected + MARGIN_S


class Bounds:
    """The bounds of one invocation's runs: the deadlines (`run_timeout` overrides the estimate, a planned run's
    timeout_s overrides both) and how long a lost target is tried again (0: never)."""

    def __init__(self, run_timeout: float | None = None, reconnect_for: float = RECONNECT_FOR_S):
        self.run_timeout, self.reconnect_for = run_timeout, reconnect_for
        self.longest: dict[str, float] = {}  # cell -> the longest run of it made by this invocation (seconds)
        self.failed: list[tuple[Any, str]] = []  # (planned run, why): stopped at its deadline, or a failed interval
        self.gap: str | None = None  # a note for the next run (a monitoring's interval after its target was down)

    def deadline(self, cell: str, req: RunRequest, timeout_s: float | None) -> float | None:
        if timeout_s is not None:
            return timeout_s
        if self.run_timeout is not None:
            return self.run_timeout
        if cell in self.longest:
            return deadline_s(self.longest[cell])
        expected = expected_s(req)
        return UNKNOWN_S if expected is None else deadline_s(expected)

    def took(self, cell: str, seconds: float) -> None:
        self.longest[cell] = max(seconds, self.longest.get(cell, 0.0))

    def make(self, p, target: Target, run: Callable[[float | None, list[str]], Any],
             record: Callable[[int, str, str], None], stored: Callable[[], bool], reporter=None) -> Any:
        """Planned run `p` made on `target` by run(timeout, notes) within its deadline: what run() returned, or
        None when it is not stored (stopped at its deadline: recorded as failed, in `failed`; or stored meanwhile).
        A run whose target was lost is made once more once the target is reconnected (the attempt recorded,
        and noted in the run); a target that stopped answering fails it (TargetSilent, naming the run).
        record(attempt, result, why) keeps an attempt in the experiment's record."""
        notes = [self.gap] if self.gap else []
        self.gap = None
        timeout = self.deadline(p.cell, p.request, p.timeout_s)
        what = f"run {p.index + 1} ({p.cell} #{p.repetition})"
        for attempt in (1, 2):
            started = time.monotonic()
            try:
                run_id = run(timeout, notes)
                break
            except CommandTimedOut as e:  # the probe was stopped; the target answers: its next run goes on
                self.fail(p, f"{what} failed: {e}; its deadline: {self._said(p, timeout)}", reporter,
                          lambda why: record(attempt, "failed", why))
                return None
            except TargetSilent as e:
                why = f"{what} failed: {e}"
                record(attempt, "failed", why)
                raise TargetSilent(why) from None
            except TargetLost as e:
                if attempt == 2 or not self.reconnect_for:
                    raise
                if reporter and hasattr(reporter, "run_repeated"):
                    reporter.run_repeated(p, f"{e}; reconnecting (for up to {self.reconnect_for:g} s)")
                rebooted = target.reconnect(self.reconnect_for)
                how = "it rebooted (a new boot id)" if rebooted else "it answered again (the same boot)"
                note = f"attempt 2 of this run: attempt 1 was interrupted ({e}); {how}"
                record(attempt, "interrupted", note)
                if stored():
                    return None
                notes = [*notes, note]
        self.took(p.cell, time.monotonic() - started)
        return run_id

    def fail(self, p, why: str, reporter=None, record: Callable[[str], None] | None = None) -> None:
        """A planned run that failed while its target answers: recorded, said, and the next run goes on."""
        if record is not None:
            record(why)
        self.failed.append((p, why))
        if reporter and hasattr(reporter, "run_failed"):
            reporter.run_failed(p, why)

    def _said(self, p, timeout: float | None) -> str:
        if p.timeout_s is not None:
            return "timeout_s in the spec"
        if self.run_timeout is not None:
            return "--run-timeout"
        return f"{timeout:.0f} s, from its expected duration with a margin (timeout_s in the spec or " \
               "--run-timeout set it)"

    def learn(self, runs) -> None:
        """The runs an experiment stored before (resume): each cell's longest, from its start and end."""
        for run in runs:
            try:
                took = (datetime.fromisoformat(run["finished_at"]) - datetime.fromisoformat(run["started_at"]))
            except (KeyError, TypeError, ValueError):
                continue
            if run["cell"]:
                self.took(run["cell"], took.total_seconds())


def record_attempt(store: Store, exp, p, attempt: int, result: str, why: str, lock: threading.Lock | None) -> None:
    """A run that failed or was interrupted, in its experiment's record (`attempts`: plan index, cell, repetition,
    attempt, result, reason, when): never stored as measured. Not recorded while the store is unreachable (the
    command's own message says it)."""
    entry = {"index": p.index, "cell": p.cell, "repetition": p.repetition, "attempt": attempt, "result": result,
             "reason": why, "at": datetime.now(timezone.utc).isoformat(timespec="seconds")}
    try:
        with held_signals(), lock or nullcontext():
            row = store.experiment_row(exp.id) or {}
            doc = dict(row.get("spec") or exp.spec)
            doc["attempts"] = [*doc.get("attempts", []), entry]
            store.update_experiment(exp.id, spec=doc)
            exp.spec = doc
    except Exception as e:  # noqa: BLE001
        if not unreachable(e):
            raise
