"""A spec's `[[claim]]` tables checked into analysis.claims.Claim (docs/spec.md, "Claims").

Every problem is the checker's, with its line: an unknown key, metric or expectation, a name that is no
dimension of the spec, a side that selects no configuration of the matrix (or several), two claims with one id.
A claim that `requires` what rtscope cannot make (a Xenomai kernel, a solo5 unikernel, Xen) names its cells
freely: they come from imported runs, and without them the claim is `not measurable here` (REQUIREMENTS).
"""

from __future__ import annotations

from typing import Any

from ...analysis.claims import CLAIM_METRICS, EXPECT_TABLES, EXPECT_WORDS, UNITS, Claim, Expect
from ...analysis.select import CORE_DIMENSIONS, value_matches, value_text
from ...errors import choices
from ...settings.registry import SETTINGS
from ...workloads import WORKLOADS

CLAIM_KEYS = ("id", "text", "source", "metric", "where", "baseline", "cell", "expect", "margin", "min_effect",
              "published",
              "requires", "scale")
PUBLISHED_KEYS = ("baseline", "cell", "unit", "hardware")
# What a claim may need that rtscope cannot make on any machine, and why its claim is then not measurable.
REQUIREMENTS = {
    "xenomai": "no Xenomai kernel here: rtscope boots stock and PREEMPT_RT kernels only; run Xenomai's `latency` "
               "on a Xenomai board, `rtscope import xenomai FILE`, and judge the imported runs with --run",
    "solo5": "no solo5 (hvt) unikernel here: rtscope makes host, container and QEMU environments only",
    "xen": "no Xen hypervisor here: rtscope makes host, container and QEMU environments only",
}


def check_claims(checker, raw: dict, blocks: list, cells: list, scale: str | None, scales: list[str]) -> list[Claim]:
    """The spec's claims, each checked against the spec's cells; problems go to the checker."""
    tables = raw.get("claim")
    if not isinstance(tables, list) or not all(isinstance(t, dict) for t in tables):
        checker.error(("claim",), "claim must be [[claim]] tables (an array of tables)")
        return []
    names = dimension_names(blocks)
    out, seen = [], {}
    for i, table in enumerate(tables):
        claim = _claim(checker, table, ("claim", i), names, cells, scale, scales)
        if claim is None:
            continue
        if claim.id in seen:
            checker.error(("claim", i, "id"), f"claim id {claim.id!r} is used twice (first at line {seen[claim.id]}); "
                          "give every claim its own id")
            continue
        seen[claim.id] = claim.line
        out.append(claim)
    return out


def dimension_names(blocks: list) -> list[str]:
    """What a claim's or a published row's NAME may be: a setting, a parameter of the spec's workloads, or
    workload, variant, runtime."""
    params = {p.name for b in blocks if isinstance(b, dict) and isinstance(b.get("name"), str)
              and b["name"] in WORKLOADS for p in WORKLOADS[b["name"]].params}
    return sorted({*CORE_DIMENSIONS, *params, *SETTINGS})


def _claim(checker, t: dict, path: tuple, names: list[str], cells: list, scale: str | None,
           scales: list[str]) -> Claim | None:
    bad = len(checker.problems)
    checker.unknown_keys(t, CLAIM_KEYS, path, "a [[claim]] table")
    for key in ("id", "text", "metric", "cell", "expect"):
        if key not in t:
            checker.error(path, f"[[claim]] is missing {key!r}; a claim needs id, text, metric, cell and expect "
                          "(docs/spec.md)")
    cid = checker.typed(t, "id", path, "str")
    text = checker.typed(t, "text", path, "str", "")
    source = checker.typed(t, "source", path, "str", "")
    metric = checker.typed(t, "metric", path, "str")
    if metric is not None and metric not in CLAIM_METRICS:
        checker.error(path + ("metric",), f"unknown metric {metric!r}; valid metrics: {choices(CLAIM_METRICS)}")
    requires = checker.typed(t, "requires", path, "str")
    if requires is not None and requires not in REQUIREMENTS:
        checker.error(path + ("requires",), f"unknown requirement {requires!r}; valid: {choices(REQUIREMENTS)} "
                      "(what rtscope cannot make; leave it out for what the spec's matrix makes)")
    only = tuple(checker.typed(t, "scale", path, "strings", []))
    for name in only:
        if name not in scales:
            checker.error(path + ("scale",), f"claim scale {name!r} is not a scale of this spec; valid scales: "
                          f"{choices(scales) or '(none: drop the key)'}")
    expect = _expect(checker, t, path)
    min_effect = _min_effect(checker, t, path, expect)
    published = _published(checker, t, path)
    sides = {key: _assignments(checker, t, key, path, names, requires is not None)
             for key in ("where", "baseline", "cell")}
    if expect is not None and expect.kind != "below" and "baseline" not in t and "expect" in t:
        checker.error(path, f"claim {cid!r} expects {expect.kind}: it needs a baseline to compare its cell with")
    if expect is not None and expect.kind == "below" and "baseline" in t:
        checker.error(path + ("baseline",), f"claim {cid!r} is a bound on its cell alone: it takes no baseline")
    if len(checker.problems) > bad:
        return None
    claim = Claim(cid, text, metric, expect, sides["baseline"], sides["cell"], sides["where"], source,
                  published or {}, requires, only, checker.loc.line(path) if checker.loc else None, min_effect)
    if requires is None and cells and (not only or scale in only):
        for side in ("cell", "baseline") if claim.two_sided else ("cell",):
            _one_cell(checker, claim, side, path, cells)
    return claim if len(checker.problems) == bad else None


def _min_effect(checker, t: dict, path: tuple, expect: Expect | None) -> float | None:
    """`min_effect`: a lower/higher claim's smallest effect of interest, a relative change above 0 and below 1."""
    value = checker.typed(t, "min_effect", path, "number")
    if value is None:
        return None
    if expect is not None and expect.kind not in ("lower", "higher"):
        checker.error(path + ("min_effect",), f"min_effect belongs to expect = \"lower\" or \"higher\" (the "
                      f"smallest effect of interest); expect {expect.kind} has "
                      f"{'its margin' if expect.kind == 'same' else 'its own range'}")
        return None
    if not 0 < value < 1:
        checker.error(path + ("min_effect",), f"min_effect must be above 0 and below 1 (a relative change, e.g. "
                      f"0.05 for 5 %), not {value}")
        return None
    return float(value)


def _expect(checker, t: dict, path: tuple) -> Expect | None:
    if "expect" not in t:
        return None
    value, p = t["expect"], path + ("expect",)
    valid = f"valid: {choices(EXPECT_WORDS)}, {{ ratio = [LOW, HIGH] }}, {{ below = VALUE, unit = \"us\" }}"
    margin = checker.typed(t, "margin", path, "number")
    if isinstance(value, str):
        if value not in EXPECT_WORDS:
            checker.error(p, f"unknown expect {value!r}; {valid}")
            return None
        if value == "same":
            if margin is None:
                checker.error(path, "expect = \"same\" needs margin, the relative tolerance of the equivalence "
                              "test (e.g. margin = 0.05)")
                return None
            if not 0 < margin < 1:
                checker.error(path + ("margin",), f"margin must be above 0 and below 1 (a relative tolerance), "
                              f"not {margin}")
                return None
            return Expect("same", margin=float(margin))
        if "margin" in t:
            checker.error(path + ("margin",), f"margin belongs to expect = \"same\", not {value!r}")
            return None
        return Expect(value)
    if not isinstance(value, dict) or len(set(value) & set(EXPECT_TABLES)) != 1:
        checker.error(p, f"expect must be a word or a table with one of ratio, below; {valid}")
        return None
    if "margin" in t:
        checker.error(path + ("margin",), "margin belongs to expect = \"same\"")
    if "ratio" in value:
        checker.unknown_keys(value, ("ratio",), p, "expect")
        r = value["ratio"]
        if not (isinstance(r, list) and len(r) == 2 and all(isinstance(x, (int, float)) and not isinstance(x, bool)
                                                            for x in r) and 0 < r[0] < r[1]):
            checker.error(p + ("ratio",), f"ratio must be [LOW, HIGH] with 0 < LOW < HIGH (cell / baseline), "
                          f"not {r!r}")
            return None
        return Expect("ratio", low=float(r[0]), high=float(r[1]))
    checker.unknown_keys(value, ("below", "unit"), p, "expect")
    bound, unit = value["below"], value.get("unit")
    if isinstance(bound, bool) or not isinstance(bound, (int, float)) or bound <= 0:
        checker.error(p + ("below",), f"below must be a number above 0, not {bound!r}")
        return None
    if unit not in UNITS:
        checker.error(p + ("unit",), f"{'unknown unit ' + repr(unit) if unit is not None else 'below needs a unit'}"
                      f"; valid units: {choices(UNITS)}")
        return None
    return Expect("below", bound=float(bound), unit=unit)


def _published(checker, t: dict, path: tuple) -> dict | None:
    table = checker.typed(t, "published", path, "table")
    if table is None:
        return None
    p = path + ("published",)
    checker.unknown_keys(table, PUBLISHED_KEYS, p, "published")
    for key in ("baseline", "cell"):
        checker.typed(table, key, p, "number")
    for key in ("unit", "hardware"):
        checker.typed(table, key, p, "str")
    return dict(table)


def _assignments(checker, t: dict, key: str, path: tuple, names: list[str], free: bool) -> tuple:
    table = checker.typed(t, key, path, "table", {})
    out = []
    for name, value in table.items():
        p = path + (key, name)
        if isinstance(value, (dict, list)):
            checker.error(p, f"{key} {name} must be one value, not a table or list")
            continue
        if not free and name not in names:
            checker.error(p, f"{key} names {name!r}, not a setting, parameter or {'/'.join(CORE_DIMENSIONS)} of "
                          f"this spec; valid names: {choices(names)}")
            continue
        out.append((name, value_text(value)))
    return tuple(out)


def request_value(req, name: str) -> Any:
    """A run request's value of a claim's NAME: workload/variant/runtime, a setting or a parameter."""
    core = {"workload": req.workload, "variant": req.variant, "runtime": req.runtime}
    return core[name] if name in core else req.settings.get(name, req.params.get(name))


def _one_cell(checker, claim: Claim, side: str, path: tuple, cells: list) -> None:
    """The side must select exactly one configuration of the spec's matrix."""
    one_cell(checker, (*claim.where, *(claim.cell if side == "cell" else claim.baseline)),
             f"claim {claim.id!r}", f"its {side}", path + (side,), cells)


def one_cell(checker, items: tuple, owner: str, what: str, at: tuple, cells: list) -> None:
    """`items` (NAME=VALUE texts) must select exactly one configuration of the spec's matrix; the error names
    them as `owner`'s `what` ("claim 'x'", "its cell")."""
    found = [c for c in cells if all(value_matches(request_value(c.request, n), v) for n, v in items)]
    if len(found) == 1 or getattr(checker, "matrix_incomplete", False):
        return   # one, or a block left out for its own problem: its cells are missing, not these items
    text = " ".join(f"{n}={v}" for n, v in items)
    if found:
        checker.error(at, f"{owner}: {what} ({text}) matches {len(found)} configurations of the "
                      f"matrix ({'; '.join(c.key for c in found[:3])}{' ...' if len(found) > 3 else ''}); name "
                      "more in where or the side so that it selects one")
        return
    for n, v in items:   # the first assignment that leaves nothing: its valid values among the rest's cells
        rest = [c for c in cells
                if all(value_matches(request_value(c.request, m), w) for m, w in items if (m, w) != (n, v))]
        if rest and not any(value_matches(request_value(c.request, n), v) for c in rest):
            values = sorted({value_text(request_value(c.request, n)) for c in rest} - {""})
            checker.error(at, f"{owner}: no configuration of the matrix makes {what} ({text}): "
                          f"{n}={v} is not made there; values of {n}: {choices(values) or '(unset)'}")
            return
    checker.error(at, f"{owner}: no configuration of the matrix makes {what} ({text})")
