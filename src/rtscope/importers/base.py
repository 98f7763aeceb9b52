"""What an importer is: a named converter from a file measured elsewhere to sample files."""

from __future__ import annotations

from dataclasses import dataclass
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


def read_text(path: Path) -> str:
    """A tool's text output (undecodable bytes replaced); UsageError when it cannot be read."""
    try:
        return Path(path).read_text(errors="replace")
    except OSError as e:
        raise UsageError(f"cannot read {path}: {e.strerror}") from None
