"""What `rtscope reproduce` runs for a spec's claims, and which claims this machine cannot measure, and why.

Only the configurations a claim names are run (its baseline and its cell), `repetitions` times each when asked
(the figure an undecided claim gives). A claim is not measurable here when it requires what rtscope cannot make
(claim_table.REQUIREMENTS), when a run of its configurations cannot be made on its target (no cpufreq for a
governor, no podman...: Availability's reason), or when its target is a VM that this host can only emulate
(QEMU's TCG: the figures would measure the emulator, not the kernel or the environment).
"""

from __future__ import annotations

import dataclasses
import os

from ..analysis.claims import Claim, Judgement, find, judge
from ..analysis.select import value_matches
from ..targets import resolve
from .execute import BOOTED_KINDS, Availability, target_of
from .spec import Spec
from .spec.claim_table import REQUIREMENTS, request_value


def sides(claim: Claim) -> tuple[str, ...]:
    return ("cell", "baseline") if claim.two_sided else ("cell",)


def side_cells(spec: Spec, claim: Claim, side: str, where: list[tuple[str, str]] = ()) -> list:
    """The spec cells one side of a claim names, among those matching `where`."""
    if claim.requires or (claim.scales and spec.scale not in claim.scales):
        return []
    items = (*claim.where, *(claim.cell if side == "cell" else claim.baseline), *where)
    return [c for c in spec.cells if all(value_matches(request_value(c.request, n), v) for n, v in items)]


def cells_of(spec: Spec, claim: Claim, where: list[tuple[str, str]] = ()) -> list:
    """The spec cells a claim names (both sides), among those matching `where`."""
    return [c for side in sides(claim) for c in side_cells(spec, claim, side, where)]


def side_keys(spec: Spec) -> dict[tuple[str, str], set[str]]:
    """(claim id, side) -> the keys of the spec cells it names: how runs the spec made are found (claims.find)."""
    return {(claim.id, side): {c.key for c in side_cells(spec, claim, side)}
            for claim in spec.claims for side in sides(claim)}


def comparison_claims(spec: Spec, min_effect: float = 0.05) -> list[Claim]:
    """`rtscope run --until-decided`: each configuration against the spec's `baseline` as a claim that its mean is
    lower, with a smallest effect of interest: holds = better, contradicted = worse, or the same within
    ±min_effect (its reason says so). A side names every dimension of its cell, so it selects that cell."""
    from ..analysis.claims import Expect
    from ..analysis.select import value_text
    from ..errors import UsageError
    if not spec.baseline:
        raise UsageError(f"--until-decided decides the spec's comparisons against its baseline: {spec.source} has "
                         "no `baseline = { NAME = VALUE }` (docs/spec.md)")
    items = [tuple(i.split("=", 1)) for i in spec.baseline]
    named = {n for n, _ in items}

    def assignment(cell) -> tuple:
        r = cell.request
        values = {"workload": r.workload, "variant": r.variant, "runtime": r.runtime, **r.params, **r.settings}
        return tuple(sorted((k, value_text(v)) for k, v in values.items()))

    def is_base(cell) -> bool:
        return all(value_matches(request_value(cell.request, n), v) for n, v in items)

    bases = [c for c in spec.cells if is_base(c)]
    out = []
    for cell in spec.cells:
        if is_base(cell):
            continue
        mine = dict(assignment(cell))
        fits = [b for b in bases if all(dict(assignment(b)).get(k) == v for k, v in mine.items()
                                        if k not in named and k not in cell.request.settings)]
        if not fits:
            continue
        base = max(fits, key=lambda b: sum(dict(assignment(b)).get(k) == v for k, v in mine.items()))
        out.append(Claim(cell.key, f"{cell.key} against {base.key}", "mean", Expect("lower"),
                         baseline=assignment(base), cell=assignment(cell), min_effect=min_effect))
    if not out:
        raise UsageError(f"--until-decided: no configuration of {spec.source} has a baseline configuration "
                         f"({' '.join(spec.baseline)}) to be compared with")
    return out


def emulated(req) -> str | None:
    """Why a run on a QEMU target would measure the emulator here (TCG), or None."""
    d = resolve(target_of(req))
    if d.kind not in BOOTED_KINDS:
        return None
    arch, accel = d.options.get("arch", "x86_64"), d.options.get("accel", "auto")
    host = os.uname().machine
    if accel == "tcg" or (accel == "auto" and arch != host):
        return (f"target {d.name} is an {arch} VM that this {host} host can only emulate (QEMU's TCG): its "
                f"figures would measure the emulator, not the {d.options.get('kernel', 'guest')} kernel; run the "
                f"claim on an {arch} host with KVM, or on the board (--target)")
    if accel == "auto" and not os.access("/dev/kvm", os.R_OK | os.W_OK):
        return f"target {d.name}: no usable /dev/kvm here, so QEMU would emulate it (TCG) and measure the emulator"
    return None


def unmeasurable(spec: Spec, availability: Availability) -> dict[str, str]:
    """Claim id -> why this machine cannot make its runs."""
    out = {}
    for claim in spec.claims:
        if claim.requires:
            out[claim.id] = REQUIREMENTS[claim.requires]
            continue
        for c in cells_of(spec, claim):
            why = emulated(c.request) or availability.reason(c.request)
            if why:
                out[claim.id] = why
                break
    return out


def set_aside(spec: Spec, where: list[tuple[str, str]], command: str) -> dict[str, str]:
    """Claim id -> why it is not judged in this invocation: claimed at another scale, or outside --where.
    command: the reproduce command of this invocation (its `--scale` is replaced by the claim's)."""
    out = {}
    elsewhere = command.replace(f" --scale {spec.scale}", "") if spec.scale else command
    for claim in spec.claims:
        if claim.scales and spec.scale not in claim.scales:
            out[claim.id] = (f"claimed at scale {' or '.join(claim.scales)} (its configurations exist there only): "
                             f"`{elsewhere} --scale {claim.scales[0]}`")
        elif where and not claim.requires and len(cells_of(spec, claim, where)) < len(sides(claim)):
            out[claim.id] = "outside the selection " + " ".join(f"--where {n}={v}" for n, v in where)
    return out


def trimmed(spec: Spec, claims: list[Claim], where: list[tuple[str, str]], repetitions: int | None) -> Spec:
    """The spec with only the cells these claims name (within `where`), `repetitions` times each when given."""
    keys = {c.key for claim in claims for c in cells_of(spec, claim, where)}
    cells = [dataclasses.replace(c, repetitions=repetitions or c.repetitions) for c in spec.cells if c.key in keys]
    return dataclasses.replace(spec, cells=cells)


def verdicts(spec: Spec, cells: list, absent: dict[str, str], aside: dict[str, str], *, alpha: float,
             slope, stored: bool, interval_alpha: float = 0.05) -> list[Judgement]:
    """The spec's claims judged on these runs' configurations. absent: claim id -> why this machine cannot make
    its runs (on stored runs, a claim whose configurations are all stored is judged anyway: imported, or made
    elsewhere); aside: claim id -> why it is not judged in this invocation (set_aside), for a claim without runs."""
    if stored:
        absent = {cid: why for cid, why in absent.items()
                  if not all(find(c, s, cells)[0] for c in spec.claims if c.id == cid for s in sides(c))}
    out = judge(spec.claims, cells, alpha=alpha, not_measurable=absent, slope=slope, keys=side_keys(spec),
                interval_alpha=interval_alpha)
    for j in out:
        if j.claim.id in aside and j.verdict != "not measurable here" and not j.runs[0]:
            j.verdict, j.reason, j.runs_needed = "undecided", aside[j.claim.id], None
    return out


def judge_stored(spec: Spec, cells: list, slope, *, alpha: float,
                 command: str) -> tuple[list[Judgement], dict[str, str]]:
    """`rtscope reproduce SPEC --experiment ...` on these configurations: what this machine cannot make asked of
    it as reproduce asks (no VM booted), every claim judged on the stored runs; with the claims set aside."""
    from ..targets import Pool
    with Pool() as pool:
        absent = unmeasurable(spec, Availability(pool, boot=False))
    aside = set_aside(spec, [], command)
    return verdicts(spec, cells, absent, aside, alpha=alpha, slope=slope, stored=True), aside
