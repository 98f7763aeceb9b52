"""Targets: the machines runs execute on (docs/targets.md). `local` is the default.

A target kind is a `Target` subclass (`base`) registered in `registry`; `definition` is a defined target as data.
`ssh` reaches a board over SSH with one session per connection (`ssh_session`: the agent that carries every command;
`ssh_shell`: the POSIX sh it runs there); `qemu` and `labgrid` build on it.
Targets may import the VM machinery (`vm`) and the leaf modules; settings, runtimes and everything above reach the
machine only through them.
"""

from __future__ import annotations

from .base import ARCHES, CommandTimedOut, Completed, Target, TargetError, TargetLost, TargetSilent, at_open
from .definition import TargetDefinition
from .local import LOCAL, LocalTarget
from .pool import Pool
from .registry import FLEETS, KINDS, TARGETS, define, expand, load_env_file, load_file, load_table, make, \
    parse_target, redact_spec, resolve

__all__ = ["ARCHES", "CommandTimedOut", "Completed", "Target", "TargetError", "TargetLost", "TargetSilent", "at_open", "LOCAL", "LocalTarget", "Pool", "FLEETS", "KINDS", "TARGETS",
           "TargetDefinition", "define", "expand", "load_env_file", "load_file", "load_table", "make", "parse_target",
           "redact_spec", "resolve"]
