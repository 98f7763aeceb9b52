"""Runtime adapters: how to launch a workload's code in each runtime and collect its sample file.

Adapters register themselves in RUNTIMES when their module is imported; the
lists of modules below are the one place that knows them all. The system
settings (valid for every runtime) are registered here too, since every run
goes through an adapter.
"""

from __future__ import annotations

import importlib

from .base import RUNTIMES, Runtime, register

ADAPTER_MODULES = ["native", "fio", "cyclictest", "beam", "xenomai"]
SYSTEM_SETTING_MODULES = ["governor", "loadgen", "environments"]

for _name in SYSTEM_SETTING_MODULES:
    importlib.import_module(f"rtscope.{_name}")
for _name in ADAPTER_MODULES:
    importlib.import_module(f"{__name__}.{_name}")

__all__ = ["RUNTIMES", "Runtime", "register"]
