"""`rtscope --version` and `rtscope doctor`: what this rtscope is, what it carries, what this machine has."""

from __future__ import annotations

import os
from typing import Annotated

import typer

from .. import paths, system_deps
from ..layout import PIECES
from .common import JsonOption, Table, app, console, escape, print_json


def _version_text() -> str:
    info = paths.build_info()
    return f"rtscope {info['version']} (commit {info.get('commit') or 'unknown'})"


def _print_version(value: bool) -> None:
    if value:
        typer.echo(_version_text())
        raise typer.Exit()


@app.callback()
def _options(version: Annotated[bool, typer.Option(
        "--version", callback=_print_version, is_eager=True,
        help="Print the version and the commit this rtscope was built from, and exit.")] = False) -> None:
    """Measure, compare and improve the real-time behaviour of IoT and edge stacks."""


def _pieces() -> list[dict]:
    out = []
    for piece in PIECES:
        path = paths.shipped(piece)
        present = path.is_dir() if piece in ("specs", "beam/ebin") else os.access(path, os.R_OK)
        out.append({"piece": piece, "path": str(path), "present": present})
    return out


@app.command()
def doctor(all_: Annotated[bool, typer.Option("--all", help="Also the packages for building and testing rtscope "
                                              "from a checkout (make setup, make test).")] = False,
           json_out: JsonOption = False) -> None:
    """What this rtscope carries and which of the tools it uses this machine has: what each missing one enables,
    and the one apt-get command that installs them."""
    uses = system_deps.USES if all_ else ("run",)
    deps = [d for d in system_deps.load() if d.use in uses]
    present = {d: d.present() for d in deps}
    missing = [d for d in deps if not present[d]]
    install = system_deps.install_command(missing)
    pieces = _pieces()
    info = paths.build_info()
    source = f"a checkout ({paths.REPO_DIR})" if paths.IN_CHECKOUT else f"an installed package ({paths.PACKAGE_DIR})"
    if json_out:
        print_json({**info, "source": "checkout" if paths.IN_CHECKOUT else "installed", "pieces": pieces,
                    "dependencies": [{"check": d.check, "package": d.package, "use": d.use, "enables": d.enables,
                                      "present": present[d]} for d in deps],
                    "install": install})
        return
    console.print(f"{escape(_version_text())}, from {escape(source)}, on {paths.host_arch()}")
    table = Table(title="What rtscope carries (layout.py)", title_justify="left")
    for col in ("piece", "here", "path"):
        table.add_column(col)
    for p in pieces:
        table.add_row(p["piece"], "yes" if p["present"] else "[red]missing[/]", escape(p["path"]))
    console.print(table)
    table = Table(title="What this machine has (system_deps.txt)", title_justify="left")
    for col in ("tool", "package", *(["for"] if all_ else []), "here", "what it enables"):
        table.add_column(col)
    for d in deps:
        table.add_row(escape(d.name), d.package, *([d.use] if all_ else []),
                      "yes" if present[d] else "[yellow]no[/]", escape(d.enables))
    console.print(table)
    if install:
        console.print(f"{len(missing)} of {len(deps)} missing; install them with:\n  {install}", soft_wrap=True)
    else:
        console.print(f"all {len(deps)} are installed")
    if any(not p["present"] for p in pieces):
        console.print("[red]pieces are missing:[/] "
                      + ("build them with `make setup`" if paths.IN_CHECKOUT else "reinstall rtscope"))
