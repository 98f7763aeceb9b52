"""Execute runs: validate, apply settings, launch the probe, ingest, always undo.

The lifecycle of one run (DESIGN.md's data flow):
  build_request -> apply system settings -> probe process -> sample file
  -> store (one transaction) -> undo settings (also on error, Ctrl-C, SIGTERM)
"""

from __future__ import annotations

import os
import signal
import subprocess
import tempfile
from contextlib import ExitStack
from pathlib import Path
from typing import Any

from . import samplefile, sysinfo
from .errors import ProbeError, RtscopeError, UsageError, choices
from .options import lookup
from .signals import sigterm_raises
from .runtimes import RUNTIMES
from .runtimes.base import RunRequest
from .settings import SETTINGS, RunContext, system_settings
from .store import Store
from .workloads import WORKLOADS

PROBE_STDERR_TAIL = 2000  # characters of a failed probe's output kept in the error


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
    return RunRequest(workload, variant, runtime, full, parsed, tuple(tags))


def _stop(proc: subprocess.Popen) -> None:
    """Stop a probe and everything it started (it runs in its own process group)."""
    if proc.poll() is not None:
        return
    for sig, wait in ((signal.SIGTERM, 5), (signal.SIGKILL, 5)):
        try:
            os.killpg(proc.pid, sig)
        except ProcessLookupError:
            return
        try:
            proc.wait(wait)
            return
        except subprocess.TimeoutExpired:
            continue


def launch(argv: list[str], timeout: float | None = None) -> subprocess.CompletedProcess:
    """Run a probe in its own process group; kill the group on any interruption."""
    try:
        proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                                start_new_session=True)
    except OSError as e:
        raise ProbeError(f"cannot start {argv[0]}: {e.strerror}") from None
    try:
        out, err = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        _stop(proc)
        raise ProbeError(f"{Path(argv[0]).name} did not finish within {timeout:.0f} s; stopped") from None
    except BaseException:
        _stop(proc)
        raise
    finally:
        # Also reap anything the probe left behind in its group (for example a VM's helpers).
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass
    return subprocess.CompletedProcess(argv, proc.returncode, out, err)


def check_probe(argv: list[str], proc: subprocess.CompletedProcess) -> None:
    if proc.returncode != 0:
        said = (proc.stderr or proc.stdout or "").strip()[-PROBE_STDERR_TAIL:]
        raise ProbeError(f"{Path(argv[0]).name} failed (exit {proc.returncode}): {said or 'no output'}",
                         exit_code=proc.returncode if proc.returncode in (1, 2) else 1)


def _check_matches(req: RunRequest, sf: samplefile.SampleFile, path: Path) -> None:
    h = sf.header
    if (h["workload"], h["variant"]) != (req.workload, req.variant):
        raise ProbeError(f"{path}: probe wrote {h['workload']} {h['variant']}, expected {req.workload} {req.variant}")


def execute(req: RunRequest, store: Store, *, timeout: float | None = None, **store_kwargs) -> int:
    """Run one request end to end and store it; return the run id. Nothing is stored on failure."""
    rt = RUNTIMES[req.runtime]
    missing = rt.unavailable()
    if missing:
        raise RtscopeError(f"runtime {req.runtime} is not available: {missing}")
    rt.prepare(req)
    with tempfile.TemporaryDirectory(prefix="rtscope-run-") as tmp, ExitStack() as undo, sigterm_raises():
        workdir = Path(tmp)
        ctx = RunContext(request=req, workdir=workdir, notes=[])
        for name, value in req.settings.items():
            setting = SETTINGS[name]
            if setting.apply is not None:
                undo.enter_context(setting.apply(value, ctx))
        environment = sysinfo.snapshot(probe_version=rt.version())
        out = workdir / "run.rts"
        argv = ctx.command_prefix + rt.command(req, out)
        proc = launch(argv, timeout)
        check_probe(argv, proc)
        path = rt.collect(req, out, workdir, proc)
        sf = samplefile.read(path)
        _check_matches(req, sf, path)
        if ctx.notes:
            sf.trailer.setdefault("notes", []).extend(ctx.notes)
        for name, value in req.settings.items():  # the probe cannot know the system settings
            if SETTINGS[name].scope == "system":
                sf.header["settings"].setdefault(name, value)
        return store.add_run(sf, environment, tags=list(req.tags), source=" ".join(argv), **store_kwargs)
