"""Study 5's figure: memory by number of tasks, every point and each task model's least-squares line."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from ..analysis.fit import Series
from ..errors import UsageError, choices

FIGURE_SUFFIXES = (".png", ".svg", ".pdf")


def r_text(v: float | None) -> str:
    return "undefined (the values are all equal)" if v is None else f"{v:.4f}"


def quantity(column: str, unit: str) -> str:
    return column if column == unit or not unit else f"{column}, {unit}"


def write_figure(path: Path, series: list[Series], column: str, unit: str, log: bool) -> None:
    """Scatter of every point with each model's fitted line."""
    if path.suffix.lower() not in FIGURE_SUFFIXES:
        raise UsageError(f"figure {path}: unknown file type {path.suffix or '(none)'!r}; "
                         f"valid: {choices(FIGURE_SUFFIXES)}")
    if not path.parent.is_dir():
        raise UsageError(f"figure {path}: directory {path.parent} does not exist")
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(7, 4.5))
    for s in series:
        keep = (s.tasks > 0) & (s.values > 0) if log else np.ones(len(s.tasks), bool)
        dots = ax.scatter(s.tasks[keep], s.values[keep], s=18, label=None if s.fit else s.label)
        if s.fit is not None:
            xs = np.geomspace(max(s.tasks.min(), 1), s.tasks.max(), 200) if log else \
                np.linspace(s.tasks.min(), s.tasks.max(), 2)
            ys = s.fit.at(xs)
            ok = ys > 0 if log else np.ones(len(xs), bool)
            ax.plot(xs[ok], ys[ok], color=dots.get_facecolor()[0], linewidth=1,
                    label=f"{s.label}: {s.fit.slope:,.0f} {unit}/task, r² {r_text(s.fit.r2)}")
    if log:
        ax.set_xscale("log")
        ax.set_yscale("log")
    ax.set_xlabel("tasks")
    ax.set_ylabel(quantity(column, unit))
    ax.set_title("memory by number of tasks, least-squares lines")
    ax.grid(True, alpha=0.3)
    ax.legend(fontsize=7)
    fig.tight_layout()
    try:
        fig.savefig(path)
    except OSError as e:
        raise UsageError(f"cannot write figure {path}: {e.strerror or e}") from None
    finally:
        plt.close(fig)
