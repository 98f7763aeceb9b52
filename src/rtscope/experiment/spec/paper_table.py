"""A spec's `[paper]` table checked into analysis.paper_published.Paper (docs/spec.md, "Paper").

The study's table layout and the published figures its claims do not carry. Every problem is the checker's,
with its line: an unknown layout, key, figure or unit, a figure that is not a number, a row whose `where`
selects no configuration of the matrix or several (a row may name the scales whose matrix makes it, as a claim
does).
"""

from __future__ import annotations

from ...analysis.claims import UNITS
from ...analysis.paper_published import FIGURES, LAYOUTS, UNITLESS, Paper, Published
from ...errors import choices
from .claim_table import _assignments, one_cell

PAPER_KEYS = ("layout", "source", "hardware", "unit", "published")
ROW_KEYS = ("where", "unit", "scale", *FIGURES)


def check_paper(checker, raw: dict, names: list[str], cells: list, scale: str | None,
                scales: list[str]) -> Paper | None:
    table = checker.typed(raw, "paper", (), "table")
    if table is None:
        return None
    path = ("paper",)
    bad = len(checker.problems)
    checker.unknown_keys(table, PAPER_KEYS, path, "[paper]")
    if "layout" not in table:
        checker.error(path, f"[paper] needs layout, the study's table: one of {choices(LAYOUTS)}")
    layout = checker.one_of(table, "layout", path, tuple(LAYOUTS), "")
    source = checker.typed(table, "source", path, "str", "")
    hardware = checker.typed(table, "hardware", path, "str", "")
    unit = _unit(checker, table, path, "")
    rows = table.get("published", [])
    if not isinstance(rows, list) or not all(isinstance(r, dict) for r in rows):
        checker.error(path + ("published",), "paper.published must be [[paper.published]] tables")
        rows = []
    published = []
    for i, row in enumerate(rows):
        published += _row(checker, row, path + ("published", i), i + 1, names, cells, scale, scales, unit)
    if len(checker.problems) > bad:
        return None
    return Paper(layout, source, hardware, unit, published)


def _unit(checker, table: dict, path: tuple, default: str) -> str:
    unit = checker.typed(table, "unit", path, "str", default)
    if unit and unit not in UNITS:
        checker.error(path + ("unit",), f"unknown unit {unit!r}; valid units: {choices(UNITS)}")
        return default
    return unit


def _row(checker, row: dict, path: tuple, number: int, names: list[str], cells: list, scale: str | None,
         scales: list[str], unit: str) -> list[Published]:
    bad = len(checker.problems)
    checker.unknown_keys(row, ROW_KEYS, path, "a [[paper.published]] row")
    figures = [k for k in row if k in FIGURES]
    if not figures:
        checker.error(path, f"[[paper.published]] row {number} has no figure; give one or more of {choices(FIGURES)}")
    for key in figures:
        checker.typed(row, key, path, "number")
    only = checker.typed(row, "scale", path, "strings", [])
    for name in only:
        if name not in scales:
            checker.error(path + ("scale",), f"scale {name!r} is not a scale of this spec; valid scales: "
                          f"{choices(scales) or '(none: drop the key)'}")
    items = _assignments(checker, row, "where", path, names, False)
    row_unit = _unit(checker, row, path, unit)
    if len(checker.problems) > bad:
        return []
    if cells and (not only or scale in only):
        one_cell(checker, items, f"[[paper.published]] row {number}", "its where", path + ("where",), cells)
    return [Published(items, f, float(row[f]), "" if f in UNITLESS else row_unit) for f in figures]
