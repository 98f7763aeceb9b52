"""System settings `governor` and `min_freq`: the CPU frequency policy, per CPU, through sysfs.

A run under `governor=performance` (or `min_freq=max`) writes the value into
every online CPU's cpufreq directory before the probe starts and writes each
CPU's previous value back when the run ends, whatever ends it: success, an
error, Ctrl-C or SIGTERM (signals are held off while the old values go back).

The sysfs tree is read under $RTSCOPE_SYSFS_ROOT (default `/`), so tests and
dry runs can point at a fake tree. Machines without cpufreq (most VMs and
containers) report the settings as not available, and the spec decides
whether such runs are skipped or fail (`on_unavailable`).
"""

from __future__ import annotations

import os
import re
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterator

from . import sysinfo
from .errors import RtscopeError
from .signals import held_signals
from .settings import RunContext, Setting, register

ROOT_ENV = "RTSCOPE_SYSFS_ROOT"
# The governors Linux has; which of them a kernel offers is in scaling_available_governors.
GOVERNORS = ("performance", "powersave", "ondemand", "conservative", "schedutil", "userspace")
FREQ_WORDS = ("min", "max")  # the hardware limits cpuinfo_min_freq / cpuinfo_max_freq


def sysfs_root() -> Path:
    return Path(os.environ.get(ROOT_ENV) or "/")


def cpufreq_dir(root: Path, cpu: int) -> Path:
    return root / "sys" / "devices" / "system" / "cpu" / f"cpu{cpu}" / "cpufreq"


def _read(path: Path) -> str | None:
    try:
        return path.read_text().strip()
    except OSError:
        return None


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

    def check_machine(self, value: Any, root: Path | None = None) -> str | None:
        """None when `value` can be applied on this machine, else why not (said to the user)."""
        try:
            plan(self.file, value, root or sysfs_root())
        except Unavailable as e:
            return str(e)
        return None


class Unavailable(RtscopeError):
    """The machine cannot take this setting (no cpufreq, a governor the kernel does not offer)."""


def plan(file: str, value: Any, root: Path) -> list[tuple[Path, str]]:
    """(path, text to write) for every online CPU, or Unavailable saying why not."""
    cpus = sysinfo.online_cpus(root)
    missing = [c for c in cpus if _read(cpufreq_dir(root, c) / file) is None]
    if missing == cpus:
        raise Unavailable(f"not available on this machine: the kernel exposes no CPU frequency scaling "
                          f"(no {cpufreq_dir(root, cpus[0]) / file}; common in VMs and containers)")
    if missing:
        raise Unavailable(f"not available on this machine: CPU(s) {', '.join(map(str, missing))} have no "
                          f"cpufreq {file}")
    writes = []
    for c in cpus:
        d = cpufreq_dir(root, c)
        if file == "scaling_governor":
            offered = (_read(d / "scaling_available_governors") or "").split()
            if offered and value not in offered:
                raise Unavailable(f"governor {value!r} is not offered by this kernel on CPU {c}; "
                                  f"available: {', '.join(offered)}")
            text = str(value)
        else:
            lo, hi = _read(d / "cpuinfo_min_freq"), _read(d / "cpuinfo_max_freq")
            if lo is None or hi is None:
                raise Unavailable(f"not available on this machine: CPU {c} has no cpuinfo_min_freq/cpuinfo_max_freq")
            khz = int(lo) if value == "min" else int(hi) if value == "max" else int(value)
            if not int(lo) <= khz <= int(hi):
                raise Unavailable(f"min_freq {khz} kHz is outside CPU {c}'s range {lo}..{hi} kHz")
            text = str(khz)
        if not os.access(d / file, os.W_OK):
            raise Unavailable(f"cannot write {d / file}: permission denied (run as root)")
        writes.append((d / file, text))
    return writes


def _write(path: Path, text: str) -> None:
    with open(path, "w") as f:
        f.write(text + "\n")


@contextmanager
def cpufreq_applied(file: str, value: Any, ctx: RunContext | None = None, root: Path | None = None) -> Iterator[None]:
    """Write `value` to `file` on every online CPU; always write the previous values back."""
    root = root or sysfs_root()
    writes = plan(file, value, root)
    previous: list[tuple[Path, str]] = []
    try:
        for path, text in writes:
            old = _read(path)
            if old is None:
                raise RtscopeError(f"cannot read {path}")
            previous.append((path, old))  # recorded before writing: an interrupted write is undone too
            try:
                _write(path, text)
            except OSError as e:
                raise RtscopeError(f"cannot set {path} to {text}: {e.strerror}") from None
            if _read(path) != text:
                raise RtscopeError(f"the kernel did not accept {text} in {path} (it reads {_read(path)!r})")
        if ctx is not None and previous:
            olds = sorted({old for _, old in previous})
            ctx.notes.append(f"{file} set to {writes[0][1]} on {len(writes)} CPU(s) (was {', '.join(olds)})")
        yield
    finally:
        failed = []
        with held_signals():
            for path, old in reversed(previous):
                try:
                    _write(path, old)
                except OSError as e:
                    failed.append(f"{path} ({e.strerror})")
        if failed:
            raise RtscopeError(f"could not restore {file} to its previous value in: {', '.join(failed)}")


register(CpufreqSetting(
    "governor", parse_governor, f"one of {', '.join(GOVERNORS)} (offered by the kernel)",
    "CPU frequency governor for every online CPU during the run; the previous governors are restored",
    scope="system", apply=lambda value, ctx: cpufreq_applied("scaling_governor", value, ctx),
    file="scaling_governor"))

register(CpufreqSetting(
    "min_freq", parse_freq, "a frequency in kHz (800000) or with a unit (1.2GHz, 1200MHz), or min or max",
    "lowest CPU frequency allowed during the run (scaling_min_freq of every online CPU); restored afterwards",
    scope="system", apply=lambda value, ctx: cpufreq_applied("scaling_min_freq", value, ctx),
    file="scaling_min_freq"))
