"""Commands that measure or bring in results: run, demo, import."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Optional

import typer

from .. import paths, spec as spec_mod, sysinfo
from ..errors import UsageError, choices
from ..importers import IMPORTERS
from ..options import parse_assignment
from ..results import run_stats
from ..runner import execute
from ..runtimes import RUNTIMES
from ..store import Store
from .common import DbOption, app, console, err_console, escape, open_store
from .runs import stats_table

DEMO_COLUMNS = (("mean", "AVG"), ("max", "MAX"), ("var", "VAR"), ("stdev", "STDEV"), ("p99", "p99"))


def run_requests(store: Store, requests, title: str) -> list[tuple[str, int]]:
    """Run requests one after another, each stored as soon as it finishes."""
    done = []
    for i, req in enumerate(requests, 1):
        console.print(f"[{i}/{len(requests)}] {escape(req.label)} ...", end=" ")
        run_id = execute(req, store)
        console.print(f"run {run_id}")
        done.append((req.label, run_id))
    return done


def print_results(store: Store, done: list[tuple[str, int]], title: str, keys=DEMO_COLUMNS) -> None:
    by_unit: dict[str, list] = {}
    for label, run_id in done:
        run = store.get_run(run_id)
        by_unit.setdefault(run.primary["unit"], []).append((f"{run_id}: {label}", run_stats(store, run)))
    for unit, rows in by_unit.items():
        console.print(stats_table(title, rows, unit, keys))


@app.command()
def run(spec: Annotated[Path, typer.Argument(help="Experiment spec (TOML), see docs/spec.md.")],
        db: DbOption = None) -> None:
    """Run the experiment a spec describes and store every run."""
    parsed = spec_mod.load(spec)
    store = open_store(db)
    done = run_requests(store, parsed.requests, parsed.name)
    print_results(store, done, f"{parsed.name}: {len(done)} runs", DEMO_COLUMNS)


@app.command()
def demo(db: DbOption = None) -> None:
    """Run a short default experiment on this machine (specs/demo.toml) and print one table."""
    parsed = spec_mod.load(paths.repo_file("specs", "demo.toml"))
    store = open_store(db)
    runnable = []
    for req in parsed.requests:
        missing = RUNTIMES[req.runtime].unavailable()
        if missing:
            err_console.print(f"[yellow]skipping[/] {escape(req.label)}: {escape(missing)}")
        else:
            runnable.append(req)
    for w in sysinfo.warnings(sysinfo.snapshot()):
        err_console.print(f"[yellow]warning:[/] {escape(w)}")
    done = run_requests(store, runnable, "demo")
    print_results(store, done, f"rtscope demo ({store.url})")


@app.command("import")
def import_cmd(
    kind: Annotated[str, typer.Argument(help=f"What the files are: {', '.join(IMPORTERS)}.")],
    files: Annotated[list[Path], typer.Argument(help="Files to import.")],
    variant: Annotated[Optional[str], typer.Option(help="The variant measured, when the file does not say.")] = None,
    set_: Annotated[Optional[list[str]], typer.Option("--set", help="NAME=VALUE recorded as a setting (repeatable), "
                                                      "e.g. --set kernel=preempt_rt.")] = None,
    tag: Annotated[Optional[list[str]], typer.Option(help="Tag the imported runs (repeatable).")] = None,
    db: DbOption = None,
) -> None:
    """Import results measured elsewhere: rtscope sample files, nerves_rt_perf CSV, cyclictest, fio."""
    if kind not in IMPORTERS:
        raise UsageError(f"unknown import kind {kind!r}; valid kinds: {choices(IMPORTERS)}")
    extra = dict(parse_assignment(s) for s in set_ or [])
    converted = [(f, sf) for f in files for sf in IMPORTERS[kind].convert(f, variant, extra)]  # all or nothing
    store = open_store(db)
    with store.transaction() as conn:
        ids = [store.add_run(sf, sf.header.get("environment") or {"note": f"imported from {f}"}, tags=tag,
                             source=str(f), conn=conn) for f, sf in converted]
    for (f, sf), run_id in zip(converted, ids):
        console.print(f"run {run_id}: {escape(str(f))} ({sf.header['workload']} {sf.header['variant']}, "
                      f"{sf.n:,} samples)")
