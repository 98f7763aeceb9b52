"""`rtscope specs`: the experiment specs rtscope ships, listed or copied out to edit."""

from __future__ import annotations

import shutil
import tomllib
from pathlib import Path
from typing import Annotated, Optional

import typer

from .. import paths
from ..errors import UsageError
from .common import JsonOption, Table, app, console, escape, print_json


def _description(path: Path) -> str:
    try:
        return str(tomllib.loads(path.read_text()).get("description", ""))
    except (OSError, tomllib.TOMLDecodeError):
        return ""


@app.command()
def specs(copy: Annotated[Optional[Path], typer.Option(
              "--copy", metavar="DIR", help="Copy the shipped specs into DIR (created if needed) to edit them; "
                                            "nothing is copied when a spec of the same name is there.")] = None,
          json_out: JsonOption = False) -> None:
    """The shipped experiment specs: `rtscope run NAME` runs one from any directory."""
    shipped = paths.shipped_specs()
    if copy is not None:
        if copy.exists() and not copy.is_dir():
            raise UsageError(f"--copy {copy}: not a directory")
        clashes = [p.name for p in shipped if (copy / p.name).exists()]
        if clashes:
            raise UsageError(f"--copy {copy}: {', '.join(clashes)} already there; nothing copied "
                             "(move them away or choose another directory)")
        copy.mkdir(parents=True, exist_ok=True)
        for p in shipped:
            shutil.copyfile(p, copy / p.name)
        console.print(f"copied {len(shipped)} specs to {escape(str(copy))}: edit one, then "
                      f"`rtscope run {escape(str(copy / 'NAME.toml'))}`")
        return
    rows = [{"name": p.stem, "path": str(p), "description": _description(p)} for p in shipped]
    if json_out:
        print_json(rows)
        return
    table = Table(title=f"Shipped specs ({escape(str(paths.specs_dir()))})", title_justify="left")
    table.add_column("name")
    table.add_column("description")
    for r in rows:
        table.add_row(r["name"], escape(r["description"]))
    console.print(table)
    console.print("run one with `rtscope run NAME`; `rtscope specs --copy DIR` to edit them")
