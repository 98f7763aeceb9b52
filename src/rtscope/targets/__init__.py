"""Targets: the machines runs execute on (docs/targets.md). `local` is the default."""

from __future__ import annotations

from .base import ARCHES, Completed, Target, TargetError
from .local import LOCAL, LocalTarget
from .pool import Pool
from .registry import KINDS, TARGETS, TargetDefinition, define, load_env_file, load_file, load_table, \
    parse_target, redact_spec, resolve

__all__ = ["ARCHES", "Completed", "Target", "TargetError", "LOCAL", "LocalTarget", "Pool", "KINDS", "TARGETS",
           "TargetDefinition", "define", "load_env_file", "load_file", "load_table", "parse_target", "redact_spec",
           "resolve"]
