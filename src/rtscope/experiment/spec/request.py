"""A run request from names and raw values, validated against the registries of workloads, runtimes and settings."""

from __future__ import annotations

from typing import Any

from ...errors import UsageError, choices
from ...options import lookup
from ...runtimes import RUNTIMES
from ...runtimes.base import RunRequest
from ...settings import explain_record
from ...settings.registry import SETTINGS, system_settings
from ...workloads import WORKLOADS


def build_request(workload: str, variant: str, runtime: str, params: dict[str, Any] | None = None,
                  settings: dict[str, Any] | None = None, tags: tuple[str, ...] = (), where: str = "") -> RunRequest:
    """Validate names and values against the registries; fill in defaults."""
    w = lookup(WORKLOADS, "workload", workload, where)
    if variant not in w.variants:
        raise UsageError(f"unknown {workload} variant {variant!r}{' in ' + where if where else ''}; "
                         f"valid variants: {choices(w.variants)}")
    rt = lookup(RUNTIMES, "runtime", runtime, where)
    if workload not in rt.workloads or variant not in rt.workloads[workload]:
        able = sorted(name for name, r in RUNTIMES.items() if variant in r.workloads.get(workload, ()))
        raise UsageError(f"runtime {runtime!r} cannot run {workload} {variant}; runtimes that can: {choices(able)}")
    full = w.defaults(variant)
    for name, raw in (params or {}).items():
        full[name] = w.param(name).value(raw, where)
    if w.check:
        try:
            w.check(variant, full)
        except UsageError as e:
            raise UsageError(f"{e}{' in ' + where if where else ''}") from None
    accepted = {**{n: SETTINGS[n] for n in rt.settings}, **system_settings()}
    parsed = {}
    for name, raw in (settings or {}).items():
        parsed[name] = lookup(accepted, f"setting for runtime {runtime}", name, where).value(raw, where)
    req = RunRequest(workload, variant, runtime, full, parsed, tuple(tags))
    if parsed.get("explain") and (why := explain_record.unsupported(req)):
        raise UsageError(f"{why}{' in ' + where if where else ''}")
    return req
