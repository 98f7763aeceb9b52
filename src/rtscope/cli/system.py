"""Command sysinfo: the machine state recorded with every run."""

from __future__ import annotations

from typing import Annotated

import typer

from .. import sysinfo
from .common import JsonOption, app, console, escape


@app.command("sysinfo")
def sysinfo_cmd(json_out: JsonOption = False,
                root: Annotated[str, typer.Option(hidden=True, help="Read /proc and /sys below this root.")] = "/"
                ) -> None:
    """Show the machine state that rtscope records with every run, and what makes it untrustworthy."""
    snap = sysinfo.snapshot(root)
    if json_out:
        from .common import print_json
        print_json({**snap, "warnings": sysinfo.warnings(snap)})
        return
    for key, value in snap.items():
        if isinstance(value, dict):
            value = ", ".join(f"cpu{k}: {v}" for k, v in value.items())
        console.print(f"[bold]{key:16}[/] {escape(str(value))}")
    for w in sysinfo.warnings(snap):
        console.print(f"[yellow]warning:[/] {escape(w)}")
