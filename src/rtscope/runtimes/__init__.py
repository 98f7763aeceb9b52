"""Runtime adapters: how to launch a workload's code in each runtime and collect its sample file.

Adapters register themselves in RUNTIMES when their module is imported; the
list of modules below is the one place that knows them all.
"""

from __future__ import annotations

import importlib

from .base import RUNTIMES, Runtime, register

ADAPTER_MODULES = ["native", "fio", "cyclictest", "beam"]

for _name in ADAPTER_MODULES:
    importlib.import_module(f"{__name__}.{_name}")

__all__ = ["RUNTIMES", "Runtime", "register"]
