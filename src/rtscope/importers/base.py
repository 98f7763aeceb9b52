"""What an importer is: a named converter from a file measured elsewhere to sample files."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import TYPE_CHECKING, Callable

from ..errors import UsageError

if TYPE_CHECKING:  # `rtscope import --help` lists the kinds without the sample file module
    from ..samplefile import SampleFile


@dataclass(frozen=True)
class Importer:
    name: str
    help: str
    convert: Callable[[Path, str | None, dict], list[SampleFile]]  # (file, variant, extra settings)


# Header key `started_at_source` (docs/sample-format.md): how `started_at` is known when the tool recorded no
# start. Absent: the tool (or rtscope, running it) recorded it.
FILE_MODIFIED = "file modified"   # the imported file's modification time (when the tool last wrote it)
NOT_RECORDED = "not recorded"     # no time at all: `started_at` is empty (a run rtscope makes gets its launch time)


def started(path: Path | None) -> dict:
    """The header's start for a tool that records none: the file's modification time, marked as such, or, without
    a file, none."""
    if path is None:
        return {"started_at": "", "started_at_source": NOT_RECORDED}
    when = datetime.fromtimestamp(Path(path).stat().st_mtime, timezone.utc)
    return {"started_at": when.isoformat(timespec="milliseconds").replace("+00:00", "Z"),
            "started_at_source": FILE_MODIFIED}


def read_text(path: Path) -> str:
    """A tool's text output (undecodable bytes replaced); UsageError when it cannot be read."""
    try:
        return Path(path).read_text(errors="replace")
    except OSError as e:
        raise UsageError(f"cannot read {path}: {e.strerror}") from None
