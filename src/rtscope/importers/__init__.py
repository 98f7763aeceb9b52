"""Importers: turn results measured elsewhere into sample files.

Each importer converts one file into one or more SampleFile objects (one per
run); the CLI stores them like probe output. Each module defines its
`IMPORTERS`; `KINDS` below names them all, by module, so that `rtscope import --help` and the shell completion
list the kinds without loading any converter (tests/test_cli_startup.py checks the two agree).

Importers may import only the leaf modules (the sample file format, errors); runtimes that drive a peer tool
use them to convert its output.
"""

from __future__ import annotations

import importlib
from typing import Any

from .base import Importer

# import kind -> the module that converts it, in the order the help lists them
KINDS = {"rts": "rts", "nerves-csv": "nerves_csv", "fio": "fio", "cyclictest": "cyclictest",
         "cyclictest-json": "cyclictest", "cyclictest-histogram": "cyclictest", "cyclictest-verbose": "cyclictest",
         "xenomai": "xenomai", "rtla": "rtla"}


def importer(kind: str) -> Importer:
    """The importer of a kind in KINDS (its module is imported now)."""
    module = importlib.import_module(f"{__name__}.{KINDS[kind]}")
    return next(imp for imp in module.IMPORTERS if imp.name == kind)


def __getattr__(name: str) -> Any:
    if name == "IMPORTERS":  # every importer, kind -> Importer: loads every converter
        return {kind: importer(kind) for kind in KINDS}
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


__all__ = ["IMPORTERS", "KINDS", "Importer", "importer"]
