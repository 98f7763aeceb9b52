"""Execute runs: apply settings, launch the probe, hand the sample file on, always undo.

The lifecycle of one run (DESIGN.md's data flow), for a request spec.build_request made:
  apply system settings -> probe process -> sample file
  -> the store the caller passed (one transaction) -> undo settings (also on error, Ctrl-C, SIGTERM)
The runner sits below the store: it knows only the `add_run` it is given.
"""

from __future__ import annotations

import posixpath
import threading
import time
import uuid
from contextlib import ExitStack, nullcontext, suppress
from pathlib import Path
from typing import Any, Protocol

from .. import samplefile
from ..errors import ProbeError, RtscopeError, UsageError
from ..runtimes import RUNTIMES
from ..runtimes.base import RunRequest, Site
from ..settings.base import RunContext
from ..settings import undo as undo_journal
from ..settings.registry import SETTINGS
from ..signals import held_signals, sigterm_raises
from ..store.records import DuplicateRun
from ..targets import Completed, LocalTarget, Target
from ..targets.owners import run_directory
from .design import block_order, switched_per_block
from .duet import duet_command

PROBE_STDERR_TAIL = 2000  # characters of a failed probe's output kept in the error


class RunSink(Protocol):
    """Where a finished run goes (the Store, or its keeper, handed down by the layer above): it returns the run's
    id (the keeper: or what it spooled while the store was unreachable)."""

    def add_run(self, sf: samplefile.SampleFile, environment: dict, *, tags: list[str] | None = None,
                source: str | None = None, **kwargs: Any) -> Any: ...


def check_probe(argv: list[str], proc: Completed, name: str | None = None) -> None:
    if proc.returncode != 0:
        said = (proc.stderr or proc.stdout or "").strip()[-PROBE_STDERR_TAIL:]
        command = next((a for a in argv if a != "env" and "=" not in a), argv[0])  # past an `env NAME=VALUE` prefix
        raise ProbeError(f"{name or posixpath.basename(command)} failed (exit {proc.returncode}): "
                         f"{said or 'no output'}",
                         exit_code=proc.returncode if proc.returncode in (1, 2) else 1)


def _check_matches(req: RunRequest, sf: samplefile.SampleFile, path: Path) -> None:
    h = sf.header
    if (h["workload"], h["variant"]) != (req.workload, req.variant):
        raise ProbeError(f"{path}: probe wrote {h['workload']} {h['variant']}, expected {req.workload} {req.variant}")


def _outputs_on_target(rt, req: RunRequest, ctx: RunContext, out: str) -> list[str]:
    """The command's output files that run_probe brings back with the run: none on this machine (they are
    where collect() reads them) or when an environment fetches them itself (ctx.fetch)."""
    if ctx.target.is_local or ctx.fetch is not None:
        return []
    return [posixpath.join(ctx.run_dir, name) for name in rt.outputs(req, out)]


def _fetch_through_environment(rt, req: RunRequest, ctx: RunContext, out: str) -> None:
    if ctx.fetch is not None:
        for name in rt.outputs(req, out):
            ctx.fetch(name, Path(ctx.workdir) / name)


def execute(req: RunRequest, store: RunSink, *, timeout: float | None = None, target: Target | None = None,
            store_lock: threading.Lock | None = None, notes: list[str] | None = None, **store_kwargs) -> Any:
    """Run one request end to end on `target` (this machine by default) and store it; return what the sink
    returned (the run id).
    Nothing is stored on failure; every setting is undone on the target, also on Ctrl-C and SIGTERM. `notes` go
    into the run's trailer (an attempt repeated after its target was lost)."""
    return _measure([req], store, timeout=timeout, target=target, store_lock=store_lock,
                    store_kwargs=[store_kwargs], notes=notes)[0]


def execute_interleaved(reqs: list[RunRequest], store: RunSink, *, block: int, timeout: float | None = None,
                        target: Target | None = None, store_lock: threading.Lock | None = None,
                        store_kwargs: list[dict], notes: list[str] | None = None) -> list[Any]:
    """The arms of one interleaved run (experiment/design.py) measured by one process of their runtime, in
    blocks of `block` samples in a random balanced order; each arm stored as a run of its own with its header's
    `pairing` (store_kwargs[i]: arm i's plan index and cell). Returns each arm's run id (None: stored already by
    another process). The arms share their system settings, applied once."""
    timeout = None if timeout is None else timeout * len(reqs)
    return _measure(reqs, store, block=block, timeout=timeout, target=target, store_lock=store_lock,
                    store_kwargs=store_kwargs, notes=notes)


def execute_duet(reqs: list[RunRequest], store: RunSink, *, turn: int, timeout: float | None = None,
                 target: Target | None = None, store_lock: threading.Lock | None = None,
                 store_kwargs: list[dict], notes: list[str] | None = None) -> list[Any]:
    """The arms of a duet (experiment/design.py, duet.py) measured side by side, a process each pinned to a CPU of
    its own (arm i on the target's (i + turn)-th online CPU: the arms take turns over the CPUs from one
    repetition to the next), released together at a start gate; each arm stored as a run of its own with its
    header's `pairing` (design duet, its arm and CPU). The arms share their system settings, applied once."""
    timeout = None if timeout is None else timeout * len(reqs)   # a slower arm's start and its own pace
    return _measure(reqs, store, duet_turn=turn, timeout=timeout, target=target, store_lock=store_lock,
                    store_kwargs=store_kwargs, notes=notes)


def _measure(reqs: list[RunRequest], store: RunSink, *, block: int | None = None, duet_turn: int | None = None,
             timeout: float | None, target: Target | None, store_lock: threading.Lock | None,
             store_kwargs: list[dict], notes: list[str] | None = None) -> list[Any]:
    req = reqs[0]
    target = target or LocalTarget()
    for setting in SETTINGS.values():
        if setting.prepare is not None:  # a boot the run's settings need (kernel_cmdline), before anything else
            setting.prepare(req.settings.get(setting.name), target)
    rt = RUNTIMES[req.runtime]
    if target.cannot_run(req.runtime):
        raise UsageError(target.cannot_run(req.runtime))
    missing = rt.unavailable(target)
    if missing:
        raise RtscopeError(f"runtime {req.runtime} is not available: {missing}")
    for r in reqs:
        rt.prepare(r)
    with run_directory() as tmp, ExitStack() as undo, sigterm_raises():
        workdir = Path(tmp)
        run_dir = tmp if target.is_local else target.mkdtemp()
        if not target.is_local:
            undo.callback(target.remove_tree, run_dir)
        ctx = RunContext(request=req, workdir=workdir, notes=list(notes or []), target=target, run_dir=run_dir)
        ctx.notes.extend(undo_journal.restore_stale(target))  # what a killed rtscope left changed, once per connection
        switched = _switched(reqs, rt) if block is not None else []
        for name, value in req.settings.items():   # the arms differ only in settings of their own processes...
            setting = SETTINGS[name]
            if setting.apply is not None and name not in switched:   # ...or in files switched block by block
                undo.enter_context(setting.apply(value, ctx))
        site = Site(target, dict(ctx.tool_paths))
        probe_version = _version(rt, site, target)
        where = ctx.out_dir or run_dir
        arm_keys: list[dict] = [{} for _ in reqs]
        if duet_turn is not None:
            outs = [posixpath.join(where, f"arm{i}.rts") for i in range(len(reqs))]
            pairing = {"id": uuid.uuid4().hex[:16], "design": "duet", "arms": len(reqs), "block_samples": 1}
            cpus = _duet_cpus(target, len(reqs), duet_turn)
            arm_keys = [{"cpu": cpu} for cpu in cpus]
            argv = ctx.command_prefix + duet_command([rt.command(r, out, site) for r, out in zip(reqs, outs)], cpus,
                                                     posixpath.join(where, "duet-gate"))
        elif block is None:
            outs, pairing = [posixpath.join(where, "run.rts")], None
            argv = ctx.command_prefix + rt.command(req, outs[0], site)
        else:
            outs = [posixpath.join(where, f"arm{i}.rts") for i in range(len(reqs))]
            pairing = {"id": uuid.uuid4().hex[:16], "design": "interleaved", "arms": len(reqs), "block_samples": block}
            order = block_order(len(reqs), int(req.params["iterations"]) // block, pairing["id"])
            writes = _block_writes(reqs, switched, order, ctx, undo) if switched else None
            argv = ctx.command_prefix + rt.interleaved_command(reqs, outs, site, block, order, writes)
        undo.push(_clean_up_if_stopped(rt, target))
        # One round trip on a remote target: the machine's state, the command, its output files.
        wanted = [f for r, out in zip(reqs, outs) for f in _outputs_on_target(rt, r, ctx, out)]
        began = time.time()
        probe = target.run_probe(argv, timeout=timeout, cwd=run_dir, outputs=wanted, into=workdir)
        proc = probe.proc
        environment = target.record_for_run(probe, probe_version)
        # When this host saw the run (a target's own clock may differ): how runs of targets that share the host
        # are seen not to overlap (execute.HOSTED_KINDS).
        environment = {**environment, "host_window": [began, time.time()]}
        check_probe(argv, proc, ctx.command_name)
        files = []
        for i, (r, out) in enumerate(zip(reqs, outs)):
            _fetch_through_environment(rt, r, ctx, out)
            path = rt.collect(r, workdir / posixpath.basename(out), workdir, proc)
            sf = samplefile.read(path)
            _check_matches(r, sf, path)
            if sf.header.pop("started_at_source", None):   # a tool that records no start (rtla): when it was launched
                sf.header["started_at"] = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(began))
            if ctx.notes:
                sf.trailer.setdefault("notes", []).extend(ctx.notes)
            for name, value in r.settings.items():  # the probe cannot know the system settings
                if SETTINGS[name].scope == "system":
                    sf.header["settings"].setdefault(name, value)
            if pairing is not None and duet_turn is not None:
                sf.header["pairing"] = {**pairing, "arm": i, **arm_keys[i]}
            elif pairing is not None:
                sf.header["pairing"] = _arm_pairing(sf, pairing, i, order, path)
            files.append(sf)
        kwargs = [dict(kw) for kw in store_kwargs]
        if ctx.explain is not None:
            kwargs[0]["causes"] = ctx.explain(files[0])
        ids = []
        with store_lock or nullcontext():
            for r, sf, kw in zip(reqs, files, kwargs):
                try:
                    ids.append(store.add_run(sf, environment, tags=list(r.tags), source=" ".join(argv), **kw))
                except DuplicateRun:
                    if len(reqs) == 1:
                        raise
                    ids.append(None)   # this arm was stored by another `--resume` meanwhile
        return ids


def _switched(reqs: list[RunRequest], rt) -> list[str]:
    """The system settings an interleaved run's arms switch block by block: the file writes any arm sets."""
    return sorted({name for r in reqs for name in r.settings if switched_per_block(rt, name)})


def _block_writes(reqs: list[RunRequest], names: list[str], order: list[int], ctx: RunContext,
                  undo: ExitStack) -> list[dict[str, str]]:
    """Each arm's files (path -> text) for the switched settings: its own values, the files' current text where
    it does not set one. The current texts are journalled and written back when the run ends (also after a
    kill -9, undo.py); the first block's arm's are written now."""
    if ctx.command_prefix:
        raise RtscopeError(f"{names[0]} switched between the arms' blocks: the probe writes the files itself, so "
                           f"it must run on the target, not inside {ctx.command_name or 'an environment'}")
    own: list[dict[str, str]] = []
    current: dict[str, str] = {}
    for r in reqs:
        files: dict[str, str] = {}
        for name in names:
            if name in r.settings:
                for path, text, now in SETTINGS[name].block_writes(r.settings[name], ctx.target):
                    files[path] = text
                    current.setdefault(path, now)
        own.append(files)
    per_arm = [{path: files.get(path, now) for path, now in current.items()} for files in own]
    first = per_arm[order[0]]
    writes = [(path, first[path], now) for path, now in current.items()]
    undo.enter_context(undo_journal.files_changed(", ".join(names), writes, ctx))
    ctx.notes.append(f"{', '.join(names)} switched with the arms: {len(current)} file(s) written before each "
                     "arm's blocks, put back afterwards")
    return per_arm


def _duet_cpus(target: Target, arms: int, turn: int) -> list[int]:
    """Arm i's CPU: the target's (i + turn)-th online CPU (modulo their number); an error when there are fewer
    CPUs than arms, or no taskset to pin them with."""
    where = "this machine" if target.is_local else f"target {target.name}"
    if target.runtimes is not None:
        raise RtscopeError(f"design duet starts a process per arm; {where} is a running {', '.join(target.runtimes)} "
                           "node with no shell to start them in")
    cpus = target.online_cpus()
    if len(cpus) < arms:
        raise RtscopeError(f"design duet: {arms} configurations side by side need {arms} CPUs, one each; {where} "
                           f"has {len(cpus)} online (use design = \"auto\", which pairs two, or fewer configurations)")
    if ("which", "taskset") not in target.deployed:   # asked once per connection
        target.deployed[("which", "taskset")] = target.which("taskset")
    if target.deployed[("which", "taskset")] is None:
        raise RtscopeError(f"design duet pins its arms with taskset, which {where} lacks (util-linux)")
    return [cpus[(i + turn) % len(cpus)] for i in range(arms)]


def _arm_pairing(sf: samplefile.SampleFile, pairing: dict, arm: int, order: list[int], path: Path) -> dict:
    """Arm `arm`'s pairing record: the run's, its arm number and its blocks' positions, as the process wrote them
    (checked against the order it was given)."""
    blocks = [k for k, a in enumerate(order) if a == arm]
    written = sf.header.get("pairing") or {}
    if written.get("blocks", blocks) != blocks or written.get("block_samples", pairing["block_samples"]) != \
            pairing["block_samples"] or sf.n != len(blocks) * pairing["block_samples"]:
        raise ProbeError(f"{path}: arm {arm} was not measured in the blocks it was given "
                         f"({sf.n} samples, blocks {written.get('blocks')}; expected {blocks} of "
                         f"{pairing['block_samples']})")
    return {**written, **pairing, "arm": arm, "blocks": blocks}   # the process's own keys kept (block_start_ns)


def _clean_up_if_stopped(rt, target: Target):
    """An exit callback: when the run ends by an exception, the runtime undoes what its killed tool left."""
    def exit_(exc_type, exc, tb) -> bool:
        if exc_type is not None:
            with held_signals(), suppress(RtscopeError):  # the run's own error is the one to report
                rt.stopped(target)
        return False
    return exit_


def _version(rt, site: Site, target: Target) -> str | None:
    """The runtime's tool version on the target (asked once per connection)."""
    key = ("version", rt.name, tuple(sorted(site.overrides.items())))
    if key not in target.deployed:
        target.deployed[key] = rt.version(site)
    return target.deployed[key]
