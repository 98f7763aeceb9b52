"""Static figures (matplotlib), reusable by the CLI and the reports.

Each figure function takes data (runs' samples or histogram dicts) and returns
a matplotlib Figure; `save` writes it as PNG or SVG by the file's suffix.
Figures are built with the object API (no pyplot state), so they are safe in
tests and servers; SVGs carry no date, so the same data give the same file.

    latency.latency_figure(series)   overlaid latency histograms (study 2, OSADL style)
    tasks                            study 5's memory per task
    exceedance.exceedance_matplotlib_figure
                                     1 − F on a log axis with the tail analysis' fit (the tail capability), a panel
                                     per configuration
    bulk                             the axis range that holds the bulk of the samples, far ones stated

It may import the analysis and the leaf modules; the report and the CLI use it.
"""

from __future__ import annotations

from pathlib import Path

from ..errors import UsageError, choices

FORMATS = {".png": "png", ".svg": "svg"}
DPI = 200


def save(fig, path: str | Path) -> Path:
    """Write fig to path; the suffix (.png or .svg) picks the format."""
    path = Path(path)
    fmt = FORMATS.get(path.suffix.lower())
    if fmt is None:
        raise UsageError(f"figure file {path}: unknown format {path.suffix or '(no suffix)'!r}; "
                         f"valid: {choices(FORMATS)}")
    if not path.parent.is_dir():
        raise UsageError(f"cannot write figure {path}: directory {path.parent} does not exist")
    try:
        fig.savefig(path, format=fmt, dpi=DPI, metadata={"Date": None} if fmt == "svg" else {})
    except OSError as e:
        raise UsageError(f"cannot write figure {path}: {e.strerror or e}") from None
    return path
