"""rtscope import: results measured elsewhere (sample files, nerves_rt_perf CSV, cyclictest, fio, Xenomai),
stored as runs. (`import` is a Python keyword, hence the module's trailing underscore.)"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Optional

import typer
from typer.core import TyperCommand

from ..errors import RtscopeError, UsageError, choices
from ..options import parse_assignment
from ..words import counted
from .common import DbOption, app, console, escape, open_store, settle


def _importer_names() -> list[str]:
    from ..importers import KINDS
    return list(KINDS)


def _complete_kind(incomplete: str) -> list[str]:
    return [name for name in _importer_names() if name.startswith(incomplete)]


class ImportCommand(TyperCommand):
    """`rtscope import`: its KIND help names the importers (importers.KINDS: no converter is loaded for the help),
    only when that help is shown, so that every other command's start stays light."""

    def format_help(self, ctx, formatter) -> None:
        for param in self.params:
            if param.name == "kind":
                param.help = f"What the files are: {', '.join(_importer_names())}."
        super().format_help(ctx, formatter)


@app.command("import", cls=ImportCommand)
def import_cmd(
    kind: Annotated[str, typer.Argument(help="What the files are (their kinds are listed by `rtscope import --help`).",
                                        autocompletion=_complete_kind)],
    files: Annotated[list[Path], typer.Argument(help="Files to import.")],
    variant: Annotated[Optional[str], typer.Option(help="The variant measured, when the file does not say.")] = None,
    set_: Annotated[Optional[list[str]], typer.Option("--set", help="NAME=VALUE recorded as a setting (repeatable), "
                                                      "e.g. --set kernel=preempt_rt.")] = None,
    tag: Annotated[Optional[list[str]], typer.Option(help="Tag the imported runs (repeatable).")] = None,
    db: DbOption = None,
) -> None:
    """Import results measured elsewhere: rtscope sample files, nerves_rt_perf CSV, cyclictest, fio, Xenomai's latency.

    A run's headline (n, min, mean, max) is the tool's own where its output prints one (docs/analysis.md)."""
    from ..importers import KINDS, importer
    if kind not in KINDS:
        raise UsageError(f"unknown import kind {kind!r}; valid kinds: {choices(KINDS)}")
    extra = dict(parse_assignment(s) for s in set_ or [])
    convert = importer(kind).convert
    converted = [(f, sf) for f in files for sf in _converted(convert, f, variant, extra)]  # all or nothing
    store = open_store(db, open_later=True)   # a server that does not answer: the runs wait in the spool
    ids = store.keeper.add_runs([(sf, sf.header.get("environment") or {"note": f"imported from {f}"},
                                  {"tags": tag, "source": str(f)}) for f, sf in converted])
    if not isinstance(ids, list):   # spooled, all together: the store is unreachable
        settle(store, f"import of {counted(len(converted), 'run')}")
        console.print(f"imported {counted(len(converted), 'run')} through the spool (`rtscope runs` lists them)")
        return
    for (f, sf), run_id in zip(converted, ids):
        console.print(f"run {run_id}: {escape(str(f))} ({sf.header['workload']} {sf.header['variant']}, "
                      f"{what_was_kept(sf)})")


def _converted(convert, path: Path, variant: str | None, extra: dict) -> list:
    """An importer's sample files of one file; its errors name the file (with several files, which one failed)."""
    try:
        return convert(path, variant, extra)
    except RtscopeError as e:
        if str(path) in str(e):
            raise
        raise type(e)(f"{path}: {e}", exit_code=e.exit_code) from None


def what_was_kept(sf) -> str:
    """How many samples an imported run holds, and in which form: raw, histograms, or only the tool's summary."""
    if sf.n:
        return f"{sf.n:,} samples"
    hists = sf.trailer.get("histograms") or {}
    if hists:
        n = sum(int(h.get("n", 0)) for h in hists.values())
        return f"{n:,} samples in {len(hists)} histogram{'s' if len(hists) != 1 else ''}"
    n = (sf.trailer.get("summary") or {}).get("n")
    return f"{n:,} samples summarised by the tool (no samples kept)" if n else "no samples"
