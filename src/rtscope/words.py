"""How rtscope's output says counts and units: one vocabulary in every command, report and file.

- `counted(1, "run")` is `1 run`, `counted(2, "run")` is `2 runs` (thousands grouped: `1,000 samples`).
- `unit_word("us")` is `µs`: a spec or a peer tool may write `us`, output always says `µs`.
- `id_ranges([1, 2, 3, 7])` is `1-3, 7`: run ids as a reader takes them in.

A leaf: it imports nothing of rtscope's, so every layer (and the CLI at start-up, without numpy) can use it.
"""

from __future__ import annotations


def counted(n: int, word: str) -> str:
    """A count with its noun, singular for one: `1 run`, `2 runs`, `1,000 samples`."""
    return f"{n:,} {word}{'' if n == 1 else 's'}"


def unit_word(unit: str) -> str:
    """A unit as output spells it: `us` (a spec's or a tool's) is `µs`; every other unit as it is."""
    return "µs" if unit == "us" else unit


def tool_text(tool: str, version: str | None) -> str:
    """`cyclictest 2.40`, or `cyclictest, version not recorded` where the run's file says none (an import)."""
    return f"{tool} {version}" if version and version != "unknown" else f"{tool}, version not recorded"


def id_ranges(ids: list[int]) -> str:
    """[1,2,3,7] -> '1-3, 7'."""
    ids = sorted(ids)
    parts, start = [], None
    for i, x in enumerate(ids):
        if start is None:
            start = x
        if i + 1 == len(ids) or ids[i + 1] != x + 1:
            parts.append(str(start) if start == x else f"{start}-{x}")
            start = None
    return ", ".join(parts)
