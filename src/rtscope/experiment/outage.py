"""A monitored target that stops answering (docs/lab.md, "A board that dies"): marked down with the reason,
asked again every min(interval, RETRY_MAX_S), and once it has been down for `give_up_after` intervals (0:
never) its monitoring is given up on: marked incomplete with the reason, the command ending when the other
targets are done (exit 3).

One rule for every `rtscope monitor`: a fleet's board (experiment/fleet.py, a worker thread per board) and one
target watched alone (experiment/execute.py's single-target path) go down, come back and are given up on alike.
"""

from __future__ import annotations

import time

from ..errors import RtscopeError, UsageError
from ..targets import Pool, TargetError

RETRY_MAX_S = 30.0        # a target that is down is asked again after min(interval, this)
GIVE_UP_AFTER = 2         # intervals a target may be down before its monitoring is given up on (0: never)


class GaveUp(RtscopeError):
    """A target down for give_up_after intervals: its monitoring is incomplete (the message says why)."""


def check_give_up_after(n: int) -> int:
    if n < 0:
        raise UsageError(f"--give-up-after must be an integer >= 0 (intervals; 0 = never), got {n}")
    return n


def one_line(e: BaseException) -> str:
    """An exception's message on one line; its type where it has none (a timeout says nothing)."""
    return " ".join(str(e).split()) or type(e).__name__


def close(pool: Pool | None) -> None:
    """Close a target's connection; one that is gone has nothing to close."""
    if pool is not None:
        try:
            pool.close()
        except Exception:  # noqa: BLE001  (a board gone away: its connection is dead already)
            pass


class Outage:
    """Whether one target is down, since when and why."""

    def __init__(self, name: str, interval_s: float, give_up_after: int = GIVE_UP_AFTER):
        self.name, self.interval_s, self.give_up_after = name, interval_s, give_up_after
        self.since: float | None = None   # monotonic: down since (None: it answers)
        self.reason = ""

    @property
    def retry_s(self) -> float:
        return min(self.interval_s, RETRY_MAX_S)

    def only_the_interval(self, e: BaseException) -> bool:
        """Whether a failure is the interval's own, not the target's: not an error of reaching the target (a probe
        that failed or overran its deadline) and the target answers a fresh connection. Such an interval is
        recorded as failed and the next one goes on; the target is not down."""
        if isinstance(e, TargetError):
            return False
        probe = Pool()
        try:
            probe.get(self.name)
            return True
        except Exception:  # noqa: BLE001  (it does not answer: down after all)
            return False
        finally:
            close(probe)

    def failed(self, e: BaseException, pool: Pool | None) -> str | None:
        """The target failed (its connection, in `pool`, is closed): the reason when it just went down (a fresh
        connection asked, so the reason is the board's, not the interval's), None when it was down already."""
        close(pool)
        if self.since is not None:
            return None
        said = one_line(e)
        probe = Pool()
        try:
            probe.get(self.name)
        except Exception as again:  # noqa: BLE001
            said = f"{one_line(again)} (the interval under way: {said})"
        finally:
            close(probe)
        self.reason = said if self.name in said else f"target {self.name}: {said}"
        self.since = time.monotonic()
        return self.reason

    def gap_note(self) -> str | None:
        """While the target is down: the note its next interval is stored with (the gap before it), else None."""
        if self.since is None:
            return None
        return f"made after its target was down for {time.monotonic() - self.since:.0f} s ({self.reason})"

    def answered(self) -> bool:
        """The target answers: True when it was down."""
        was, self.since = self.since is not None, None
        return was

    def given_up(self) -> str | None:
        """Why its monitoring is given up on, once it has been down for give_up_after intervals (else None)."""
        n = self.give_up_after
        if self.since is None or not n or time.monotonic() - self.since < n * self.interval_s:
            return None
        return (f"down for {n} interval{'s' if n > 1 else ''} ({n * self.interval_s:g} s), given up: "
                f"{self.reason}")
