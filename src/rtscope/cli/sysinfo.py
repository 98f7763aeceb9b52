"""rtscope sysinfo: the machine state recorded with every run, and what makes it untrustworthy; the --target
and --spec options `targets` shares."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Optional

import typer

from .. import paths, sysinfo
from .common import JsonOption, app, console, escape, print_json

TargetOption = Annotated[Optional[str], typer.Option(
    "--target", help="A target defined in $RTSCOPE_TARGETS (or a spec given with --spec), or ssh://user@host:port "
                     "(default: this machine).")]
SpecOption = Annotated[Optional[Path], typer.Option(
    "--spec", help="Also know the targets this spec defines in its [targets] tables.")]


# Why a field of the machine record can be empty (shown instead of None).
WHY_MISSING = {"board": "no /proc/device-tree/model: not a device-tree board",
               "probe_version": "recorded with each run, by the probe that ran it",
               "isolated_cpus": "none isolated"}


def load_spec_targets(spec: Path | None) -> None:
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
        load_spec_targets(spec)
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
