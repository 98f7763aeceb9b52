"""System setting `cpu_dma_latency`: a CPU latency request (PM QoS) held for the run.

`cpu_dma_latency = 0` keeps every CPU of the target out of idle states whose exit latency is above 0 µs (only
polling idle is left) while the run measures: a small process on the target opens /dev/cpu_dma_latency,
writes the value and sleeps holding the file open. The kernel drops the request when the file is closed: when
the run ends the process is stopped, and if rtscope dies (`kill -9`) it dies with it (local: PR_SET_PDEATHSIG;
SSH: the session supervisor), so nothing is left to undo. The kernel's resulting limit (the smallest request
held) is read back and kept in the run's notes.
"""

from __future__ import annotations

import posixpath
import time
from contextlib import contextmanager
from typing import Iterator

from ..errors import RtscopeError
from ..options import integer
from ..signals import held_signals
from ..targets import Target
from .base import RunContext, Setting, without_shell

DEVICE = "/dev/cpu_dma_latency"
DEFAULT_US = 2_000_000_000  # the kernel's "no request" value (PM_QOS_CPU_LATENCY_DEFAULT_VALUE)
HOLD_WAIT_S = 15.0
# Written as hex text: a write of exactly 4 bytes would be read as a binary s32.
_HOLD = r"""
exec 3>"$1" || exit 3
printf '0x%08x\n' "$2" >&3 || exit 4
echo "held $(od -An -td4 "$1" | tr -d ' ')"
exec sleep 2147483647
"""
_CHECK = r"""
if [ ! -e "$1" ]; then echo missing; elif [ ! -w "$1" ]; then echo denied; fi
"""


def unavailable(value: int, target: Target) -> str | None:
    why = without_shell("cpu_dma_latency", target)
    if why:
        return why
    said = target.run(["sh", "-c", _CHECK, "sh", DEVICE], timeout=60).stdout.strip()
    if said == "missing":
        return (f"cpu_dma_latency: this machine has no {DEVICE} (the kernel's CPU latency QoS device; "
                "a kernel without CONFIG_CPU_IDLE or a container without the device)")
    if said == "denied":
        return f"cpu_dma_latency: cannot write {DEVICE}: permission denied (run as root)"
    return None


@contextmanager
def held(value: int, ctx: RunContext) -> Iterator[None]:
    """Hold a CPU latency request of `value` µs on the run's target while the run measures; always drop it."""
    target = ctx.target
    why = unavailable(value, target)
    if why:
        raise RtscopeError(why)
    run_dir = str(ctx.run_dir or ctx.workdir)
    holder = target.spawn(["sh", "-c", _HOLD, "sh", DEVICE, str(value)], cwd=run_dir,
                          log=posixpath.join(run_dir, "cpu_dma_latency.log"))
    try:
        said = ""
        deadline = time.monotonic() + HOLD_WAIT_S
        while "held" not in said and holder.running() and time.monotonic() < deadline:
            time.sleep(0.05)
            said = holder.log_tail()
        if "held" not in said:
            raise RtscopeError(f"cpu_dma_latency: could not hold a request of {value} µs on {DEVICE}: "
                               f"{said or 'no answer'} (exit {holder.exit_code()})")
        limit = said.split("held", 1)[1].split()[:1]
        where = "" if target.is_local else f" on target {target.name}"
        ctx.notes.append(f"cpu_dma_latency: a request of {value} µs held on {DEVICE}{where} for the run "
                         f"(the kernel's CPU latency limit: {limit[0] if limit else '?'} µs)")
        yield
    finally:
        with held_signals():
            holder.stop()


SETTINGS = (Setting(
    "cpu_dma_latency", integer(0, DEFAULT_US), f"an integer 0..{DEFAULT_US} (µs; 0: no idle state but polling)",
    "hold a CPU latency request (PM QoS, /dev/cpu_dma_latency) of this many µs for the run: CPUs stay out of "
    "idle states that take longer to leave", scope="system", apply=held, unavailable=unavailable),)
