"""rtscope runs: the stored runs, one line each."""

from __future__ import annotations

from typing import Annotated, Optional

import typer

from ..analysis.documents import run_summary
from ..words import id_ranges
from .common import DbOption, JsonOption, Table, app, console, escape, open_store, print_json, settings_text


@app.command("runs")
def list_runs(
    db: DbOption = None,
    workload: Annotated[Optional[str], typer.Option(help="Only runs of this workload.")] = None,
    experiment: Annotated[Optional[int], typer.Option(help="Only runs of this experiment id.")] = None,
    json_out: JsonOption = False,
) -> None:
    """List stored runs."""
    store = open_store(db)
    found = store.runs(workload=workload, experiment_id=experiment)
    if json_out:
        print_json([run_summary(r) for r in found])
        return
    table = Table(title=f"runs in {store.url}")
    for col in ("id", "workload", "variant", "runtime", "settings", "samples", "started (UTC)", "experiment"):
        table.add_column(col, justify="right" if col in ("id", "samples") else "left")
    for r in found:
        table.add_row(str(r.id), r.workload, r.variant, r.runtime, escape(settings_text(r.settings, r)),
                      f"{r.n_measured:,}", r.started_at, str(r.experiment_id or ""))
    console.print(table)
    for source, what in (("file modified", "the file's modification time (the tool records no start)"),
                         ("not recorded", "not recorded (the tool records no start)")):
        if ids := [r.id for r in found if r.started_from == source]:
            console.print(f"started of run{'s' if len(ids) > 1 else ''} {id_ranges(ids)}: {what}", soft_wrap=True)
    if not found:
        console.print("no runs yet: try `rtscope demo`")
