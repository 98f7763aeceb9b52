#!/usr/bin/env python3
"""Format-conformance check for rtscope sample files (docs/sample-format.md).

Standalone (stdlib only) so the C probe's tests can run it without the rtscope
package. It validates a file completely -- magic, every size, header and
trailer JSON shape, record count, CRC-32, end magic -- and prints the column
names and the record count n.

    read_samplefile.py FILE            validate, print columns and n
    read_samplefile.py --stats FILE    also print n, median and p99 of the
                                       first (primary) column

Percentiles use the nearest-rank definition: the p-th percentile of n sorted
values is the value at 1-based rank ceil(p/100 * n); the median is p = 50
(so for even n it is the lower of the two middle values, never an average).

Exit status: 0 valid, 1 invalid file (the reason is printed), 2 usage error.
"""

import json
import math
import re
import struct
import sys
import zlib
from datetime import datetime

MAGIC = b"RTSCSF01"
END_MAGIC = b"RTSCEND1"
TAIL_SIZE = 24  # u32 trailer len, u64 count, u32 crc, end magic
UNITS = {"ns", "bytes", "count", ""}
TYPES = {"i64": "q", "u64": "Q", "f64": "d"}
RFC3339 = re.compile(r"^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d+)?(Z|[+-]\d{2}:\d{2})$")


class InvalidFile(Exception):
    pass


def _reject_constant(name):
    raise InvalidFile(f"non-standard JSON constant {name}")


def _no_duplicates(pairs):
    obj = {}
    for key, value in pairs:
        if key in obj:
            raise InvalidFile(f"duplicate JSON key {key!r}")
        obj[key] = value
    return obj


def _parse_json_object(raw, what):
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise InvalidFile(f"{what} is not UTF-8: {exc}") from None
    try:
        value = json.loads(text, object_pairs_hook=_no_duplicates, parse_constant=_reject_constant)
    except json.JSONDecodeError as exc:
        raise InvalidFile(f"{what} is not valid JSON: {exc}") from None
    if not isinstance(value, dict):
        raise InvalidFile(f"{what} is not a JSON object")
    return value


def _is_int(v):
    return isinstance(v, int) and not isinstance(v, bool)


def _is_scalar(v):
    return isinstance(v, (str, bool, int, float))


def _check_time(value, key):
    if not isinstance(value, str) or not RFC3339.match(value):
        raise InvalidFile(f"{key} is not an RFC 3339 time: {value!r}")
    try:
        datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError:
        raise InvalidFile(f"{key} is not a valid time: {value!r}") from None


def check_header(h):
    if h.get("format") != "rtscope-samples":
        raise InvalidFile(f"header format is {h.get('format')!r}, expected 'rtscope-samples'")
    if not _is_int(h.get("version")) or h["version"] != 1:
        raise InvalidFile(f"unsupported format version {h.get('version')!r}")
    for key in ("workload", "variant", "runtime", "tool", "tool_version", "started_at"):
        if not isinstance(h.get(key), str) or not h[key]:
            raise InvalidFile(f"header key {key!r} missing or not a non-empty string")
    _check_time(h["started_at"], "started_at")
    for key in ("settings", "params"):
        obj = h.get(key)
        if not isinstance(obj, dict):
            raise InvalidFile(f"header key {key!r} missing or not an object")
        for name, value in obj.items():
            if not _is_scalar(value):
                raise InvalidFile(f"{key}.{name} is not a string, number or boolean")
    cols = h.get("columns")
    if not isinstance(cols, list) or not cols:
        raise InvalidFile("header 'columns' missing or empty")
    names = set()
    for i, col in enumerate(cols):
        if not isinstance(col, dict):
            raise InvalidFile(f"column {i} is not an object")
        name, unit, typ = col.get("name"), col.get("unit"), col.get("type")
        if not isinstance(name, str) or not name:
            raise InvalidFile(f"column {i} has no name")
        if name in names:
            raise InvalidFile(f"column name {name!r} appears twice")
        names.add(name)
        if unit not in UNITS:
            raise InvalidFile(f"column {name!r} has unit {unit!r}, expected one of {sorted(UNITS)}")
        if typ not in TYPES:
            raise InvalidFile(f"column {name!r} has type {typ!r}, expected one of {sorted(TYPES)}")


def _check_histogram(name, hist):
    if not isinstance(hist, dict):
        raise InvalidFile(f"histogram {name!r} is not an object")
    for key in ("bucket_width", "min_value", "overflow", "n", "min", "max", "sum"):
        if not _is_int(hist.get(key)):
            raise InvalidFile(f"histogram {name!r}: {key!r} missing or not an integer")
    if not isinstance(hist.get("unit"), str):
        raise InvalidFile(f"histogram {name!r}: 'unit' missing or not a string")
    if hist["bucket_width"] <= 0 or hist["overflow"] < 0:
        raise InvalidFile(f"histogram {name!r}: bucket_width must be > 0 and overflow >= 0")
    counts = hist.get("counts")
    if not isinstance(counts, list) or not all(_is_int(c) and c >= 0 for c in counts):
        raise InvalidFile(f"histogram {name!r}: 'counts' is not a list of counts")
    cycles = hist.get("overflow_cycles", [])
    if not isinstance(cycles, list) or not all(_is_int(c) for c in cycles):
        raise InvalidFile(f"histogram {name!r}: 'overflow_cycles' is not a list of integers")
    if sum(counts) + hist["overflow"] != hist["n"]:
        raise InvalidFile(f"histogram {name!r}: counts plus overflow != n")


def check_trailer(t):
    if "finished_at" in t:
        _check_time(t["finished_at"], "finished_at")
    counters = t.get("counters", {})
    if not isinstance(counters, dict) or not all(_is_int(v) for v in counters.values()):
        raise InvalidFile("trailer 'counters' is not an object of integers")
    hists = t.get("histograms", {})
    if not isinstance(hists, dict):
        raise InvalidFile("trailer 'histograms' is not an object")
    for name, hist in hists.items():
        _check_histogram(name, hist)
    notes = t.get("notes", [])
    if not isinstance(notes, list) or not all(isinstance(n, str) for n in notes):
        raise InvalidFile("trailer 'notes' is not a list of strings")


def read(data):
    """Validate the bytes of a sample file; return (header, trailer, rows)."""
    if len(data) < len(MAGIC) + 4 + TAIL_SIZE:
        raise InvalidFile(f"file too short ({len(data)} bytes)")
    if data[:8] != MAGIC:
        raise InvalidFile(f"bad magic {data[:8]!r}")
    if data[-8:] != END_MAGIC:
        raise InvalidFile("no end magic: the file is truncated")
    (hlen,) = struct.unpack_from("<I", data, 8)
    if 12 + hlen + TAIL_SIZE > len(data):
        raise InvalidFile(f"header length {hlen} exceeds the file")
    header = _parse_json_object(data[12 : 12 + hlen], "header")
    check_header(header)
    tlen, count, crc = struct.unpack_from("<IQI", data, len(data) - TAIL_SIZE)
    ncols = len(header["columns"])
    rsize = 8 * ncols
    records_start = 12 + hlen
    expected = records_start + count * rsize + tlen + TAIL_SIZE
    if expected != len(data):
        raise InvalidFile(
            f"sizes do not add up: header {hlen} + {count} records x {rsize} + trailer {tlen} "
            f"gives {expected} bytes, file has {len(data)}"
        )
    records = data[records_start : records_start + count * rsize]
    actual_crc = zlib.crc32(records) & 0xFFFFFFFF
    if actual_crc != crc:
        raise InvalidFile(f"CRC mismatch: stored {crc:#010x}, computed {actual_crc:#010x}")
    trailer_start = records_start + count * rsize
    trailer = _parse_json_object(data[trailer_start : trailer_start + tlen], "trailer")
    check_trailer(trailer)
    fmt = "<" + "".join(TYPES[c["type"]] for c in header["columns"])
    rows = list(struct.iter_unpack(fmt, records)) if count else []
    return header, trailer, rows


def nearest_rank(sorted_values, p):
    """Nearest-rank p-th percentile (0 < p <= 100) of an ascending list."""
    rank = max(1, math.ceil(p / 100.0 * len(sorted_values)))
    return sorted_values[rank - 1]


def main(argv):
    args = argv[1:]
    stats = False
    if args and args[0] == "--stats":
        stats = True
        args = args[1:]
    if len(args) != 1 or args[0].startswith("-"):
        print("usage: read_samplefile.py [--stats] FILE", file=sys.stderr)
        return 2
    path = args[0]
    try:
        with open(path, "rb") as f:
            data = f.read()
    except OSError as exc:
        print(f"read_samplefile: cannot read {path}: {exc.strerror}", file=sys.stderr)
        return 1
    try:
        header, _trailer, rows = read(data)
    except InvalidFile as exc:
        print(f"read_samplefile: {path}: invalid sample file: {exc}", file=sys.stderr)
        return 1
    print("columns: " + ", ".join(c["name"] for c in header["columns"]))
    print(f"n: {len(rows)}")
    if stats:
        if not rows:
            print("read_samplefile: no records, no statistics", file=sys.stderr)
            return 1
        values = sorted(r[0] for r in rows)
        unit = header["columns"][0]["unit"]
        print(f"median: {nearest_rank(values, 50)} {unit}".rstrip())
        print(f"p99: {nearest_rank(values, 99)} {unit}".rstrip())
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
