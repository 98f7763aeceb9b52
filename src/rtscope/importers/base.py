"""What an importer is: a named converter from a file measured elsewhere to sample files."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Callable

from ..samplefile import SampleFile


@dataclass(frozen=True)
class Importer:
    name: str
    help: str
    convert: Callable[[Path, str | None, dict], list[SampleFile]]  # (file, variant, extra settings)
