"""Read and write rtscope sample files (format version 1, see docs/sample-format.md).

A sample file holds one run: a JSON header, fixed-size little-endian records
(one 8-byte field per column) and a JSON trailer, closed by a fixed tail with
the record count and a CRC-32 of the records. Anything that does not add up
exactly is rejected: a run is stored whole or not at all.
"""

from __future__ import annotations

import json
import os
import struct
import zlib
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from .errors import SampleFileError
from .fileio import write_atomic

if TYPE_CHECKING:  # numpy is imported where samples are made or read: `rtscope --help` needs none
    import numpy as np

MAGIC = b"RTSCSF01"
END_MAGIC = b"RTSCEND1"
FORMAT_NAME = "rtscope-samples"
FORMAT_VERSION = 1
TAIL = struct.Struct("<IQI8s")  # trailer length, record count, crc32, end magic
COLUMN_TYPES = {"i64": "<i8", "u64": "<u8", "f64": "<f8"}
REQUIRED_HEADER = {
    "format": str,
    "version": int,
    "workload": str,
    "variant": str,
    "runtime": str,
    "tool": str,
    "tool_version": str,
    "started_at": str,
    "settings": dict,
    "params": dict,
    "columns": list,
}


@dataclass
class Column:
    name: str
    unit: str
    type: str

    @property
    def dtype(self) -> np.dtype:
        import numpy as np
        return np.dtype(COLUMN_TYPES[self.type])


@dataclass
class SampleFile:
    """One run as read from (or to be written to) a sample file."""

    header: dict[str, Any]
    columns: list[Column]
    data: dict[str, np.ndarray]
    trailer: dict[str, Any] = field(default_factory=dict)

    @property
    def primary(self) -> Column:
        return self.columns[0]

    @property
    def n(self) -> int:
        return len(self.data[self.primary.name]) if self.columns else 0


def _fail(path, problem: str) -> SampleFileError:
    return SampleFileError(f"{path}: not a valid rtscope sample file: {problem}")


def _parse_columns(path, raw: list) -> list[Column]:
    if not raw:
        raise _fail(path, "header lists no columns")
    columns, seen = [], set()
    for i, c in enumerate(raw):
        if not isinstance(c, dict) or not isinstance(c.get("name"), str) or not c["name"]:
            raise _fail(path, f"column {i} has no name")
        ctype = c.get("type")
        if ctype not in COLUMN_TYPES:
            raise _fail(path, f"column {c['name']!r} has type {ctype!r}; valid types: {', '.join(COLUMN_TYPES)}")
        if c["name"] in seen:
            raise _fail(path, f"column {c['name']!r} appears twice")
        seen.add(c["name"])
        columns.append(Column(c["name"], str(c.get("unit", "")), ctype))
    return columns


def _validate_header(path, header: Any) -> None:
    if not isinstance(header, dict):
        raise _fail(path, "header is not a JSON object")
    for key, kind in REQUIRED_HEADER.items():
        if key not in header:
            raise _fail(path, f"header lacks {key!r}")
        if not isinstance(header[key], kind) or (kind is int and isinstance(header[key], bool)):
            raise _fail(path, f"header {key!r} should be a {kind.__name__}")
    if header["format"] != FORMAT_NAME:
        raise _fail(path, f"header format is {header['format']!r}, expected {FORMAT_NAME!r}")
    if header["version"] != FORMAT_VERSION:
        raise _fail(path, f"format version {header['version']} is not supported (this rtscope reads version {FORMAT_VERSION})")


def _json(path, raw: bytes, what: str) -> Any:
    try:
        return json.loads(raw.decode("utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as e:
        raise _fail(path, f"{what} is not valid JSON ({e})") from None


def parse(blob: bytes, path: str | os.PathLike = "<bytes>") -> SampleFile:
    """Parse and fully validate the bytes of a sample file."""
    import numpy as np
    if len(blob) < len(MAGIC) + 4 + TAIL.size:
        raise _fail(path, f"only {len(blob)} bytes: truncated")
    if blob[:8] != MAGIC:
        raise _fail(path, "wrong magic (expected RTSCSF01)")
    trailer_len, count, crc, end = TAIL.unpack_from(blob, len(blob) - TAIL.size)
    if end != END_MAGIC:
        raise _fail(path, "no end marker: truncated (the writer did not finish)")
    (header_len,) = struct.unpack_from("<I", blob, 8)
    header_end = 12 + header_len
    if header_end > len(blob) - TAIL.size:
        raise _fail(path, "header length exceeds file size: corrupt")
    header = _json(path, blob[12:header_end], "header")
    _validate_header(path, header)
    columns = _parse_columns(path, header["columns"])
    record_size = 8 * len(columns)
    expected = header_end + count * record_size + trailer_len + TAIL.size
    if expected != len(blob):
        raise _fail(path, f"sizes do not add up ({count} records of {record_size} bytes and a {trailer_len}-byte "
                          f"trailer make {expected} bytes, the file has {len(blob)}): corrupt or truncated")
    records = memoryview(blob)[header_end:header_end + count * record_size]
    if zlib.crc32(records) != crc:
        raise _fail(path, "record checksum mismatch: corrupt")
    trailer = _json(path, blob[header_end + count * record_size:len(blob) - TAIL.size], "trailer")
    if not isinstance(trailer, dict):
        raise _fail(path, "trailer is not a JSON object")
    dtype = np.dtype([(c.name, c.dtype) for c in columns])
    table = np.frombuffer(records, dtype=dtype, count=count)
    data = {c.name: np.ascontiguousarray(table[c.name]) for c in columns}
    return SampleFile(header=header, columns=columns, data=data, trailer=trailer)


def read(path: str | os.PathLike) -> SampleFile:
    """Read and fully validate a sample file; raise SampleFileError if it is not whole."""
    try:
        blob = Path(path).read_bytes()
    except OSError as e:
        raise SampleFileError(f"cannot read sample file {path}: {e.strerror}") from None
    return parse(blob, path)


def make_header(workload: str, variant: str, runtime: str, tool: str, tool_version: str, started_at: str,
                columns: list[Column], settings: dict | None = None, params: dict | None = None, **extra) -> dict:
    """Build a complete header dict (used by importers and tests)."""
    return {
        "format": FORMAT_NAME, "version": FORMAT_VERSION, "workload": workload, "variant": variant,
        "runtime": runtime, "tool": tool, "tool_version": tool_version, "started_at": started_at,
        "settings": dict(settings or {}), "params": dict(params or {}),
        "columns": [{"name": c.name, "unit": c.unit, "type": c.type} for c in columns], **extra,
    }


def serialize(header: dict, data: dict[str, np.ndarray], trailer: dict | None = None) -> bytes:
    """Encode a run as sample-file bytes; the header's `columns` decide record layout."""
    import numpy as np
    _validate_header("<new file>", header)
    columns = _parse_columns("<new file>", header["columns"])
    lengths = {len(data[c.name]) for c in columns}
    if len(lengths) > 1:
        raise ValueError(f"columns have different lengths: {sorted(lengths)}")
    count = lengths.pop()
    table = np.empty(count, dtype=np.dtype([(c.name, c.dtype) for c in columns]))
    for c in columns:
        table[c.name] = data[c.name]
    records = table.tobytes()
    head = json.dumps(header, separators=(",", ":")).encode()
    tail_json = json.dumps(trailer or {}, separators=(",", ":")).encode()
    return b"".join([MAGIC, struct.pack("<I", len(head)), head, records, tail_json,
                     TAIL.pack(len(tail_json), count, zlib.crc32(records), END_MAGIC)])


def write(path: str | os.PathLike, header: dict, data: dict[str, np.ndarray], trailer: dict | None = None) -> None:
    """Write a sample file atomically: a crash never leaves a valid-looking file."""
    write_atomic(path, serialize(header, data, trailer), "sample file")
