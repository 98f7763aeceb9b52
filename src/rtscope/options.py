"""Named, validated values: workload parameters and settings share this one mechanism.

An Option knows its name, how to parse a value from the CLI, a spec or a
sample file, and how to describe its valid values in an error message.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable

from .errors import UsageError, choices


@dataclass(frozen=True)
class Option:
    name: str
    parse: Callable[[Any], Any]  # raises ValueError naming what is wrong
    valid: str                   # valid values, in words, for error messages and --help
    help: str = ""
    default: Any = None

    def value(self, raw: Any, where: str = "") -> Any:
        try:
            return self.parse(raw)
        except (ValueError, TypeError) as e:
            place = f" in {where}" if where else ""
            raise UsageError(f"invalid value {raw!r} for {self.name}{place}: {e} (valid: {self.valid})") from None


def _from_text(raw: Any, kind: type) -> Any:
    if isinstance(raw, str):
        raw = raw.strip()
        return kind(float(raw)) if kind is float else kind(raw, 10) if kind is int else raw
    return raw


def integer(minimum: int | None = None, maximum: int | None = None) -> Callable[[Any], int]:
    def parse(raw: Any) -> int:
        if isinstance(raw, bool) or (isinstance(raw, float) and not raw.is_integer()):
            raise ValueError("not an integer")
        v = int(_from_text(raw, int))
        if minimum is not None and v < minimum:
            raise ValueError(f"must be >= {minimum}")
        if maximum is not None and v > maximum:
            raise ValueError(f"must be <= {maximum}")
        return v
    return parse


def number(minimum: float | None = None, maximum: float | None = None) -> Callable[[Any], float]:
    def parse(raw: Any) -> float:
        if isinstance(raw, bool):
            raise ValueError("not a number")
        v = float(_from_text(raw, float))
        if v != v:
            raise ValueError("not a number")
        if minimum is not None and v < minimum:
            raise ValueError(f"must be >= {minimum}")
        if maximum is not None and v > maximum:
            raise ValueError(f"must be <= {maximum}")
        return int(v) if v.is_integer() else v
    return parse


def boolean(raw: Any) -> bool:
    if isinstance(raw, bool):
        return raw
    text = str(raw).strip().lower()
    if text in ("1", "true", "yes", "on"):
        return True
    if text in ("0", "false", "no", "off"):
        return False
    raise ValueError("not a boolean")


def one_of(*valid: str) -> Callable[[Any], str]:
    def parse(raw: Any) -> str:
        text = str(raw).strip()
        if text not in valid:
            raise ValueError(f"unknown value {text!r}")
        return text
    return parse


def lookup(table: dict[str, Any], kind: str, name: str, where: str = "") -> Any:
    """table[name], or a UsageError naming the valid names."""
    if name not in table:
        place = f" in {where}" if where else ""
        raise UsageError(f"unknown {kind} {name!r}{place}; valid {kind}s: {choices(sorted(table))}")
    return table[name]


def parse_assignment(text: str) -> tuple[str, str]:
    """'name=value' from the command line."""
    name, sep, value = text.partition("=")
    if not sep or not name.strip():
        raise UsageError(f"expected NAME=VALUE, got {text!r}")
    return name.strip(), value.strip()
