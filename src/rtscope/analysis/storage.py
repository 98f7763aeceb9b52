"""Study 4's table, computed from stored storage runs: one table per file configuration.

Rows are the modes (write(sync), write, read), columns the environments the
runs were measured in (setting `env`, `local` when absent; a target other than
local, e.g. a VM; runs of another runtime than native, e.g. fio, get their own
column), one table per file configuration (size, block size, direct,
fdatasync, cold reads). Runs of one cell are pooled.

- mean per pass: rtprobe's mean pass time; fio's job runtime / loops (fio
  reports no per-pass times; its runtime has ms resolution, so cells of fio
  runs shorter than 100 ms in all have none).
- p50 / p99 per pass: rtprobe only (type 7 percentiles of the pass samples).
- p50 / p99 per block: rtprobe from its block histogram (upper bucket edge),
  fio from its per-I/O latencies (expanded json+ bins).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ..store import Run, Store
from . import stats
from .stats import merge_histograms

MODES = (("write_sync", "write(sync)"), ("write", "write"), ("read", "read"))
FIO_MIN_RUNTIME_NS = 100_000_000  # 100 ms: fio's ms runtime is then within 1 %
GROUP_PARAMS = ("size", "block_size", "direct", "fdatasync", "drop_caches")


def human_time(ns: float | None) -> str:
    """The study's style: 2.35 ms, 13.58 µs, 36.05 s."""
    if ns is None:
        return "-"
    for scale, unit in ((1e9, "s"), (1e6, "ms"), (1e3, "µs")):
        if abs(ns) >= scale:
            return f"{ns / scale:,.2f} {unit}"
    return f"{ns:.0f} ns"


def column_label(run: Run) -> str:
    """The environment a run was measured in (a VM target is one too), with its runtime and other settings when
    they differ."""
    settings = dict(run.settings)
    env, target = str(settings.pop("env", "local")), str(settings.pop("target", "local"))
    label = env if target == "local" else target if env == "local" else f"{env}@{target}"
    if run.runtime != "native":
        label += f" ({run.runtime})"
    extra = [f"{k}={v}" for k, v in sorted(settings.items()) if not (k == "mlock" and v is False)]
    return label + (f" [{', '.join(extra)}]" if extra else "")


def group_key(run: Run) -> tuple:
    p = run.params
    return tuple(p.get(k) for k in GROUP_PARAMS)


@dataclass
class StorageCell:
    """One cell of the storage table: the pooled runs of one mode in one environment."""

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


def cell_stats(store: Store, runs: list[Run]) -> StorageCell:
    cell = StorageCell(runs=runs)
    size = runs[0].params.get("size")
    passes_native = [store.primary_samples(r) for r in runs if r.runtime == "native"]
    if passes_native and len(passes_native) == len(runs):
        s = stats.summarize(np.concatenate(passes_native))
        cell.pass_mean, cell.pass_p50, cell.pass_p99, cell.passes = s["mean"], s["p50"], s["p99"], s["n"]
        merged = merge_histograms([(r.trailer.get("histograms") or {}).get("block") for r in runs
                                   if (r.trailer.get("histograms") or {}).get("block")])
        if merged and merged["n"]:
            b = stats.summarize_histogram(merged)
            cell.block_p50, cell.block_p99 = b["p50"], b["p99"]
    elif not passes_native:
        counters = [r.trailer.get("counters") or {} for r in runs]
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
    cells: dict[tuple[str, str], StorageCell]  # (variant, column) -> cell


def environment_order(store: Store, runs: list[Run]) -> list[str]:
    """`local`, then the environments and targets in the order their experiments' specs define them."""
    order = ["local"]
    for exp_id in sorted({r.experiment_id for r in runs if r.experiment_id is not None}):
        raw = ((store.experiment_row(exp_id) or {}).get("spec") or {}).get("parsed") or {}
        for table in ("environments", "targets"):
            order += [name for name in raw.get(table) or {} if name not in order]
    return order


def column_rank(label: str, order: list[str]) -> tuple:
    """One stable column order for every block: environments in `order` (others after them, by name), each
    with rtscope's own column first and the peer tool's beside it."""
    base = label.split(" (")[0].split(" [")[0]
    place = order.index(base) if base in order else len(order)
    return place, base, " (" in label, label


def build_tables(store: Store, runs: list[Run]) -> list[StorageTable]:
    order = environment_order(store, runs)
    groups: dict[tuple, dict[tuple[str, str], list[Run]]] = {}
    for r in runs:
        groups.setdefault(group_key(r), {}).setdefault((r.variant, column_label(r)), []).append(r)
    tables = []
    for key, cells in groups.items():
        columns = sorted({c for _, c in cells}, key=lambda c: column_rank(c, order))
        tables.append(StorageTable(dict(zip(GROUP_PARAMS, key)), columns,
                                   {k: cell_stats(store, v) for k, v in cells.items()}))
    return tables
