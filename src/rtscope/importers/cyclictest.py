"""Importers for rt-tests cyclictest output, in each of its forms (study 2's logs among them).

  cyclictest            autodetect the form below
  cyclictest-json       --json=FILE: per-thread histogram, cycles, min, max, avg (rt-tests 2.x)
  cyclictest-histogram  -h/-H US text: buckets, totals, min/avg/max, overflows and overflow cycles
  cyclictest-verbose    -v text: every sample as "thread: cycle: value"

Values are µs unless cyclictest ran with -N (ns): JSON says so (`resolution_in_ns`);
for the text forms give `--set unit=ns` (otherwise the verbose summary line's
field widths decide, else µs). Everything is stored in ns.

rt-tests 2.x quirks handled: the JSON keys "cmdline:" and "rt_test_version:"
carry a colon; the JSON has no overflow counts (derived: cycles − Σ counts)
and no overflow cycle numbers (those are only in the text form); the text
prints at most `histogram` overflow cycles per thread and "# N others".
A bad or unknown file is a UsageError and nothing is stored.
"""

from __future__ import annotations

import json
import re
import shlex
from dataclasses import dataclass, field
from datetime import timezone
from email.utils import parsedate_to_datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

from .. import sysinfo
from ..errors import UsageError, choices
from ..samplefile import Column, SampleFile, make_header
from .base import Importer, started

if TYPE_CHECKING:  # numpy is imported where samples are made or read: `rtscope --help` needs none
    import numpy as np

FORMS = ("json", "histogram", "verbose")
VARIANTS = ("absolute", "relative")
UNITS = {"us": 1000, "ns": 1}
SAMPLE_LINE = re.compile(r"^\s*(\d+):\s*(\d+):\s*(-?\d+)\s*$")
SUMMARY_LINE = re.compile(r"^T:\s*(\d+)\s*\(\s*\d+\)\s*P:\s*\d+\s*I:\s*\d+\s*C:\s*(\d+)\s*Min:\s*(-?\d+)"
                          r"\s*Act:(\s*-?\d+)\s*Avg:\s*(-?\d+)\s*Max:\s*(-?\d+)")
# Lines cyclictest prints around the samples; anything else in a verbose log is an error.
VERBOSE_NOISE = re.compile(r"^(#|Max CPUs|Online CPUs|Using \d+ cpus|Thread \d+ Interval:|Thread \d+ using cpu|"
                           r"policy:|defaulting realtime priority|WARN|Warning|libnuma|T:\s*\d+\s*\()")
HIST_ROW = re.compile(r"^(\d+)((?:\s+\d+)+)\s*$")


@dataclass
class ThreadHistogram:
    """One thread's histogram in cyclictest's unit (bucket i counts values in [i, i+1))."""

    counts: list[int]
    n: int
    min: int
    max: int
    avg: float | None = None          # as printed (text: truncated integer; JSON: 2 decimals)
    overflow: int = 0
    overflow_cycles: list[int] = field(default_factory=list)
    overflow_cycles_dropped: int = 0
    cpu: int | None = None


@dataclass
class CyclictestLog:
    form: str
    unit_ns: int                                  # 1000 (µs) or 1 (ns, -N)
    histograms: dict[int, ThreadHistogram] = field(default_factory=dict)
    samples: dict[int, tuple[np.ndarray, np.ndarray]] = field(default_factory=dict)  # thread -> (cycles, values)
    summaries: dict[int, dict[str, int]] = field(default_factory=dict)  # verbose "T:" lines
    version: str | None = None
    cmdline: str | None = None
    started_at: str | None = None
    sysinfo: dict[str, Any] | None = None
    notes: list[str] = field(default_factory=list)


def _fail(path, problem: str) -> UsageError:
    return UsageError(f"{path}: not a usable cyclictest log: {problem}")


# --- JSON --------------------------------------------------------------------------------------------------

def _key(doc: dict, name: str) -> Any:
    """rt-tests 2.x writes some keys with a trailing colon ("cmdline:")."""
    return doc.get(name, doc.get(name + ":"))


def _rfc3339(text: str | None) -> str | None:
    if not text:
        return None
    try:
        when = parsedate_to_datetime(text)
    except (TypeError, ValueError):
        return None
    return when.astimezone(timezone.utc).isoformat(timespec="milliseconds").replace("+00:00", "Z")


def _histogram_range(cmdline: str | None) -> int:
    return options_from_cmdline(cmdline)[1].get("histogram_us", 0)


def parse_json(text: str, path="<json>", require_histogram: bool = True) -> CyclictestLog:
    """require_histogram=False: also a run without -h (only its metadata and min/avg/max are of use)."""
    try:
        doc = json.loads(text)
    except json.JSONDecodeError as e:
        raise _fail(path, f"not valid JSON ({e})") from None
    if not isinstance(doc, dict) or not isinstance(doc.get("thread"), dict) or not doc["thread"]:
        raise _fail(path, "JSON without a \"thread\" object: not cyclictest --json output")
    unit_ns = 1 if doc.get("resolution_in_ns") else 1000
    log = CyclictestLog("json", unit_ns, version=_key(doc, "rt_test_version"), cmdline=_key(doc, "cmdline"),
                        started_at=_rfc3339(doc.get("start_time")), sysinfo=doc.get("sysinfo"))
    for name, t in doc["thread"].items():
        try:
            index = int(name)
            cycles, lo, hi = int(t["cycles"]), int(t["min"]), int(t["max"])
            avg = float(t["avg"])
        except (KeyError, TypeError, ValueError):
            raise _fail(path, f"thread {name!r} lacks integer cycles/min/max or a numeric avg") from None
        try:
            pairs = sorted((int(k), int(v)) for k, v in t.get("histogram", {}).items())
        except (AttributeError, ValueError, TypeError):
            raise _fail(path, f"thread {name}: histogram is not an object of bucket -> count") from None
        # Without -h cyclictest still writes "histogram": {} (empty); with -h an empty one means all overflowed.
        if not pairs and not _histogram_range(log.cmdline) and require_histogram:
            raise _fail(path, f"thread {name} has no histogram: cyclictest ran without -h/--histogram, so the "
                              "file holds only min/avg/max; run it with -h US (or import its -v output)")
        if any(k < 0 or v < 0 for k, v in pairs):
            raise _fail(path, f"thread {name}: negative bucket or count in histogram")
        # JSON lists only the buckets that are not empty; the range is -h's value, when the command line says.
        counts = [0] * max((pairs[-1][0] + 1) if pairs else 0, _histogram_range(log.cmdline))
        for k, v in pairs:
            counts[k] = v
        inside = sum(counts)
        if inside > cycles:
            raise _fail(path, f"thread {name}: histogram holds {inside} values but only {cycles} cycles ran")
        log.histograms[index] = ThreadHistogram(counts, cycles, lo, hi, avg, overflow=cycles - inside,
                                                cpu=t.get("cpu") if isinstance(t.get("cpu"), int) else None)
    if any(h.overflow for h in log.histograms.values()):
        log.notes.append("cyclictest's JSON has no overflow counts: overflows derived as cycles minus the "
                         "histogram total; overflow cycle numbers are only in its text output")
    return log


# --- histogram text (-h / -H) ---------------------------------------------------------------------------

def _ints(text: str) -> list[int]:
    return [int(x) for x in text.split()]


def parse_histogram_text(text: str, path="<histogram>", unit_ns: int = 1000) -> CyclictestLog:
    lines = text.splitlines()
    try:
        start = next(i for i, line in enumerate(lines) if line.strip() == "# Histogram")
    except StopIteration:
        raise _fail(path, "no '# Histogram' line: not cyclictest -h/-H output") from None
    rows: list[list[int]] = []
    fields: dict[str, list[int]] = {}
    cycles: dict[int, list[int]] = {}
    others: dict[int, int] = {}
    for lineno, line in enumerate(lines[start + 1:], start + 2):
        s = line.strip()
        if not s:
            continue
        m = HIST_ROW.match(s)
        if m:
            if fields:
                raise _fail(path, f"line {lineno}: histogram row after the summary lines")
            bucket, values = int(m.group(1)), _ints(m.group(2))
            if bucket != len(rows):
                raise _fail(path, f"line {lineno}: bucket {bucket} where {len(rows)} was expected")
            rows.append(values)
            continue
        m = re.match(r"^# Thread (\d+):(.*)$", s)
        if m:
            listed, _, rest = m.group(2).partition("#")
            cycles[int(m.group(1))] = _ints(listed)
            more = re.search(r"(\d+)\s+others", rest)
            others[int(m.group(1))] = int(more.group(1)) if more else 0
            continue
        m = re.match(r"^# (Total|Min Latenc(?:ies|ys)|Avg Latenc(?:ies|ys)|Max Latenc(?:ies|ys)|"
                     r"Histogram Overflows):(.*)$", s)
        if m:
            try:
                fields[m.group(1).split()[0]] = _ints(m.group(2))
            except ValueError:
                raise _fail(path, f"line {lineno}: numbers expected in {s!r}") from None
            continue
        if s.startswith("#"):
            continue  # "# Histogram Overflow at cycle number:", "# Thread Ids:", ...
        raise _fail(path, f"line {lineno}: unexpected text after the histogram: {s[:80]!r}")
    if not rows:
        raise _fail(path, "the histogram has no rows")
    width = len(rows[0])
    if any(len(r) != width for r in rows):
        raise _fail(path, "histogram rows have different numbers of columns")
    missing = [k for k in ("Total", "Min", "Avg", "Max") if k not in fields]
    if missing:
        raise _fail(path, f"no '# {missing[0]} ...' line after the histogram (truncated log?)")
    nthreads = len(fields["Min"])
    if width not in (nthreads, nthreads + 1):  # -H adds a column summing all threads
        raise _fail(path, f"{width} histogram columns for {nthreads} threads")
    log = CyclictestLog("histogram", unit_ns)
    overflows = fields.get("Histogram", [0] * nthreads)
    for t in range(nthreads):
        counts = [r[t] for r in rows]
        over = overflows[t] if t < len(overflows) else 0
        listed = cycles.get(t, [])
        if fields["Total"][t] != sum(counts):
            raise _fail(path, f"thread {t}: '# Total' {fields['Total'][t]} does not match its histogram "
                              f"({sum(counts)})")
        log.histograms[t] = ThreadHistogram(counts, sum(counts) + over, fields["Min"][t], fields["Max"][t],
                                            float(fields["Avg"][t]), over, listed,
                                            max(0, over - len(listed)))
    if "Histogram" not in fields:
        log.notes.append("no '# Histogram Overflows' line: overflows taken as 0")
    return log


# --- verbose samples (-v) ---------------------------------------------------------------------------------

def parse_verbose(text: str, path="<verbose>", unit_ns: int | None = None) -> CyclictestLog:
    import numpy as np
    per_thread: dict[int, tuple[list[int], list[int]]] = {}
    summaries: dict[int, dict[str, int]] = {}
    act_widths: set[int] = set()
    for lineno, line in enumerate(text.splitlines(), 1):
        m = SAMPLE_LINE.match(line)
        if m:
            thread, cycle, value = (int(g) for g in m.groups())
            cyc, val = per_thread.setdefault(thread, ([], []))
            cyc.append(cycle)
            val.append(value)
            continue
        s = line.strip()
        m = SUMMARY_LINE.match(s)
        if m:
            summaries[int(m.group(1))] = {"cycles": int(m.group(2)), "min": int(m.group(3)),
                                          "avg": int(m.group(5)), "max": int(m.group(6))}
            act_widths.add(len(m.group(4)))
            continue
        if not s or VERBOSE_NOISE.match(s):
            continue
        raise _fail(path, f"line {lineno}: expected 'thread: cycle: value', got {s[:80]!r}")
    if not per_thread:
        raise _fail(path, "no 'thread: cycle: value' lines: not cyclictest -v output")
    if unit_ns is None:
        # With -N the summary prints Act in 8 columns instead of 5 (rt-tests' print_stat).
        unit_ns = 1 if act_widths == {8} else 1000
    log = CyclictestLog("verbose", unit_ns, summaries=summaries)
    for t, (cyc, val) in sorted(per_thread.items()):
        c = np.asarray(cyc, dtype=np.int64)
        if np.any(np.diff(c) <= 0):
            raise _fail(path, f"thread {t}: cycle numbers are not increasing (mixed or repeated logs?)")
        log.samples[t] = (c, np.asarray(val, dtype=np.int64))
        gaps = int(c[-1] - c[0] + 1 - len(c))
        if c[0] != 0 or gaps:
            log.notes.append(f"thread {t}: {int(c[0]) + gaps} sample(s) missing from the log (cycles not printed)")
        ran = summaries.get(t, {}).get("cycles")
        if ran is not None and ran > len(c):
            log.notes.append(f"thread {t}: cyclictest ran {ran} cycles but printed {len(c)} samples")
    return log


# --- detection and conversion ---------------------------------------------------------------------------

def detect(text: str, path="<log>") -> str:
    s = text.lstrip()
    if s.startswith("{"):
        return "json"
    if re.search(r"^# Histogram\s*$", text, re.MULTILINE):
        return "histogram"
    if any(SAMPLE_LINE.match(line) for line in text.splitlines()[:200]):
        return "verbose"
    raise UsageError(f"{path}: not a cyclictest log: expected its --json output, -h/-H histogram text or -v verbose "
                     "samples (or name the form: cyclictest-json, cyclictest-histogram, cyclictest-verbose)")


def parse(text: str, form: str, path="<log>", unit_ns: int | None = None) -> CyclictestLog:
    if form == "json":
        return parse_json(text, path)
    if form == "histogram":
        return parse_histogram_text(text, path, unit_ns or 1000)
    if form == "verbose":
        return parse_verbose(text, path, unit_ns)
    raise UsageError(f"unknown cyclictest form {form!r}; valid forms: {choices(FORMS)}")


def options_from_cmdline(cmdline: str | None) -> tuple[dict, dict, str | None]:
    """Settings, params and variant that a cyclictest command line implies (what can be known)."""
    settings: dict[str, Any] = {}
    params: dict[str, Any] = {}
    if not cmdline:
        return settings, params, None
    try:
        argv = shlex.split(cmdline)[1:]
    except ValueError:
        return settings, params, None
    takes = {"p": "priority", "i": "interval", "l": "loops", "D": "duration", "h": "histogram", "H": "histofall",
             "c": "clock", "d": "distance", "b": "breaktrace", "o": "oscope"}
    optional = {"t": "threads", "a": "affinity"}
    flags = {"m": "mlockall", "r": "relative", "N": "nsecs", "q": "quiet", "v": "verbose"}
    opts: dict[str, str | bool] = {}
    i = 0
    while i < len(argv):
        arg = argv[i]
        if arg.startswith("--"):
            name, eq, value = arg[2:].partition("=")
            opts[name] = value if eq else True
            if not eq and name in takes.values() and i + 1 < len(argv):
                opts[name] = argv[i + 1]
                i += 1
        elif arg.startswith("-") and len(arg) > 1:
            j = 1
            while j < len(arg):
                ch = arg[j]
                if ch in takes or ch in optional:
                    name = takes.get(ch) or optional[ch]
                    rest = arg[j + 1:]
                    if rest:
                        opts[name] = rest
                    elif ch in takes and i + 1 < len(argv):
                        opts[name] = argv[i + 1]
                        i += 1
                    elif ch in optional and i + 1 < len(argv) and argv[i + 1][:1].isdigit():
                        opts[name] = argv[i + 1]
                        i += 1
                    else:
                        opts[name] = True
                    break
                opts[flags.get(ch, ch)] = True
                j += 1
        i += 1

    def number(name):
        try:
            return int(str(opts[name]))
        except (KeyError, ValueError):
            return None

    if number("priority"):
        settings["rt_priority"] = number("priority")
    if opts.get("mlockall"):
        settings["mlock"] = True
    params["interval_us"] = number("interval") or 1000  # cyclictest's default interval
    if number("loops"):
        params["loops"] = number("loops")
    duration = re.fullmatch(r"(\d+)([smhdSMHD]?)", str(opts.get("duration", "")))
    if duration:
        params["duration_s"] = int(duration.group(1)) * {"": 1, "s": 1, "m": 60, "h": 3600, "d": 86400}[
            duration.group(2).lower()]
    if number("histogram") or number("histofall"):
        params["histogram_us"] = number("histogram") or number("histofall")
    if number("threads"):
        params["threads"] = number("threads")
    affinity = opts.get("affinity")
    if isinstance(affinity, str) and affinity.isdigit() and not opts.get("threads"):
        settings["cpu"] = int(affinity)
    elif isinstance(affinity, str):
        params["affinity"] = affinity  # a CPU list the threads were spread over
    return settings, params, "relative" if opts.get("relative") else "absolute"


def _started_at(log: CyclictestLog, path: Path | None) -> dict:
    """The JSON's start_time; the text forms record none (importers.base.started)."""
    return {"started_at": log.started_at} if log.started_at else started(path)


def _environment(log: CyclictestLog) -> dict | None:
    si = log.sysinfo
    if not isinstance(si, dict):
        return None
    version = str(si.get("version", ""))
    return {"hostname": si.get("nodename"), "kernel_release": si.get("release"), "kernel_version": version,
            "machine": si.get("machine"),
            "preemption": sysinfo.preemption_model(version, "1" if si.get("realtime") else None),
            "note": "from cyclictest's JSON sysinfo"}


def to_samplefile(log: CyclictestLog, *, variant: str | None, settings: dict, params: dict | None = None,
                  path: Path | None = None, runtime: str = "cyclictest", cpus: list[int] | None = None,
                  extra_notes: list[str] | None = None) -> SampleFile:
    """One run: every sample (verbose), or one trailer histogram per thread (JSON, histogram text)."""
    import numpy as np
    cmd_settings, cmd_params, cmd_variant = options_from_cmdline(log.cmdline)
    variant = variant or cmd_variant or "absolute"
    if variant not in VARIANTS:
        raise UsageError(f"unknown timer variant {variant!r}; valid variants: {choices(VARIANTS)}")
    notes = list(log.notes) + list(extra_notes or [])
    unit = log.unit_ns
    if unit == 1000:
        notes.append("cyclictest measured in whole µs (values truncated to µs, stored in ns)")
    trailer: dict[str, Any] = {"counters": {}}
    if log.form == "verbose":
        threads = sorted(log.samples)
        columns = [Column("latency", "ns", "i64"), Column("cycle", "count", "i64"), Column("thread", "", "i64")]
        data = {"latency": np.concatenate([log.samples[t][1] for t in threads]) * unit,
                "cycle": np.concatenate([log.samples[t][0] for t in threads]),
                "thread": np.concatenate([np.full(len(log.samples[t][0]), t, dtype=np.int64) for t in threads])}
        if cpus:
            columns.append(Column("cpu", "", "i64"))
            data["cpu"] = np.asarray([cpus[t % len(cpus)] for t in data["thread"]], dtype=np.int64)
        counts_loops = {t: len(log.samples[t][0]) for t in threads}
    else:
        columns = [Column("latency", "ns", "i64")]
        data = {"latency": np.empty(0, dtype=np.int64)}
        hists = {}
        for t, h in sorted(log.histograms.items()):
            total, exact = _histogram_sum(h)
            entry = {"unit": "ns", "bucket_width": unit, "min_value": 0, "counts": h.counts,
                     "overflow": h.overflow, "overflow_cycles": h.overflow_cycles,
                     "overflow_cycles_dropped": h.overflow_cycles_dropped, "n": h.n,
                     "min": h.min * unit, "max": h.max * unit, "sum": total * unit, "sum_exact": exact}
            if h.cpu is not None:
                entry["cpu"] = h.cpu
            elif cpus:
                entry["cpu"] = cpus[t % len(cpus)]
            hists[f"thread{t}"] = entry
        trailer["histograms"] = hists
        trailer["threads"] = [{"thread": t, **({"cpu": e["cpu"]} if "cpu" in e else {})}
                              for t, e in zip(sorted(log.histograms), hists.values())]
        trailer["counters"]["overflows"] = sum(h.overflow for h in log.histograms.values())
        if not all(e["sum_exact"] for e in hists.values()):
            notes.append("histogram overflows: their values are not in the buckets, so the sum (hence the mean) "
                         "is derived from cyclictest's printed average")
        counts_loops = {t: h.n for t, h in log.histograms.items()}
        trailer["own_figures"] = own_figures(log)
    merged_params = {**cmd_params, **(params or {})}
    threads_seen = len(log.histograms) or len(log.samples)
    if threads_seen:
        merged_params["threads"] = threads_seen  # what ran, whatever the command line said
    if "loops" not in merged_params and "duration_s" not in merged_params and counts_loops:
        merged_params["loops"] = max(counts_loops.values())
    start = _started_at(log, path)
    header = make_header("timer", variant, runtime, "cyclictest", str(log.version or "unknown"),
                         start.pop("started_at"), columns, {**cmd_settings, **settings}, merged_params,
                         cyclictest_form=log.form, **start)
    if log.cmdline:
        header["cyclictest_cmdline"] = log.cmdline
    if path is not None:
        header["imported_from"] = str(path)
    env = _environment(log)
    if env:
        header["environment"] = env
    trailer["notes"] = notes
    return SampleFile(header, columns, data, trailer)


def own_figures(log: CyclictestLog) -> str:
    """Which of a histogram run's figures are cyclictest's own, and its own average (per thread: it prints no
    whole-run one), for `show`."""
    hs = [log.histograms[t] for t in sorted(log.histograms)]
    rows = ("its per-thread cycles, min and max" if log.form == "json" else
            "its Total (with the Histogram Overflows), Min Latencies and Max Latencies rows")
    printed = ("two decimals" if log.form == "json" else
               f"truncated to 1 {'µs' if log.unit_ns == 1000 else 'ns'}")
    avgs = ", ".join(f"{h.avg * log.unit_ns / 1000:g}" for h in hs if h.avg is not None)
    return (f"n, MIN and MAX ({rows}); AVG {avgs} µs per thread (as printed: {printed}); the AVG shown is "
            "the mean of the buckets, which hold every value exactly as cyclictest measured it")


def _histogram_sum(h: ThreadHistogram) -> tuple[int, bool]:
    """Sum of a thread's values in cyclictest's unit, and whether it is exact.

    cyclictest truncates each value to its unit and counts value v in bucket v,
    so the buckets give the exact sum of what it measured. Overflowed values are
    not in the buckets: then the sum comes from its printed average (JSON: two
    decimals, text: truncated to an integer), never below what the buckets hold.
    """
    inside = sum(i * c for i, c in enumerate(h.counts))
    if not h.overflow:
        return inside, True
    from_avg = round((h.avg or 0.0) * h.n)
    return max(from_avg, inside + h.overflow * len(h.counts)), False


def read_text(path: Path) -> str:
    try:
        raw = Path(path).read_bytes()
    except OSError as e:
        raise UsageError(f"cannot read {path}: {e.strerror}") from None
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError:
        raise _fail(path, "binary data, not text") from None


def _unit(settings: dict) -> int | None:
    raw = settings.pop("unit", None)
    if raw is None:
        return None
    if str(raw) not in UNITS:
        raise UsageError(f"unit {raw!r}: valid units of a cyclictest log: {choices(UNITS)} (ns when run with -N)")
    return UNITS[str(raw)]


def converter(form: str | None):
    def convert(path: Path, variant: str | None, settings: dict) -> list[SampleFile]:
        settings = dict(settings)
        unit_ns = _unit(settings)
        text = read_text(path)
        if not text.strip():
            raise _fail(path, "empty file")
        chosen = form or detect(text, path)
        log = parse(text, chosen, path, unit_ns)
        return [to_samplefile(log, variant=variant, settings=settings, path=path)]
    return convert


IMPORTERS = (
    Importer("cyclictest", "rt-tests cyclictest output: --json, -h histogram text or -v samples "
                           "(autodetected; --set unit=ns for -N text logs)", converter(None)),
    Importer("cyclictest-json", "rt-tests cyclictest --json output", converter("json")),
    Importer("cyclictest-histogram", "rt-tests cyclictest -h/-H histogram text", converter("histogram")),
    Importer("cyclictest-verbose", "rt-tests cyclictest -v samples (thread: cycle: value)", converter("verbose")),
)
