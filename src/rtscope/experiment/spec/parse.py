"""Entry points: a spec's text or file parsed and checked into a `Spec`, or a `SpecError` with every problem."""

from __future__ import annotations

from pathlib import Path

from ...errors import UsageError
from .check import Checker
from .model import Spec, SpecError


def analyse(text: str, source: str = "<spec>", scale: str | None = None, targets: list[str] | None = None) -> Spec:
    """Parse and check a spec; every problem is in `.problems` (nothing raised for spec mistakes).
    `targets` (from --target) replaces the spec's choice of targets in every block."""
    return Checker(text, source, scale, targets).run()


def parse(text: str, source: str = "<spec>", scale: str | None = None, targets: list[str] | None = None) -> Spec:
    """Parse a spec, or raise SpecError listing every problem with its line."""
    spec = analyse(text, source, scale, targets)
    if spec.problems:
        raise SpecError(source, spec.problems)
    return spec


def read_text(path: str | Path) -> str:
    try:
        return Path(path).read_text()
    except OSError as e:
        raise UsageError(f"cannot read spec {path}: {e.strerror}") from None
    except UnicodeDecodeError:
        raise UsageError(f"cannot read spec {path}: not UTF-8 text") from None


def load(path: str | Path, scale: str | None = None, targets: list[str] | None = None) -> Spec:
    return parse(read_text(path), str(path), scale, targets)
