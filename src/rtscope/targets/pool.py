"""The targets of one experiment: each made from its definition and opened once, closed at the end."""

from __future__ import annotations

import threading

from .base import Target
from .local import LOCAL
from .registry import make, resolve


class Pool:
    def __init__(self, wait_for_place: float = 0.0):
        self._targets: dict[str, Target] = {}
        self._lock = threading.Lock()
        self._opening: dict[str, threading.Lock] = {}  # one per target: two threads never open it twice
        self.wait_for_place = wait_for_place  # seconds a lab target may wait for its place (labgrid)
        self._expected: dict[str, dict] = {}  # target -> the settings of its first run (expect())

    def expect(self, name: str, settings: dict) -> None:
        """The settings of the first run on target `name`, told before it is opened: a target that boots (a VM)
        boots as that run needs (its kernel_cmdline), not once for opening and again for the run."""
        self._expected.setdefault(name, dict(settings))

    def get(self, name: str | None) -> Target:
        """The opened target called `name` (local when None)."""
        name = name or LOCAL
        with self._lock:
            target = self._targets.get(name)
            if target is None:
                target = make(resolve(name))
                if name in self._expected and hasattr(target, "expect"):
                    target.expect(self._expected[name])
                if hasattr(target, "wait_for_place"):
                    target.wait_for_place = self.wait_for_place
                self._targets[name] = target
                self._opening[name] = threading.Lock()
            opening = self._opening[name]
        # Different targets open in parallel (a fleet boots its VMs at once); one target only once, or a
        # second thread would boot a second guest and lose the first.
        with opening:
            target.open()
        return target

    def interrupt(self) -> None:
        for target in list(self._targets.values()):
            target.interrupt()

    def close(self) -> None:
        """Close every target, also when closing one of them fails (the first error is raised after)."""
        errors = []
        for target in list(self._targets.values()):
            try:
                target.close()
            except Exception as e:  # noqa: BLE001  (re-raised below, after the others are closed)
                errors.append(e)
        self._targets.clear()
        self._opening.clear()
        if errors:
            raise errors[0]

    def __enter__(self) -> "Pool":
        return self

    def __exit__(self, exc_type, *_) -> None:
        # A target that fails to close after an interruption or an error (a connection the stop cut, whose SFTP
        # says EOFError) must not replace what stopped the command: that one is said, with how to resume.
        try:
            self.close()
        except Exception:  # noqa: BLE001
            if exc_type is None:
                raise
