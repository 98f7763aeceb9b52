"""Importer `fio`: fio's `--output-format=json+` report, one storage run per job.

fio keeps no per-I/O record in its report, but json+ carries the full latency
histogram: `bins`, a map from a latency value (ns, the bin's representative
value; fio's bins are about 1.6 % wide) to how many I/Os fell into that bin.
rtscope expands the bins into one sample per I/O (column `latency`, ns), so
every rtscope statistic works on them unchanged; the I/Os' order is not in
the report, so the samples are in ascending order. Total latency (`lat_ns`,
submission + completion; present with `--lat_percentiles=1`) is used when it
has bins, completion latency (`clat_ns`, fio's default) otherwise.

Per pass figures come from the job totals (counters `runtime_ns` and
`passes`: fio's `job_runtime` in ms and its `loops`); the sync calls' own
latency summary and bins are kept in the trailer under `fio`.
"""

from __future__ import annotations

import json
import re
from datetime import datetime, timezone
from pathlib import Path, PurePosixPath
from typing import TYPE_CHECKING, Any

from ..errors import UsageError, choices
from ..samplefile import Column, SampleFile, make_header
from .base import Importer

if TYPE_CHECKING:  # numpy is imported where samples are made or read: `rtscope --help` needs none
    import numpy as np

VARIANTS = ("write_sync", "write", "read")
READS = ("read", "randread")
WRITES = ("write", "randwrite")
_SIZE = re.compile(r"^\s*(\d+)\s*([kmgtp]?)(i?b)?\s*$", re.IGNORECASE)
_SHIFT = {"": 0, "k": 10, "m": 20, "g": 30, "t": 40, "p": 50}


def fio_bytes(text: Any) -> int | None:
    """A fio size option ('4k', '1g', '4096', '1GiB'; fio's default kb_base=1024) in bytes, or None."""
    m = _SIZE.match(str(text))
    return int(m.group(1)) << _SHIFT[m.group(2).lower()] if m else None


def _flag(options: dict, key: str) -> bool:
    return str(options.get(key, "0")).strip() not in ("0", "", "false")


def expand_bins(bins: dict) -> np.ndarray:
    """One value per I/O from fio's {value: count} bins, ascending."""
    import numpy as np
    if not bins:
        return np.empty(0, dtype=np.int64)
    items = sorted((int(k), int(v)) for k, v in bins.items())
    values = np.array([k for k, _ in items], dtype=np.int64)
    counts = np.array([v for _, v in items], dtype=np.int64)
    if (counts < 0).any():
        raise ValueError("negative bin count")
    return np.repeat(values, counts)


def _rfc3339_ms(ms: float) -> str:
    return datetime.fromtimestamp(ms / 1000.0, timezone.utc).isoformat(timespec="milliseconds").replace("+00:00", "Z")


def job_variant(options: dict, job: dict, where: str) -> str:
    rw = str(options.get("rw", options.get("readwrite", "read")))
    if rw in READS:
        return "read"
    if rw in WRITES:
        synced = any(_flag(options, k) for k in ("fsync", "fdatasync")) or job.get("sync", {}).get("total_ios", 0)
        return "write_sync" if synced else "write"
    raise UsageError(f"{where}: rw={rw} mixes directions or is not a plain read or write job; rtscope storage "
                     f"runs are one direction: valid rw: {choices(READS + WRITES)}")


def job_params(options: dict, ddir: dict, variant: str) -> dict[str, Any]:
    """The storage parameters the job ran with (fio's defaults where the report omits an option)."""
    loops = int(options.get("loops", 1) or 1)
    bs = fio_bytes(str(options.get("bs", options.get("blocksize", "4k"))).split(",")[0]) or 4096
    size = fio_bytes(options.get("filesize", options.get("size", ""))) or (int(ddir.get("io_bytes", 0)) // loops)
    filename = str(options.get("filename", ""))
    directory = str(options.get("directory", "")) or (str(PurePosixPath(filename).parent) if filename else ".")
    direct = _flag(options, "direct")
    cold = variant == "read" and not direct and str(options.get("invalidate", "1")) != "0" \
        and not _flag(options, "pre_read")
    return {"size": int(size), "repetitions": loops, "block_size": int(bs), "dir": directory, "direct": direct,
            "fdatasync": variant == "write_sync" and _flag(options, "fdatasync"), "drop_caches": cold}


def convert_job(report: dict, job: dict, source: str, variant: str | None = None,
                settings: dict | None = None, params: dict | None = None) -> SampleFile:
    """One fio job of a json+ report -> a storage SampleFile (runtime fio)."""
    name = job.get("jobname", "?")
    where = f"{source}, job {name!r}"
    if job.get("error"):
        raise UsageError(f"{where}: fio reported error {job['error']} for this job; nothing imported")
    options = {**(report.get("global options") or {}), **(job.get("job options") or {})}
    found = job_variant(options, job, where)
    if variant is not None and variant not in VARIANTS:
        raise UsageError(f"unknown storage variant {variant!r}; valid variants: {choices(VARIANTS)}")
    variant = variant or found
    ddir = job.get("read" if variant == "read" else "write") or {}
    kind = "lat" if (ddir.get("lat_ns") or {}).get("bins") else "clat"
    hist = ddir.get(f"{kind}_ns") or {}
    if "bins" not in hist:
        if int(ddir.get("total_ios", 0)) == 0:
            raise UsageError(f"{where}: the job did no {'reads' if variant == 'read' else 'writes'}; nothing to import")
        raise UsageError(f"{where}: no latency bins in the report: run fio with --output-format=json+ "
                         f"(plain json has percentiles only)")
    try:
        latency = expand_bins(hist["bins"])
    except (ValueError, TypeError, AttributeError):
        raise UsageError(f"{where}: {kind}_ns bins are not a map of latency -> count") from None
    what = "total (submission + completion)" if kind == "lat" else "completion"
    notes = [f"per-I/O {what} latencies expanded from fio's json+ histogram bins (bin values, ~1.6 % wide); "
             f"their order is not in fio's report, so the samples are sorted; n, min, mean, max and stdev are "
             f"fio's own"]
    if int(hist.get("N", latency.size)) != latency.size:
        notes.append(f"fio counted {hist.get('N')} I/Os but its bins hold {latency.size}")
    if str(options.get("rw", "")).startswith("rand"):
        notes.append(f"random offsets (rw={options['rw']}); rtprobe storage is sequential")
    run_params = dict(params) if params is not None else job_params(options, ddir, variant)
    loops = int(run_params.get("repetitions", 1))
    runtime_ms = int(job.get("job_runtime", ddir.get("runtime", 0)) or 0)
    end_ms = float(report.get("timestamp_ms", float(report.get("timestamp", 0)) * 1000.0))
    sync = job.get("sync") or {}
    sync_lat = sync.get("lat_ns") or {}
    counters = {"passes": loops, "ios": int(ddir.get("total_ios", latency.size)),
                "io_bytes": int(ddir.get("io_bytes", 0)), "runtime_ns": runtime_ms * 1_000_000,
                "bw_bytes": int(ddir.get("bw_bytes", 0)), "sync_ios": int(sync.get("total_ios", 0))}
    if variant == "write_sync" and loops > 1 and _flag(options, "end_fsync"):
        notes.append("fio reopens the file per loop and syncs before its first write of loops 2.., and the last "
                     "loop's sync is its end_fsync (not in fio's sync statistics): see docs/storage.md")
    columns = [Column("latency", "ns", "i64")]
    header = make_header("storage", variant, "fio", "fio", str(report.get("fio version", "fio")),
                         _rfc3339_ms(end_ms - runtime_ms), columns, settings or {}, run_params,
                         imported_from=source, fio_job=name)
    # fio's own figures are exact; the bins only approximate each value (their order is lost too).
    summary = {"n": int(hist.get("N", latency.size)), "min": hist.get("min"), "mean": hist.get("mean"),
               "max": hist.get("max"), "stdev": hist.get("stddev"), "source": f"fio's {kind}_ns"}
    trailer = {"finished_at": _rfc3339_ms(end_ms), "counters": counters, "notes": notes, "summary": summary,
               "fio": {"latency": kind, "job_options": options,
                       "sync_lat_ns": {k: sync_lat[k] for k in ("min", "max", "mean", "stddev", "N", "percentile",
                                                                "bins") if k in sync_lat}}}
    return SampleFile(header, columns, {"latency": latency}, trailer)


def load_report(path: Path) -> dict:
    try:
        text = Path(path).read_text(errors="replace")
    except OSError as e:
        raise UsageError(f"cannot read {path}: {e.strerror}") from None
    # fio may print notices before the JSON document (e.g. "note: both iodepth >= 1 and synchronous I/O ...").
    start = text.find("{")
    try:
        report = json.loads(text[start:]) if start >= 0 else None
    except json.JSONDecodeError as e:
        raise UsageError(f"{path}: not a fio JSON report ({e})") from None
    if not isinstance(report, dict) or not isinstance(report.get("jobs"), list) or "fio version" not in report:
        raise UsageError(f"{path}: not a fio JSON report (expected keys 'fio version' and 'jobs'; "
                         f"run fio with --output-format=json+)")
    if not report["jobs"]:
        raise UsageError(f"{path}: the fio report has no jobs")
    return report


def convert(path: Path, variant: str | None, settings: dict) -> list[SampleFile]:
    report = load_report(path)
    return [convert_job(report, job, str(path), variant, settings) for job in report["jobs"]]


IMPORTERS = (
    Importer("fio", "fio --output-format=json+ reports (storage runs, one per job)", convert),
)
