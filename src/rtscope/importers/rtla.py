"""Import `rtla timerlat hist` output: the kernel's timerlat tracer, per-CPU histograms of timer latency.

    # RTLA timerlat histogram
    # Time unit is microseconds (us)          (nanoseconds (ns) with -n/--nano)
    # Duration:   0 00:00:02
    Index   IRQ-000   Thr-000   IRQ-001   Thr-001      (Usr-NNN columns with -u/-U, rtla >= 6.5)
    19            1         0         0         0      (bucket start, in the unit; empty buckets omitted
    ...                                                 unless --with-zeros)
    over:        82       103        79        90      (values at or beyond entries x bucket size)
    count:     1884      1884      1905      1905
    min:         19        43        28        39
    avg:        131       165       116       152      (the tool's sum / count, truncated)
    max:       5915      6916      8622      9005
    ALL:        IRQ       Thr                          (rtla >= 6.8: every CPU together; optional)
    ...

One run of workload `timer` (variant `absolute`: timerlat's timer is periodic) per file. Each context kind
is kept per CPU: the *thread* latency (timerlat's per-CPU thread woken by the timer: the latency rtprobe
timer and cyclictest measure) is the run's primary distribution, one trailer histogram per CPU
(`thread<i>` with its `cpu`); the IRQ latency (when the timer's interrupt handler ran) and the user-space
thread's (-u) are kept beside it, under the trailer's `contexts`, with rtla's own figures. With --no-thread
the IRQ context is the primary. The run's headline is rtla's own: count, min, avg and max from the summary
rows (every CPU together: n and max are the sum and maximum of the per-CPU rows, the mean their
count-weighted average, or the ALL rows' where rtla printed them). Bad or unknown output is a UsageError and
nothing is stored.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, field
from pathlib import Path

from ..errors import UsageError
from ..samplefile import Column, SampleFile, make_header
from .base import Importer, read_text, started

UNITS = {"us": 1000, "ns": 1}
KINDS = {"IRQ": "irq", "Thr": "thread", "Usr": "user"}
PRIMARY_ORDER = ("thread", "user", "irq")  # the first present is the run's primary context
SUMMARY_ROWS = ("over", "count", "min", "avg", "max")
COLUMN = re.compile(r"^(IRQ|Thr|Usr)-(\d+)$")


@dataclass
class TimerlatHist:
    """What rtla printed, in its own unit (`unit_ns` ns each)."""

    unit_ns: int
    duration: str | None
    columns: list[tuple[str, int]]                                   # (context kind, CPU), in print order
    rows: dict[int, list[int]] = field(default_factory=dict)         # bucket start -> one count per column
    summary: dict[str, list[int | None]] = field(default_factory=dict)   # over/count/min/avg/max per column
    all_cpus: dict[str, dict[str, int | None]] = field(default_factory=dict)  # ALL rows: kind -> row -> value

    def kinds(self) -> list[str]:
        return [k for k in PRIMARY_ORDER if any(c[0] == k for c in self.columns)]


def _fail(path, problem: str) -> UsageError:
    return UsageError(f"{path}: not `rtla timerlat hist` output: {problem}")


def _value(text: str) -> int | None:
    return None if text == "-" else int(text)  # rtla prints "-" for a column with no sample


def parse(text: str, path="<rtla>") -> TimerlatHist:
    unit_ns, duration, hist = None, None, None
    all_kinds: list[str] | None = None
    for lineno, line in enumerate(text.splitlines(), 1):
        s = line.strip()
        if not s:
            continue
        if m := re.match(r"# Time unit is \w+ \((us|ns)\)", s):
            unit_ns = UNITS[m.group(1)]
            continue
        if m := re.match(r"# Duration:\s*(.+)$", s):
            duration = m.group(1).strip()
            continue
        if s.startswith("#"):
            continue
        words = s.split()
        if words[0] == "Index":
            if unit_ns is None:
                raise _fail(path, f"line {lineno}: the Index line comes before '# Time unit is ...'")
            columns = []
            for w in words[1:]:
                m = COLUMN.match(w)
                if not m:
                    raise _fail(path, f"line {lineno}: unknown column {w!r} (expected IRQ-NNN, Thr-NNN or Usr-NNN)")
                columns.append((KINDS[m.group(1)], int(m.group(2))))
            hist = TimerlatHist(unit_ns, duration, columns)
            continue
        if hist is None:
            if words[0] == "ALL:" or words[0].rstrip(":") in SUMMARY_ROWS or words[0].isdigit():
                raise _fail(path, f"line {lineno}: histogram rows without an 'Index IRQ-000 Thr-000 ...' header "
                                  "(run rtla without --no-header and --no-index)")
            continue  # rtla's other messages (e.g. a stop by threshold) before the histogram
        if words[0] == "ALL:":
            all_kinds = [KINDS.get(w) for w in words[1:]]
            if None in all_kinds:
                raise _fail(path, f"line {lineno}: cannot read the ALL line {s[:80]!r}")
            continue
        name = words[0].rstrip(":")
        try:
            if words[0].endswith(":") and name in SUMMARY_ROWS:
                values = [_value(w) for w in words[1:]]
                if all_kinds is not None:
                    if len(values) != len(all_kinds):
                        raise _fail(path, f"line {lineno}: the ALL {name} row has {len(values)} values for "
                                          f"{len(all_kinds)} contexts")
                    for k, v in zip(all_kinds, values):
                        hist.all_cpus.setdefault(k, {})[name] = v
                    continue
                if name in hist.summary:
                    raise _fail(path, f"line {lineno}: a second {name}: row")
                if len(values) != len(hist.columns):
                    raise _fail(path, f"line {lineno}: the {name}: row has {len(values)} values for "
                                      f"{len(hist.columns)} columns")
                hist.summary[name] = values
            elif words[0].isdigit() and not hist.summary:
                counts = [int(w) for w in words[1:]]
                if len(counts) != len(hist.columns):
                    raise _fail(path, f"line {lineno}: bucket {words[0]} has {len(counts)} counts for "
                                      f"{len(hist.columns)} columns")
                hist.rows[int(words[0])] = counts
            elif hist.summary.keys() >= set(SUMMARY_ROWS):
                break  # rtla's messages after the summary (a stop by threshold, its analysis, missed events)
            else:
                raise _fail(path, f"line {lineno}: cannot read {s[:80]!r}")
        except ValueError:
            raise _fail(path, f"line {lineno}: cannot read {s[:80]!r}") from None
    if hist is None:
        raise _fail(path, "no '# RTLA timerlat histogram' table (an 'Index IRQ-000 Thr-000 ...' line)")
    missing = [r for r in SUMMARY_ROWS if r not in hist.summary]
    if missing:
        raise _fail(path, f"no {', '.join(m + ':' for m in missing)} summary row(s): rtla was stopped before it "
                          "printed its summary, or ran with --no-summary")
    for i, (kind, cpu) in enumerate(hist.columns):
        counted = sum(r[i] for r in hist.rows.values()) + (hist.summary["over"][i] or 0)
        if counted != hist.summary["count"][i]:
            raise _fail(path, f"CPU {cpu} {kind}: the buckets and over: hold {counted} samples, count: says "
                              f"{hist.summary['count'][i]} (a truncated or edited file)")
    return hist


def bucket_units(hist: TimerlatHist) -> int:
    """The bucket size (-b) in rtla's unit, which rtla does not print: the largest that divides every printed
    bucket start (1, rtla's default, with fewer than two non-empty buckets to tell)."""
    return (math.gcd(*hist.rows) or 1) if len(hist.rows) >= 2 else 1


def _histogram(hist: TimerlatHist, i: int, bucket: int) -> dict:
    """Column i as a sample-file histogram (ns); its min, max and n are rtla's, its sum is avg × count."""
    u = hist.unit_ns
    n = hist.summary["count"][i]
    filled = {start // bucket: r[i] for start, r in hist.rows.items() if r[i]}
    counts = [0] * (max(filled) + 1 if filled else 0)
    for b, c in filled.items():
        counts[b] = c
    lo, avg, hi = (hist.summary[k][i] for k in ("min", "avg", "max"))
    return {"unit": "ns", "bucket_width": bucket * u, "min_value": 0, "counts": counts,
            "overflow": hist.summary["over"][i], "overflow_cycles": [], "overflow_cycles_dropped": 0, "n": n,
            "min": None if lo is None else lo * u, "max": None if hi is None else hi * u,
            "sum": 0 if avg is None else avg * u * n, "sum_exact": False, "cpu": hist.columns[i][1]}


def context_summary(hist: TimerlatHist, kind: str) -> dict:
    """rtla's figures of one context over every CPU (ns): from its ALL rows where it printed them."""
    u = hist.unit_ns
    idx = [i for i, c in enumerate(hist.columns) if c[0] == kind and hist.summary["count"][i]]
    n = sum(hist.summary["count"][i] for i in idx)
    if not n:
        return {"n": 0, "min": None, "mean": None, "max": None, "stdev": None}
    printed = hist.all_cpus.get(kind, {})
    mean = printed.get("avg")
    mean = mean * u if mean is not None else \
        sum(hist.summary["avg"][i] * hist.summary["count"][i] for i in idx) * u / n
    return {"n": n, "min": min(hist.summary["min"][i] for i in idx) * u, "mean": mean,
            "max": max(hist.summary["max"][i] for i in idx) * u, "stdev": None}


def to_samplefile(hist: TimerlatHist, *, settings: dict, params: dict | None = None, path: Path | None = None,
                  runtime: str = "rtla", version: str = "unknown", started_at: str | None = None,
                  bucket: int | None = None, extra_notes: list[str] | None = None) -> SampleFile:
    """The run: the primary context's per-CPU histograms and headline; the other contexts beside it.
    `bucket`: the -b the run was made with (rtla's unit); else the largest that fits every printed bucket."""
    import numpy as np
    inferred = not bucket
    bucket = bucket or bucket_units(hist)
    kinds = hist.kinds()
    primary = kinds[0]
    unit = "µs" if hist.unit_ns == 1000 else "ns"
    per_kind = {k: {f"cpu{cpu}": _histogram(hist, i, bucket) for i, (kind, cpu) in enumerate(hist.columns)
                    if kind == k} for k in kinds}
    summaries = {k: context_summary(hist, k) for k in kinds}
    head = summaries[primary]
    if not head["n"]:
        raise UsageError(f"{path or 'rtla output'}: rtla recorded no {primary} latency sample")
    trailer: dict = {
        "histograms": {f"thread{i}": h for i, h in enumerate(per_kind[primary].values())},
        "summary": {**head, "source": f"rtla's count:, min:, avg: and max: rows, {primary} context"
                                      + (" (its ALL rows)" if primary in hist.all_cpus else
                                         ", every CPU together (avg weighted by count)")},
        "primary_context": primary,
        "contexts": {k: {"summary": summaries[k], "histograms": per_kind[k]} for k in kinds if k != primary},
    }
    notes = [f"rtla timerlat hist in {unit} ({'-n' if hist.unit_ns == 1 else 'without -n'}): min and max exact to "
             f"1 {unit}, avg is rtla's sum / count truncated to 1 {unit}; histogram buckets of {bucket} {unit}"
             + (" (rtla does not print -b: the largest size that divides every printed bucket start)"
                if inferred else ""),
             f"primary: timerlat's {primary} latency, one histogram per CPU"
             + (" (the thread's wake-up, comparable to rtprobe timer and cyclictest)" if primary == "thread" else "")]
    for k in kinds[1:]:
        s = summaries[k]
        if s["n"]:
            notes.append(f"rtla {k} latency: n {s['n']:,}, min {s['min'] / 1000:g} µs, avg {s['mean'] / 1000:.3g} µs, "
                         f"max {s['max'] / 1000:g} µs")
    notes += extra_notes or []
    trailer["notes"] = notes
    columns = [Column("latency", "ns", "i64")]
    start = {"started_at": started_at} if started_at else started(path)   # rtla prints no start
    header = make_header("timer", "absolute", runtime, "rtla-timerlat", version, start.pop("started_at"), columns,
                         settings, params or {}, rtla_duration=hist.duration, **start)
    if path is not None:
        header["imported_from"] = str(path)
    return SampleFile(header, columns, {"latency": np.empty(0, dtype=np.int64)}, trailer)


def convert(path: Path, variant: str | None, extra: dict) -> list[SampleFile]:
    if variant not in (None, "absolute"):
        raise UsageError(f"rtla timerlat measures a periodic timer: variant absolute, not {variant!r}")
    text = read_text(path)
    if not text.strip():
        raise _fail(path, "empty file")
    return [to_samplefile(parse(text, path), settings=extra, path=Path(path))]


IMPORTERS = (
    Importer("rtla", "rtla timerlat hist output: per-CPU thread (primary) and IRQ latency histograms, µs or -n ns",
             convert),
)
