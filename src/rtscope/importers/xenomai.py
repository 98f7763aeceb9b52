"""Import Xenomai's `latency` output (study 2's third kernel): RTD per-second lines, the RTS summary, -h histograms.

    == Sampling period: 100 us
    == Test mode: periodic user-mode task
    == All results in microseconds
    RTT|  00:00:01  (periodic user-mode task, 100 us period, priority 99)
    RTH|----lat min|----lat avg|----lat max|-overrun|---msw|---lat best|--lat worst
    RTD|     -0.352|      0.621|      3.184|       0|     0|     -0.352|      3.184
    ...
    HSH|--param|--samples-|--average--|---stddev--
    HSS|    min|        10|      0.000|      0.000
    HSS|    avg|     99999|      0.500|      0.500
    HSS|    max|        10|      3.000|      0.000
    ---|-----------|-----------|-----------|--------|------|-------------------------
    RTS|     -0.352|      0.612|      3.184|       0|     0|    00:00:10/00:00:10

One run of workload `timer` (variant `absolute`: latency's periodic task).
The run's headline is the log's own: the RTS line's minimum, average and
maximum. With -h, the `avg` histogram (every sample, in buckets of -B ns,
1 µs by default) is kept as the run's histogram (n from its HSS line, so
percentiles too); without it, Xenomai's log holds no distribution, only the
RTS summary and one RTD line per second, so the run keeps no samples: its
headline is the summary (n: seconds × samples per second) and its percentiles
are not available. The RTD lines are kept in the trailer (`per_second`: each
second's min, avg, max) for a plot over time. Xenomai calibrates its timer, so
latencies can be negative: they are kept as measured (its histogram folds them
into |latency| buckets; the notes say so).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path


from ..errors import UsageError
from ..samplefile import Column, SampleFile, make_header
from .base import Importer, read_text, started

US = 1000  # ns per µs: latency prints microseconds with 3 decimals, i.e. whole ns
MODES = {"periodic user-mode task": "user", "in-kernel periodic task": "kernel", "in-kernel timer handler": "irq"}


@dataclass
class LatencyLog:
    period_us: float | None = None
    mode: str | None = None
    priority: int | None = None
    rtd: list[tuple[float, float, float, int]] = field(default_factory=list)   # min, avg, max, overruns
    summary: tuple[float, float, float, int] | None = None                     # RTS min, avg, max, overruns
    duration: str | None = None
    histogram: dict[int, int] = field(default_factory=dict)                    # avg kind: bucket -> count
    hist_samples: int | None = None
    hist_stddev: float | None = None


def _fail(path, problem: str) -> UsageError:
    return UsageError(f"{path}: not Xenomai latency output: {problem}")


def _fields(line: str) -> list[str]:
    return [f.strip() for f in line.split("|")[1:]]


def parse(text: str, path="<latency>") -> LatencyLog:
    log = LatencyLog()
    for lineno, line in enumerate(text.splitlines(), 1):
        s = line.strip()
        try:
            if m := re.match(r"== Sampling period:\s*([\d.]+)\s*us", s):
                log.period_us = float(m.group(1))
            elif m := re.match(r"== Test mode:\s*(.+)$", s):
                log.mode = MODES.get(m.group(1).strip(), m.group(1).strip())
            elif s.startswith("RTT|"):
                m = re.search(r"priority (\d+)", s)
                log.priority = int(m.group(1)) if m else log.priority
            elif s.startswith("RTD|"):
                f = _fields(s)
                log.rtd.append((float(f[0]), float(f[1]), float(f[2]), int(f[3])))
            elif s.startswith("RTS|"):
                f = _fields(s)
                log.summary = (float(f[0]), float(f[1]), float(f[2]), int(f[3]))
                log.duration = f[5] if len(f) > 5 else None
            elif s.startswith("HSD|"):
                f = _fields(s)
                if f[0] == "avg":
                    lo, _, _hi = f[1].partition("-")
                    log.histogram[int(lo)] = log.histogram.get(int(lo), 0) + int(f[2])
            elif s.startswith("HSS|"):
                f = _fields(s)
                if f[0] == "avg":
                    log.hist_samples, log.hist_stddev = int(f[1]), float(f[3])
        except (ValueError, IndexError):
            raise _fail(path, f"line {lineno}: cannot read {s[:80]!r}") from None
    if log.summary is None and not log.rtd:
        raise _fail(path, "no RTD or RTS line (expected output of Xenomai's latency tool)")
    if log.summary is None:
        raise _fail(path, "no RTS summary line: the run did not end (interrupted or truncated log)")
    return log


def to_samplefile(log: LatencyLog, *, settings: dict, params: dict | None = None, path: Path | None = None,
                  runtime: str = "xenomai", version: str = "unknown", started_at: str | None = None,
                  extra_notes: list[str] | None = None) -> SampleFile:
    import numpy as np
    lo, avg, hi, overruns = log.summary
    notes = ["Xenomai latency prints µs with 3 decimals; stored in ns", *(extra_notes or [])]
    if lo < 0:
        notes.append(f"negative latencies (minimum {lo} µs) are real: Xenomai subtracts its calibrated timer "
                     "anticipation, and can wake early")
    trailer: dict = {"counters": {"overruns": overruns},
                     "per_second": {"min": [round(r[0] * US) for r in log.rtd], "avg": [round(r[1] * US) for r in log.rtd],
                                    "max": [round(r[2] * US) for r in log.rtd]}}
    if log.histogram:
        n = log.hist_samples or sum(log.histogram.values())
        trailer["summary"] = {"n": n, "min": round(lo * US), "mean": round(avg * US), "max": round(hi * US),
                              "stdev": None if log.hist_stddev is None else round(log.hist_stddev * US),
                              "source": "latency's RTS line; n and stddev from its HSS avg line"}
        counts = [0] * (max(log.histogram) + 1)
        for bucket, c in log.histogram.items():
            counts[bucket] = c
        trailer["histograms"] = {"thread0": {
            "unit": "ns", "bucket_width": US, "min_value": 0, "counts": counts, "overflow": n - sum(counts),
            "overflow_cycles": [], "overflow_cycles_dropped": 0, "n": n, "min": round(lo * US), "max": round(hi * US),
            "sum": round(avg * US * n), "sum_exact": False}}
        notes.append("histogram of every sample (latency -h, kind avg) in 1 µs buckets of |latency|: Xenomai folds "
                     "negative values into the bucket of their absolute value; min, avg and max are exact (RTS)")
    else:
        per_second = round(1e6 / log.period_us) if log.period_us else None
        trailer["summary"] = {"n": per_second * len(log.rtd) if per_second else None, "min": round(lo * US),
                              "mean": round(avg * US), "max": round(hi * US), "source": "latency's RTS line"}
        notes.append("Xenomai's log without -h holds no distribution: min, avg and max are its RTS summary, n is "
                     f"{len(log.rtd)} seconds (RTD lines) × {per_second or '?'} samples per second, and the "
                     "percentiles are not available (run latency with -h to keep them)")
    columns = [Column("latency", "ns", "i64")]
    data = {"latency": np.empty(0, dtype=np.int64)}
    merged = dict(params or {})
    if log.period_us is not None:
        merged.setdefault("interval_us", log.period_us)
    merged_settings = dict(settings)
    if log.priority is not None:
        merged_settings.setdefault("rt_priority", log.priority)
    if log.mode:
        merged_settings.setdefault("xenomai_mode", log.mode)
    start = {"started_at": started_at} if started_at else started(path)   # latency prints no start
    header = make_header("timer", "absolute", runtime, "xenomai-latency", version, start.pop("started_at"), columns,
                         merged_settings, merged, xenomai_duration=log.duration, **start)
    if path is not None:
        header["imported_from"] = str(path)
    trailer["notes"] = notes
    return SampleFile(header, columns, data, trailer)


def convert(path: Path, variant: str | None, extra: dict) -> list[SampleFile]:
    if variant not in (None, "absolute"):
        raise UsageError(f"Xenomai latency runs a periodic task: variant absolute, not {variant!r}")
    text = read_text(path)
    return [to_samplefile(parse(text, path), settings=extra, path=Path(path))]


IMPORTERS = (
    Importer("xenomai", "Xenomai's latency tool output: RTD/RTS lines, -h histograms (negative latencies kept)",
             convert),
)
