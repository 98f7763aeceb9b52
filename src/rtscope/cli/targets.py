"""rtscope targets: the defined targets, each checked: reachable, arch, kernel, preemption model, runtimes."""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated

import typer

from ..errors import RtscopeError
from .common import JsonOption, app, console, escape, print_json
from .sysinfo import SpecOption, load_spec_targets

if TYPE_CHECKING:
    from ..targets import TargetDefinition


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
    load_spec_targets(spec)
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
