"""Importers: turn results measured elsewhere into sample files.

Each importer converts one file into one or more SampleFile objects (one per
run); the CLI stores them like probe output. Modules register in IMPORTERS.
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

from ..samplefile import SampleFile


@dataclass(frozen=True)
class Importer:
    name: str
    help: str
    convert: Callable[[Path, str | None, dict], list[SampleFile]]  # (file, variant, extra settings)


IMPORTERS: dict[str, Importer] = {}


def register(imp: Importer) -> Importer:
    IMPORTERS[imp.name] = imp
    return imp


IMPORTER_MODULES = ["rts", "nerves_csv", "fio", "cyclictest", "xenomai"]

for _name in IMPORTER_MODULES:
    importlib.import_module(f"{__name__}.{_name}")
