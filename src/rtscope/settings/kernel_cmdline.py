"""System setting `kernel_cmdline`: more kernel command line for the kernels rtscope boots (VM targets).

`kernel_cmdline = "isolcpus=1 nohz_full=1 rcu_nocbs=1"` is appended to the guest kernel's command line (after
the target table's own `kernel_args`). Such parameters take effect only at boot, so a VM target boots its guest
again when a run asks for another command line than the one it runs with — also back to none for a run that
does not set it (`prepare`, before every run on the target) — and the run checks that every word reached the
guest's /proc/cmdline. The machine record of every run holds the kernel's /proc/cmdline. A target rtscope does
not boot (local, ssh, labgrid, BEAM node) refuses the setting: its command line is its bootloader's.
"""

from __future__ import annotations

import re
from contextlib import contextmanager
from typing import Any, Iterator

from ..errors import RtscopeError
from ..targets import Target
from .base import RunContext, Setting

# Words rtscope's own boot sets (the guest would not come up without them as they are).
OWN = ("console", "rdinit", "init", "panic")
_WORD = re.compile(r"^[A-Za-z0-9_.,:/=+\-]+$")


def parse(raw: Any) -> str:
    """'isolcpus=1  nohz_full=1' -> 'isolcpus=1 nohz_full=1'."""
    if not isinstance(raw, str):
        raise ValueError("give the parameters as one string, e.g. \"isolcpus=1 nohz_full=1\"")
    words = raw.split()
    for w in words:
        if not _WORD.match(w):
            raise ValueError(f"{w!r} is not a kernel parameter rtscope passes (letters, digits and _ . , : / = + -; "
                             "no quotes)")
        if w.split("=", 1)[0] in OWN:
            raise ValueError(f"{w.split('=', 1)[0]}= is set by rtscope's own boot of the guest ({', '.join(OWN)})")
    return " ".join(words)


def booted(target: Target) -> bool:
    return callable(getattr(target, "boot_with", None))


def unavailable(value: str, target: Target) -> str | None:
    if booted(target) or not value:
        return None
    return (f"kernel_cmdline applies to the kernels rtscope boots (targets of kind qemu); target {target.name} "
            f"({target.kind}) boots its own kernel: set its command line in its bootloader")


def prepare(value: str | None, target: Target) -> None:
    """Before every run on a VM target: the guest runs with this command line (none when the run sets none)."""
    if booted(target):
        target.boot_with(value or "")


@contextmanager
def applied(value: str, ctx: RunContext) -> Iterator[None]:
    """Check that the guest (booted by `prepare`) runs with every word of `value`; note it."""
    if not value:  # "": none more than the target's own (prepare booted it so)
        yield
        return
    why = unavailable(value, ctx.target)
    if why:
        raise RtscopeError(why)
    path = ctx.target.sys_path("proc/cmdline")
    running = (ctx.target.read_files([path])[path] or "").split()
    lacking = [w for w in value.split() if w not in running]
    if lacking:
        raise RtscopeError(f"kernel_cmdline: the guest's {path} lacks {' '.join(lacking)} "
                           f"(it reads {' '.join(running)!r})")
    ctx.notes.append(f"kernel_cmdline: the guest of target {ctx.target.name} booted with {value}")
    yield


SETTINGS = (Setting(
    "kernel_cmdline", parse, "kernel parameters as one string, e.g. \"isolcpus=1 nohz_full=1 rcu_nocbs=1\"",
    "append these parameters to the command line of the guest kernel a VM target boots (it boots again when "
    "they change); not for targets rtscope does not boot", scope="system", apply=applied,
    unavailable=unavailable, prepare=prepare),)
