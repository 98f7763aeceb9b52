"""System settings `governor` and `min_freq`: the CPU frequency policy, per CPU, through sysfs.

A run under `governor=performance` (or `min_freq=max`) writes the value into
every online CPU's cpufreq directory before the probe starts and writes each
CPU's previous value back when the run ends, whatever ends it: success, an
error, Ctrl-C or SIGTERM (signals are held off while the old values go back).
On a target with a shell the previous values are first kept in the undo
journal (settings/undo.py), so that after a `kill -9` of rtscope the next run
on that target writes them back; a BEAM node target (no shell) writes the
files through the node and has no journal.

Everything goes through the run's target (docs/targets.md): the files are
read and written on the board, under the target's sysfs root — for the local
target $RTSCOPE_SYSFS_ROOT (default `/`), for another its table's
`sysfs_root` — so tests and dry runs can point at a fake tree. Machines without cpufreq (most VMs and
containers) report the settings as not available, and the spec decides
whether such runs are skipped or fail (`on_unavailable`).
"""

from __future__ import annotations

import os
import posixpath
import re
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any, Iterator

from .. import sysinfo
from ..errors import RtscopeError
from ..signals import held_signals
from ..targets import LocalTarget, Target
from . import undo
from .base import RunContext, Setting

ROOT_ENV = "RTSCOPE_SYSFS_ROOT"
# The governors Linux has; which of them a kernel offers is in scaling_available_governors.
GOVERNORS = ("performance", "powersave", "ondemand", "conservative", "schedutil", "userspace")
FREQ_WORDS = ("min", "max")  # the hardware limits cpuinfo_min_freq / cpuinfo_max_freq


def _target(where: Any = None) -> Target:
    """The target to act on: a Target, else this machine (a path: with that fake sysfs root)."""
    if isinstance(where, Target):
        return where
    return LocalTarget(sysfs_root=str(where) if where is not None else os.environ.get(ROOT_ENV) or "/")


def cpufreq_dir(target: Target, cpu: int) -> str:
    return target.sys_path(f"sys/devices/system/cpu/cpu{cpu}/cpufreq")


def parse_governor(raw: Any) -> str:
    text = str(raw).strip()
    if text not in GOVERNORS:
        raise ValueError(f"unknown governor {text!r}")
    return text


_FREQ = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*(khz|mhz|ghz)?\s*$", re.IGNORECASE)
_FACTOR_KHZ = {"khz": 1, "mhz": 1000, "ghz": 1_000_000}


def parse_freq(raw: Any) -> int | str:
    """A frequency in kHz (an integer, or text such as "1200MHz", "1.4GHz"), or "min" / "max"."""
    if isinstance(raw, bool):
        raise ValueError("not a frequency")
    if isinstance(raw, (int, float)):
        khz = raw
    else:
        text = str(raw).strip().lower()
        if text in FREQ_WORDS:
            return text
        m = _FREQ.match(text)
        if not m:
            raise ValueError("not a frequency")
        khz = float(m.group(1)) * _FACTOR_KHZ[(m.group(2) or "khz").lower()]
    if khz <= 0 or float(khz) != int(khz):
        raise ValueError("must be a positive whole number of kHz")
    return int(khz)


@dataclass(frozen=True)
class CpufreqSetting(Setting):
    """A system setting backed by one cpufreq file per CPU."""

    file: str = ""

    def __post_init__(self) -> None:
        object.__setattr__(self, "unavailable", self.check_machine)  # Setting's hook, bound to this file
        object.__setattr__(self, "block_writes", lambda value, target: plan(self.file, value, target))

    def check_machine(self, value: Any, where: Any = None) -> str | None:
        """None when `value` can be applied on the target (this machine by default), else why not."""
        try:
            plan(self.file, value, _target(where))
        except Unavailable as e:
            return str(e)
        return None


class Unavailable(RtscopeError):
    """The machine cannot take this setting (no cpufreq, a governor the kernel does not offer)."""


def plan(file: str, value: Any, target: Target) -> list[tuple[str, str, str]]:
    """(path, text to write, current text) for every online CPU, or Unavailable saying why not."""
    online = target.sys_path("sys/devices/system/cpu/online")
    cpus = sysinfo.parse_cpu_list(target.read_files([online])[online]) or [0]
    names = (file, "scaling_available_governors", "cpuinfo_min_freq", "cpuinfo_max_freq")
    wanted = [posixpath.join(cpufreq_dir(target, c), n) for c in cpus for n in names]
    found = {p: (t.strip() if t is not None else None) for p, t in target.read_files(wanted).items()}

    def read(c: int, name: str) -> str | None:
        return found[posixpath.join(cpufreq_dir(target, c), name)]

    missing = [c for c in cpus if read(c, file) is None]
    if missing == cpus:
        raise Unavailable(f"not available on this machine: the kernel exposes no CPU frequency scaling "
                          f"(no {cpufreq_dir(target, cpus[0])}/{file}; common in VMs and containers)")
    if missing:
        raise Unavailable(f"not available on this machine: CPU(s) {', '.join(map(str, missing))} have no "
                          f"cpufreq {file}")
    writes = []
    for c in cpus:
        if file == "scaling_governor":
            offered = (read(c, "scaling_available_governors") or "").split()
            if offered and value not in offered:
                raise Unavailable(f"governor {value!r} is not offered by this kernel on CPU {c}; "
                                  f"available: {', '.join(offered)}")
            text = str(value)
        else:
            lo, hi = read(c, "cpuinfo_min_freq"), read(c, "cpuinfo_max_freq")
            if lo is None or hi is None:
                raise Unavailable(f"not available on this machine: CPU {c} has no cpuinfo_min_freq/cpuinfo_max_freq")
            khz = int(lo) if value == "min" else int(hi) if value == "max" else int(value)
            if not int(lo) <= khz <= int(hi):
                raise Unavailable(f"min_freq {khz} kHz is outside CPU {c}'s range {lo}..{hi} kHz")
            text = str(khz)
        path = posixpath.join(cpufreq_dir(target, c), file)
        writes.append((path, text, read(c, file)))
    unwritable = target.unwritable([p for p, _, _ in writes])
    if unwritable:
        raise Unavailable(f"cannot write {unwritable[0]}: permission denied (run as root)")
    return writes


@contextmanager
def cpufreq_applied(file: str, value: Any, ctx: RunContext | None = None, root: Any = None) -> Iterator[None]:
    """Write `value` to `file` on every online CPU of the run's target; always write the previous values back."""
    target = ctx.target if ctx is not None and ctx.target is not None and root is None else _target(root)
    writes = plan(file, value, target)
    notes = ctx.notes if ctx is not None else []
    if target.runtimes is None:  # a shell: journalled, undone after a kill -9 too
        with undo.files_changed(file, writes, RunContext(request=None, workdir=None, notes=notes, target=target)):
            _note(notes, file, writes, target)
            yield
        return
    previous: list[tuple[str, str]] = []
    try:
        for path, text, old in writes:
            previous.append((path, old))  # recorded before writing: an interrupted write is undone too
            try:
                target.write_file(path, text + "\n")
            except (OSError, RtscopeError) as e:
                raise RtscopeError(f"cannot set {path} to {text}: {getattr(e, 'strerror', None) or e}") from None
            now = (target.read_files([path])[path] or "").strip()
            if now != text:
                raise RtscopeError(f"the kernel did not accept {text} in {path} (it reads {now!r})")
        _note(notes, file, writes, target)
        yield
    finally:
        failed = []
        with held_signals():
            for path, old in reversed(previous):
                try:
                    target.write_file(path, old + "\n")
                except (OSError, RtscopeError) as e:
                    failed.append(f"{path} ({getattr(e, 'strerror', None) or e})")
        if failed:
            raise RtscopeError(f"could not restore {file} to its previous value in: {', '.join(failed)}")


def _note(notes: list[str], file: str, writes: list[tuple[str, str, str]], target: Target) -> None:
    if writes:
        olds = sorted({old for _, _, old in writes})
        where = "" if target.is_local else f" on target {target.name}"
        notes.append(f"{file} set to {writes[0][1]} on {len(writes)} CPU(s){where} (was {', '.join(olds)})")


SETTINGS = (CpufreqSetting(
    "governor", parse_governor, f"one of {', '.join(GOVERNORS)} (offered by the kernel)",
    "CPU frequency governor for every online CPU during the run; the previous governors are restored",
    scope="system", apply=lambda value, ctx: cpufreq_applied("scaling_governor", value, ctx),
    file="scaling_governor"), CpufreqSetting(
    "min_freq", parse_freq, "a frequency in kHz (800000) or with a unit (1.2GHz, 1200MHz), or min or max",
    "lowest CPU frequency allowed during the run (scaling_min_freq of every online CPU); restored afterwards",
    scope="system", apply=lambda value, ctx: cpufreq_applied("scaling_min_freq", value, ctx),
    file="scaling_min_freq"))
