"""Commands sysinfo and targets: the machine state recorded with every run, and where runs can execute."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Optional

import typer

from .. import paths, sysinfo
from ..errors import RtscopeError
from .common import JsonOption, app, console, escape, print_json

if TYPE_CHECKING:
    from ..targets import TargetDefinition

TargetOption = Annotated[Optional[str], typer.Option(
    "--target", help="A target defined in $RTSCOPE_TARGETS (or a spec given with --spec), or ssh://user@host:port "
                     "(default: this machine).")]
SpecOption = Annotated[Optional[Path], typer.Option(
    "--spec", help="Also know the targets this spec defines in its [targets] tables.")]


# Why a field of the machine record can be empty (shown instead of None).
WHY_MISSING = {"board": "no /proc/device-tree/model: not a device-tree board",
               "probe_version": "recorded with each run, by the probe that ran it",
               "isolated_cpus": "none isolated"}


def _load_spec_targets(spec: Path | None) -> None:
    if spec is not None:
        from ..experiment import spec as spec_mod
        spec_mod.load(paths.find_spec(spec))  # registers its [targets] (and reports its problems)


@app.command("sysinfo")
def sysinfo_cmd(json_out: JsonOption = False, target: TargetOption = None, spec: SpecOption = None,
                root: Annotated[str, typer.Option(hidden=True, help="Read /proc and /sys below this root.")] = "/"
                ) -> None:
    """Show the machine state that rtscope records with every run, and what makes it untrustworthy."""
    from .. import targets as targets_mod
    if target is None:
        snap = sysinfo.snapshot(root)
    else:
        _load_spec_targets(spec)
        with targets_mod.Pool() as pool:
            snap = pool.get(targets_mod.resolve(target).name).snapshot()
    if json_out:
        print_json({**snap, "warnings": sysinfo.warnings(snap)})
        return
    for key, value in snap.items():
        if isinstance(value, dict):
            value = ", ".join(f"cpu{k}: {v}" for k, v in value.items())
        elif value in (None, ""):
            value = "-" + (f" ({WHY_MISSING[key]})" if key in WHY_MISSING else "")
        console.print(f"[bold]{key:18}[/] {escape(str(value))}")
    for w in sysinfo.warnings(snap):
        console.print(f"[yellow]warning:[/] {escape(w)}")


def check_target(definition: TargetDefinition) -> dict:
    """Connect, read the machine, and ask every runtime whether it can run there."""
    from .. import targets as targets_mod
    from ..runtimes import RUNTIMES
    row = {"name": definition.name, "kind": definition.kind, "url": definition.url,
           "description": definition.description, "reachable": False}
    target = targets_mod.make(definition)
    try:
        target.open()
        snap = target.snapshot()
        row.update(reachable=True, arch=target.arch, hostname=snap["hostname"], kernel=snap["kernel_release"],
                   preemption=snap["preemption"], cpus=snap["cpu_count"],
                   runtimes={name: target.cannot_run(name) or rt.unavailable(target) or "ok"
                             for name, rt in sorted(RUNTIMES.items())})
    except RtscopeError as e:
        row["error"] = str(e)
    finally:
        target.close()
    return row


@app.command("targets")
def targets_cmd(json_out: JsonOption = False, spec: SpecOption = None,
                check: Annotated[bool, typer.Option(help="Connect to each target and check it.")] = True) -> None:
    """List the defined targets and check each: reachable, arch, kernel, preemption model, runtimes."""
    from .. import targets as targets_mod
    _load_spec_targets(spec)
    targets_mod.load_env_file()
    rows = [check_target(d) if check else d.to_dict() for d in targets_mod.TARGETS.values()]
    if json_out:
        print_json(rows)
    else:
        for r in rows:
            head = f"[bold]{escape(r['name'])}[/] ({r['kind']}{', ' + escape(r['url']) if r.get('url') else ''})"
            if r.get("description"):
                head += f": {escape(r['description'])}"
            console.print(head)
            if not check:
                continue
            if not r["reachable"]:
                console.print(f"  [red]unreachable:[/] {escape(r['error'])}")
                continue
            console.print(f"  {escape(r['hostname'])}, {r['arch']}, kernel {escape(r['kernel'])}, "
                          f"preemption {r['preemption']}, {r['cpus']} CPUs")
            for name, state in r["runtimes"].items():
                mark = "[green]ok[/]" if state == "ok" else f"[yellow]missing:[/] {escape(state)}"
                console.print(f"  runtime {name}: {mark}")
    if check and any(not r["reachable"] for r in rows):
        raise typer.Exit(1)
