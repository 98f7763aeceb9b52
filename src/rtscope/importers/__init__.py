"""Importers: turn results measured elsewhere into sample files.

Each importer converts one file into one or more SampleFile objects (one per
run); the CLI stores them like probe output. Each module defines its
`IMPORTERS`; the dict below is the one list of them.

Importers may import only the leaf modules (the sample file format, errors); runtimes that drive a peer tool
use them to convert its output.
"""

from __future__ import annotations

from . import cyclictest, fio, nerves_csv, rtla, rts, xenomai
from .base import Importer

IMPORTERS: dict[str, Importer] = {imp.name: imp for imp in (
    *rts.IMPORTERS, *nerves_csv.IMPORTERS, *fio.IMPORTERS, *cyclictest.IMPORTERS, *xenomai.IMPORTERS,
    *rtla.IMPORTERS)}

__all__ = ["IMPORTERS", "Importer"]
