"""Runtime adapters: how to launch a workload's code in each runtime and collect its sample file.

Each adapter module defines its `RUNTIME`; RUNTIMES below is the one list of them.

Runtimes may import the settings, the importers, the targets and the leaf modules; the spec checker, the runner
and everything above use them.
"""

from __future__ import annotations

from . import beam, cyclictest, fio, native, rtla, xenomai
from .base import Runtime

RUNTIMES: dict[str, Runtime] = {rt.name: rt for rt in (
    native.RUNTIME, fio.RUNTIME, cyclictest.RUNTIME, beam.RUNTIME, xenomai.RUNTIME, rtla.RUNTIME)}

__all__ = ["RUNTIMES", "Runtime"]
