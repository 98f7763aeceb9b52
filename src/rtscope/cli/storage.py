"""Command storage-table: study 4's table straight from stored storage runs.

Rows are the modes (write(sync), write, read), columns the environments the
runs were measured in (setting `env`, `local` when absent; runs of another
runtime than native, e.g. fio, get their own column), one table per file
configuration (size, block size, direct, fdatasync, cold reads). Runs of one
cell are pooled.

- mean per pass: rtprobe's mean pass time; fio's job runtime / loops (fio
  reports no per-pass times; its runtime has ms resolution, so cells of fio
  runs shorter than 100 ms in all show '-').
- p50 / p99 per pass: rtprobe only (type 7 percentiles of the pass samples).
- p50 / p99 per block: rtprobe from its block histogram (upper bucket edge),
  fio from its per-I/O latencies (expanded json+ bins).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Annotated, Any, Optional

import numpy as np
import typer
from rich import box
from rich.table import Table

from .. import stats
from ..errors import UsageError
from ..select import experiment_id
from ..store import Run, Store
from ..stats import merge_histograms
from .common import DbOption, JsonOption, app, console, escape, open_store, print_json

MODES = (("write_sync", "write(sync)"), ("write", "write"), ("read", "read"))
FIO_MIN_RUNTIME_NS = 100_000_000  # 100 ms: fio's ms runtime is then within 1 %
GROUP_PARAMS = ("size", "block_size", "direct", "fdatasync", "drop_caches")


def column_label(run: Run) -> str:
    """The environment a run was measured in (a VM target is one too), with its runtime and other settings when
    they differ."""
    settings = dict(run["settings"])
    env, target = str(settings.pop("env", "local")), str(settings.pop("target", "local"))
    label = env if target == "local" else target if env == "local" else f"{env}@{target}"
    if run["runtime"] != "native":
        label += f" ({run['runtime']})"
    extra = [f"{k}={v}" for k, v in sorted(settings.items()) if not (k == "mlock" and v is False)]
    return label + (f" [{', '.join(extra)}]" if extra else "")


def group_key(run: Run) -> tuple:
    p = run["params"]
    return tuple(p.get(k) for k in GROUP_PARAMS)


@dataclass
class Cell:
    runs: list[Run] = field(default_factory=list)
    pass_mean: float | None = None
    pass_p50: float | None = None
    pass_p99: float | None = None
    block_p50: float | None = None
    block_p99: float | None = None
    passes: int = 0
    bytes_per_s: float | None = None

    def to_dict(self) -> dict:
        return {"runs": [r.id for r in self.runs], "passes": self.passes, "pass_mean_ns": self.pass_mean,
                "pass_p50_ns": self.pass_p50, "pass_p99_ns": self.pass_p99, "block_p50_ns": self.block_p50,
                "block_p99_ns": self.block_p99, "bytes_per_s": self.bytes_per_s}


def cell_stats(store: Store, runs: list[Run]) -> Cell:
    cell = Cell(runs=runs)
    size = runs[0]["params"].get("size")
    passes_native = [store.primary_samples(r) for r in runs if r["runtime"] == "native"]
    if passes_native and len(passes_native) == len(runs):
        s = stats.summarize(np.concatenate(passes_native))
        cell.pass_mean, cell.pass_p50, cell.pass_p99, cell.passes = s["mean"], s["p50"], s["p99"], s["n"]
        merged = merge_histograms([(r["trailer"].get("histograms") or {}).get("block") for r in runs
                                   if (r["trailer"].get("histograms") or {}).get("block")])
        if merged and merged["n"]:
            b = stats.summarize_histogram(merged)
            cell.block_p50, cell.block_p99 = b["p50"], b["p99"]
    elif not passes_native:
        counters = [r["trailer"].get("counters") or {} for r in runs]
        passes = sum(int(c.get("passes", 0)) for c in counters)
        runtime = sum(int(c.get("runtime_ns", 0)) for c in counters)
        cell.passes = passes
        # fio's runtime is in whole ms: below FIO_MIN_RUNTIME_NS a mean would be mostly rounding.
        if passes and all("runtime_ns" in c for c in counters) and runtime >= FIO_MIN_RUNTIME_NS:
            cell.pass_mean = runtime / passes
        b = stats.summarize(np.concatenate([store.primary_samples(r) for r in runs]))
        cell.block_p50, cell.block_p99 = b["p50"], b["p99"]
    if cell.pass_mean and size:
        cell.bytes_per_s = size / (cell.pass_mean * 1e-9)
    return cell


@dataclass
class StorageTable:
    params: dict[str, Any]
    columns: list[str]
    cells: dict[tuple[str, str], Cell]  # (variant, column) -> cell


def build_tables(store: Store, runs: list[Run]) -> list[StorageTable]:
    groups: dict[tuple, dict[tuple[str, str], list[Run]]] = {}
    for r in runs:
        groups.setdefault(group_key(r), {}).setdefault((r["variant"], column_label(r)), []).append(r)
    tables = []
    for key, cells in groups.items():
        # local first, then the environments in the order they were measured (a spec's env list order).
        first = {}
        for (_, c), rs in cells.items():
            first[c] = min(first.get(c, rs[0].id), *(r.id for r in rs))
        columns = sorted(first, key=lambda c: (not c.startswith("local"), first[c]))
        tables.append(StorageTable(dict(zip(GROUP_PARAMS, key)), columns,
                                   {k: cell_stats(store, v) for k, v in cells.items()}))
    return tables


def human_time(ns: float | None) -> str:
    """The study's style: 2.35 ms, 13.58 µs, 36.05 s."""
    if ns is None:
        return "-"
    for scale, unit in ((1e9, "s"), (1e6, "ms"), (1e3, "µs")):
        if abs(ns) >= scale:
            return f"{ns / scale:,.2f} {unit}"
    return f"{ns:.0f} ns"


def human_bytes(n: Any) -> str:
    if not isinstance(n, (int, float)):
        return str(n)
    for shift, unit in ((40, "TiB"), (30, "GiB"), (20, "MiB"), (10, "KiB")):
        if n >= 1 << shift:
            v = n / (1 << shift)
            return f"{v:g} {unit}" if v == int(v) else f"{v:.1f} {unit}"
    return f"{n} bytes"


def title_of(t: StorageTable) -> str:
    p = t.params
    extra = [k for k in ("direct", "fdatasync", "drop_caches") if p.get(k)]
    return (f"storage: {human_bytes(p['size'])} file, {human_bytes(p['block_size'])} blocks"
            + (f", {', '.join(extra)}" if extra else ""))


def render(t: StorageTable, what: str) -> Table:
    heads = {"mean": "mean time per pass", "pass": "per pass p50 / p99", "block": "per block p50 / p99"}
    table = Table(title=heads[what], box=box.SIMPLE_HEAD, title_justify="left")
    table.add_column("")
    for c in t.columns:
        table.add_column(escape(c), justify="right")
    for variant, label in MODES:
        row = []
        present = False
        for c in t.columns:
            cell = t.cells.get((variant, c))
            present |= cell is not None
            if cell is None:
                row.append("")
            elif what == "mean":
                row.append(human_time(cell.pass_mean))
            elif what == "pass":
                row.append("-" if cell.pass_p50 is None else f"{human_time(cell.pass_p50)} / {human_time(cell.pass_p99)}")
            else:
                row.append("-" if cell.block_p50 is None else
                           f"{human_time(cell.block_p50)} / {human_time(cell.block_p99)}")
        if present:
            table.add_row(label, *row)
    return table


@app.command("storage-table")
def storage_table(
    runs: Annotated[Optional[list[int]], typer.Argument(metavar="[RUN]...", help="Storage run ids [default: all].")] = None,
    experiment: Annotated[Optional[str], typer.Option(help="Only the runs of this experiment (id or name).")] = None,
    db: DbOption = None,
    json_out: JsonOption = False,
) -> None:
    """Study 4's table: mean time per pass for write(sync) / write / read in each environment, and percentiles."""
    if runs and experiment:
        raise UsageError("give either --experiment or run ids, not both")
    store = open_store(db)
    if runs:
        found = store.runs(ids=list(runs))
        missing = sorted(set(runs) - {r.id for r in found})
        if missing:
            raise UsageError(f"no run {missing[0]} in store {store.url} (see `rtscope runs --workload storage`)")
        other = [r for r in found if r["workload"] != "storage"]
        if other:
            raise UsageError(f"run {other[0].id} is a {other[0]['workload']} run, not storage")
    else:
        exp = experiment_id(store, experiment) if experiment else None
        found = store.runs(workload="storage", experiment_id=exp)
    if not found:
        where = f" of experiment {experiment}" if experiment else ""
        raise UsageError(f"no storage runs{where} in store {store.url}; measure some first (docs/storage.md)")
    tables = build_tables(store, found)
    if json_out:
        print_json([{"params": t.params, "columns": t.columns,
                     "cells": [{"variant": v, "column": c, **cell.to_dict()} for (v, c), cell in t.cells.items()]}
                    for t in tables])
        return
    for t in tables:
        console.print(f"[bold]{escape(title_of(t))}[/] ({sum(len(c.runs) for c in t.cells.values())} runs)")
        for what in ("mean", "pass", "block"):
            console.print(render(t, what))
    console.print("mean per pass: rtprobe's mean pass time; fio: job runtime / loops (ms resolution: '-' when fio ran "
                  "less than 100 ms). "
                  "Percentiles: per pass, linear interpolation (type 7); per block, rtprobe's histogram "
                  "(upper bucket edge) and fio's json+ bins.", style="dim")
