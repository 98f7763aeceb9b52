"""A run's remedies on its target: whether the target can apply each (`applies_on`), and the A/B spec that
measures them (`rtscope explain RUN --write-spec F`, docs/explain.md "Remedies").

The spec's baseline cell is the run's own configuration (workload, variant, runtime, parameters, settings,
target); each remedy that applies is one cell more, the run's configuration with that one setting changed;
their combination (the best remedy of each cause) one more when it differs from them. The spec names its
baseline (`baseline = { ... }`: every setting a remedy changes, at the run's value, "" where the run had
none), so `rtscope compare --experiment NAME` compares each cell with the run's configuration.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from ..analysis.explain_remedies import Remedy, value_of
from ..errors import RtscopeError, UsageError
from ..runtimes import RUNTIMES
from ..runtimes.base import RunRequest
from ..settings.registry import SETTINGS
from ..targets import LOCAL, Pool, resolve
from ..workloads import WORKLOADS
from .execute import BOOTED_KINDS, Availability
from .plan_spec import toml_text
from .spec import parse

REPETITIONS = 5       # runs per cell: this kind of machine's runs differ by 10-25 %, and the run is the unit
MOST = 3              # remedies measured by default


def target_name(run) -> str:
    return run.settings.get("target") or LOCAL


def run_settings(run) -> dict[str, Any]:
    """The run's settings a spec can give (the probe's own records, such as cpu_dma_latency_us, left out)."""
    return {k: v for k, v in run.settings.items() if k in SETTINGS and k != "target"}


def run_params(run) -> dict[str, Any]:
    """The run's parameters a spec can give (one a runtime records beside them, the BEAM's warmup_calls, left
    out: the runtime adds it again)."""
    known = {p.name for p in WORKLOADS[run.workload].params} if run.workload in WORKLOADS else set()
    return {k: v for k, v in run.params.items() if k in known}


def request(run, settings: dict[str, Any]) -> RunRequest:
    target = target_name(run)
    return RunRequest(run.workload, run.variant, run.runtime, run_params(run),
                      {**settings, **({"target": target} if target != LOCAL else {})}, tuple(run.tags))


def applies_on(run, remedies: list[Remedy]) -> list[Remedy]:
    """Each remedy with `applies_on`: {"target", "ok", "reason", "asked"} — whether this rtscope has the setting,
    the run's runtime takes it, its value is valid, and the run's target can apply it (asked there; a target
    rtscope boots for its runs, a QEMU guest, is not booted for this: `asked` false, `rtscope run` asks)."""
    target = target_name(run)
    booted = resolve(target).kind in BOOTED_KINDS
    pool = Pool()
    availability = Availability(pool, boot=False)
    out = []
    try:
        for r in remedies:
            reason = None
            setting = SETTINGS.get(r.setting)
            if setting is None:
                reason = f"this rtscope has no setting {r.setting} yet: apply it by hand"
            elif setting.scope != "system" and r.setting not in RUNTIMES[run.runtime].settings:
                reason = f"runtime {run.runtime} does not take setting {r.setting}"
            else:
                try:
                    value = setting.value(r.value)
                    reason = availability.reason(request(run, {**run_settings(run), r.setting: value}))
                except UsageError as e:
                    reason = str(e)
                except RtscopeError as e:
                    reason = f"target {target}: {e}"
            out.append(replace(r, applies_on={"target": target, "ok": reason is None, "reason": reason,
                                              "asked": not booted or setting is None}))
    finally:
        pool.close()
    return out


def cells(run, remedies: list[Remedy], most: int = MOST) -> list[tuple[str, dict[str, Any]]]:
    """(comment, settings) per cell: the run's configuration, each applicable remedy (the `most` first), and
    the combination of each cause's first remedy when it is a cell of its own."""
    base = run_settings(run)
    chosen = [r for r in remedies if r.applies_on.get("ok")][:most]
    out = [(f"baseline: run {run.id} as it was measured", base)]
    for r in chosen:
        out.append((f"remedy for {r.cause_label} ({r.share:.0%} of the excess): {r.setting} = {r.value_text}",
                    {**base, r.setting: SETTINGS[r.setting].value(r.value)}))
    combined, causes_seen, changed = dict(base), set(), set()
    for r in chosen:
        key = (r.kind, r.name, r.pid, r.irq)
        if key not in causes_seen and r.setting not in changed:
            causes_seen.add(key)
            changed.add(r.setting)
            combined[r.setting] = SETTINGS[r.setting].value(r.value)
    if all(combined != settings for _, settings in out):
        out.append(("the remedies combined: " + ", ".join(f"{k} = {value_of(v)}" for k, v in combined.items()
                                                       if value_of(base.get(k)) != value_of(v)), combined))
    return out


def ab_spec(run, remedies: list[Remedy], *, repetitions: int = REPETITIONS, most: int = MOST,
            name: str | None = None, targets: dict | None = None) -> str:
    """The A/B spec's text (checked by parsing it): a UsageError when no remedy applies. `targets`: the
    definitions of the run's target ([targets.NAME], from its experiment's spec) when it was defined there."""
    made = cells(run, remedies, most)
    if len(made) < 2:
        why = "; ".join(f"{r.setting} = {r.value_text}: {r.applies_on.get('reason')}" for r in remedies)
        raise UsageError(f"run {run.id}: no remedy can be measured on target {target_name(run)}"
                         + (f" ({why})" if why else ": explain suggests none (no culprit above "
                            "the run's median takes 5 % of the excess)"))
    base = made[0][1]
    changed = sorted({k for _, s in made[1:] for k, v in s.items() if value_of(base.get(k)) != value_of(v)})
    name = name or f"remedies-run-{run.id}"
    target = target_name(run)
    head = {"name": name,
            "description": f"the remedies rtscope explain suggested for run {run.id} ({run.cell or run.workload}), "
                           "each against the run's configuration",
            "repetitions": repetitions,
            "baseline": {k: base[k] if k in base else "" for k in changed}}
    if target != LOCAL:
        head["target"] = target
        if targets and target in targets:
            head["targets"] = {target: targets[target]}
    lines = [f"# rtscope explain {run.id} --write-spec: run it with `rtscope run FILE`, then",
             f"# `rtscope compare --experiment {name}` compares each remedy with the run's configuration",
             "# (the baseline below) and `rtscope explain RUN` shows what is left of each cause.",
             toml_text(head).rstrip()]
    for comment, settings in made:
        block = {"name": run.workload, "variants": [run.variant], "runtime": run.runtime,
                 "params": run_params(run), "settings": settings}
        lines += ["", f"# {comment}", toml_text({"workload": [block]}).strip()]
    text = "\n".join(lines) + "\n"
    parse(text, f"<the spec for run {run.id}>")  # a spec rtscope itself would refuse is a bug here
    return text
