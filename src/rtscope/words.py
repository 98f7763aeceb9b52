"""How rtscope's output says counts and units: one vocabulary in every command, report and file.

- `counted(1, "run")` is `1 run`, `counted(2, "run")` is `2 runs` (thousands grouped: `1,000 samples`).
- `unit_word("us")` is `µs`: a spec or a peer tool may write `us`, output always says `µs`.

A leaf: it imports nothing of rtscope's, so every layer (and the CLI at start-up, without numpy) can use it.
"""

from __future__ import annotations


def counted(n: int, word: str) -> str:
    """A count with its noun, singular for one: `1 run`, `2 runs`, `1,000 samples`."""
    return f"{n:,} {word}{'' if n == 1 else 's'}"


def unit_word(unit: str) -> str:
    """A unit as output spells it: `us` (a spec's or a tool's) is `µs`; every other unit as it is."""
    return "µs" if unit == "us" else unit
