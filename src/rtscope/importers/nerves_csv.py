"""Importer `nerves-csv`: the CSV of nerves_rt_perf (study 1), `count,time,heap_size,minor_gcs`.

`time` is in µs (the study timed with :erlang.monotonic_time in µs); it is
stored in ns like every rtscope time. The file does not say which function
was measured: `--variant` (sum, fib, sleep, nothing) does.
"""

from __future__ import annotations

import csv
from pathlib import Path


from ..errors import UsageError, choices
from ..samplefile import Column, SampleFile, make_header
from ..workloads import WORKLOADS
from .base import Importer, started

REQUIRED = ("count", "time")
SIDE = ("heap_size", "minor_gcs")


def convert(path: Path, variant: str | None, settings: dict) -> list[SampleFile]:
    import numpy as np
    valid = WORKLOADS["exec"].variants
    if variant not in valid:
        raise UsageError(f"nerves-csv needs --variant to say which function was measured; valid: {choices(valid)}")
    try:
        with open(path, newline="") as f:
            rows = list(csv.reader(f))
    except OSError as e:
        raise UsageError(f"cannot read {path}: {e.strerror}") from None
    except (UnicodeDecodeError, csv.Error):
        raise UsageError(f"{path}: not a nerves_rt_perf CSV: binary data, not text") from None
    if not rows:
        raise UsageError(f"{path}: empty file")
    head = [h.strip() for h in rows[0]]
    missing = [c for c in REQUIRED if c not in head]
    if missing:
        raise UsageError(f"{path}: not a nerves_rt_perf CSV: missing column(s) {', '.join(missing)}; "
                         f"expected {','.join(REQUIRED + SIDE)}")
    side = [c for c in SIDE if c in head]
    values: dict[str, list] = {c: [] for c in ("time", *side)}
    for lineno, row in enumerate(rows[1:], 2):
        if not row:
            continue
        try:
            for c in values:
                values[c].append(float(row[head.index(c)]))
        except (ValueError, IndexError):
            raise UsageError(f"{path}, line {lineno}: not a number in {row!r}") from None
    columns = [Column("duration", "ns", "i64"), *(Column(c, "words" if c == "heap_size" else "count", "i64")
                                                   for c in side)]
    data = {"duration": np.round(np.asarray(values["time"]) * 1000).astype(np.int64)}
    data.update({c: np.asarray(values[c], dtype=np.int64) for c in side})
    start = started(path)   # the CSV records no start
    header = make_header("exec", variant, "beam", "nerves_rt_perf-csv", "1", start.pop("started_at"), columns,
                         settings, {"iterations": len(data["duration"])}, imported_from=str(path), **start)
    return [SampleFile(header, columns, data, {"notes": ["imported from a nerves_rt_perf CSV: µs resolution"]})]


IMPORTERS = (
    Importer("nerves-csv", "nerves_rt_perf CSV (count,time,heap_size,minor_gcs; time in µs)", convert),
)
