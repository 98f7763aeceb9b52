"""rtscope report: one self-contained HTML report of stored runs, and figures and tables for a paper."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Optional

import typer

from ..analysis.defaults import ALPHA
from ..words import counted
from .common import DbOption, app, console, err_console, escape, note_experiment, open_store
from .compare import AlphaOpt, BaselineOpt, Experiment, RunIds, Runtime, Tag, Variant, Where, Workload, selection

if TYPE_CHECKING:
    from ..analysis.select import Selection


def report_title(store, runs, sel: Selection) -> str:
    """The selection, and the experiment's name when the runs are of one experiment."""
    ids = {r.experiment_id for r in runs}
    if len(ids) == 1 and None not in ids:
        from ..experiment.execute import get
        return f"rtscope report: {get(store, ids.pop()).name} ({sel.describe()})"
    return f"rtscope report: {sel.describe()}"


@app.command()
def report(
    output: Annotated[Path, typer.Option("--output", "-o", help="The HTML file to write.")] = Path("report.html"),
    figures: Annotated[Optional[Path], typer.Option("--figures", help="Also write every figure as PNG and SVG "
                                                                      "into this directory.")] = None,
    tables: Annotated[Optional[Path], typer.Option("--tables", help="Also write every table as Markdown, LaTeX "
                                                                    "and CSV into this directory (a study's own "
                                                                    "table and its claims too).")] = None,
    dpi: Annotated[int, typer.Option(help="Resolution of the PNG figures (the SVGs are vector).")] = 150,
    title: Annotated[Optional[str], typer.Option(help="Title of the report.")] = None,
    baseline: BaselineOpt = None,
    experiment: Experiment = None, workload: Workload = None, variant: Variant = None, runtime: Runtime = None,
    tag: Tag = None, where: Where = None, run: RunIds = None,
    alpha: AlphaOpt = ALPHA,
    db: DbOption = None,
) -> None:
    """Write one self-contained HTML report (works offline), and optionally figures and tables for a paper."""
    from ..analysis.select import select_runs
    from ..errors import UsageError
    from ..report import html as html_report, model
    if output.is_dir():
        raise UsageError(f"--output {output} is a directory; give a file name such as {output / 'report.html'}")
    if not output.parent.is_dir():
        raise UsageError(f"cannot write {output}: directory {output.parent} does not exist")
    if not 20 <= dpi <= 1200:
        raise UsageError(f"--dpi must be 20..1200, got {dpi}")
    sel = selection(experiment, workload, variant, runtime, tag, where, run)
    store = open_store(db)
    note_experiment(store, experiment)
    runs = select_runs(store, sel)
    rep = model.build(store, runs, title=title or report_title(store, runs, sel), selection=sel.describe(),
                      baseline=baseline, alpha=alpha, parallel=True)
    try:
        html_report.write(rep, output)
    except OSError as e:
        raise UsageError(f"cannot write {output}: {e.strerror or e}") from None
    console.print(f"wrote {escape(str(output))} ({output.stat().st_size / 1e6:.1f} MB, {counted(len(runs), 'run')})")
    if figures is not None:
        from ..report import figures as fig_mod
        files = fig_mod.write(rep, figures, dpi)
        console.print(f"wrote {len(files)} figure files to {escape(str(figures))}")
    if tables is not None:
        from ..report import tables as tab_mod
        files = tab_mod.write(rep, tables)
        console.print(f"wrote {len(files)} table files to {escape(str(tables))}")
    for note in rep.notes:
        err_console.print(f"note: {escape(note)}")
