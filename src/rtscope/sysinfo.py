"""Snapshot of the machine state that decides whether numbers can be trusted.

Captured with every run (kernel, preemption model, CPUs, governors, memory,
board, versions) and used to warn, pyperf-style, when the state makes the
numbers untrustworthy. `root` lets tests point at a fake /proc and /sys tree.
"""

from __future__ import annotations

import os
import platform
import re
import socket
from datetime import datetime, timezone
from pathlib import Path
from typing import Callable

from .version import __version__

# Debian architecture names <- `uname -m`; the cross builds are made for these.
ARCHES = {"x86_64": "x86_64", "amd64": "x86_64", "aarch64": "aarch64", "arm64": "aarch64",
          "armv7l": "armhf", "armv8l": "armhf", "armv6l": "armhf", "armhf": "armhf"}

NOT_AVAILABLE = "not available"


def _read(root: Path, rel: str) -> str | None:
    try:
        return (root / rel.lstrip("/")).read_text(errors="replace").strip()
    except OSError:
        return None


# Read in one batch (one round trip on a remote target); governors follow once the online CPUs are known.
# STATE_FILES (and the governors) can change between runs: they are read again for each run (state_files).
STATE_FILES = ("proc/loadavg", "sys/devices/system/cpu/online")
BASE_FILES = ("proc/sys/kernel/version", "proc/sys/kernel/osrelease", "sys/devices/system/cpu/online",
              "proc/device-tree/model", "sys/devices/system/cpu/isolated", "proc/cpuinfo", "proc/meminfo",
              "proc/loadavg", "sys/kernel/realtime", "proc/cmdline")


def governor_file(cpu: int) -> str:
    return f"sys/devices/system/cpu/cpu{cpu}/cpufreq/scaling_governor"


def preemption_model(version: str, realtime_flag: str | None) -> str:
    """PREEMPT_RT, PREEMPT_DYNAMIC, PREEMPT or none, from the uname version string and /sys/kernel/realtime."""
    if realtime_flag == "1" or re.search(r"\bPREEMPT_RT\b", version):
        return "PREEMPT_RT"
    if re.search(r"\bPREEMPT_DYNAMIC\b", version):
        return "PREEMPT_DYNAMIC"
    if re.search(r"\bPREEMPT\b", version):
        return "PREEMPT"
    return "none"


def cpu_model(cpuinfo: str | None) -> str:
    if not cpuinfo:
        return "unknown"
    for key in ("model name", "Hardware", "Model", "cpu model", "Processor"):
        m = re.search(rf"^{key}\s*:\s*(.+)$", cpuinfo, re.MULTILINE)
        if m:
            return m.group(1).strip()
    return "unknown"


USER_HZ = 100  # the unit of /proc/stat's times on every architecture rtscope targets (sysconf(_SC_CLK_TCK))


def parse_steal(text: str) -> dict[int, int]:
    """Per CPU the steal time /proc/stat counts (the 8th value of each `cpuN` line: time the hypervisor ran
    something else while this vCPU wanted to run), in USER_HZ ticks. Empty where the kernel has no such field."""
    out = {}
    for line in text.splitlines():
        parts = line.split()
        if len(parts) > 8 and parts[0].startswith("cpu") and parts[0][3:].isdigit():
            out[int(parts[0][3:])] = int(parts[8])
    return out


def parse_cpu_list(text: str | None) -> list[int]:
    """'0-3,6' -> [0, 1, 2, 3, 6]; [] for no text."""
    cpus: list[int] = []
    for part in (text or "").strip().split(","):
        if part:
            lo, _, hi = part.partition("-")
            cpus.extend(range(int(lo), int(hi or lo) + 1))
    return cpus


def memory_bytes(meminfo: str | None) -> int | None:
    m = re.search(r"^MemTotal:\s+(\d+) kB", meminfo or "", re.MULTILINE)
    return int(m.group(1)) * 1024 if m else None


def state_files(rec: dict) -> list[str]:
    """What can change between two runs on one machine (relative paths): the load, the CPUs online and their
    governors (the rest of the record is read once per connection)."""
    return [*STATE_FILES, *(governor_file(c) for c in rec["cpus_online"])]


def with_state(rec: dict, texts: dict[str, str | None], at: datetime) -> dict | None:
    """`rec` with the state_files(rec) read at `at`; None when the CPUs online changed (read it whole again)."""
    online = parse_cpu_list(texts.get(STATE_FILES[1]))
    if online and online != rec["cpus_online"]:
        return None
    return {**rec, "loadavg": _stripped(texts.get(STATE_FILES[0])), "governors": governors(rec["cpus_online"], texts),
            "timestamp": at.isoformat(timespec="seconds")}


def governors(cpus: list[int], texts: dict[str, str | None]) -> dict[str, str]:
    return {str(c): (texts.get(governor_file(c)) or "").strip() or NOT_AVAILABLE for c in cpus}


def _stripped(text: str | None) -> str | None:
    return text.strip() if text is not None else None


def record(read_many: Callable[[list[str]], dict[str, str | None]], uname: dict[str, str],
           probe_version: str | None = None, fallback_cpus: int = 1) -> dict:
    """The machine record from a reader of /proc and /sys files (relative paths) and the uname fields."""
    base = {k: _stripped(v) for k, v in read_many(list(BASE_FILES)).items()}
    version = base["proc/sys/kernel/version"] or uname["version"]
    release = base["proc/sys/kernel/osrelease"] or uname["release"]
    cpus = parse_cpu_list(base["sys/devices/system/cpu/online"]) or list(range(fallback_cpus))
    govs = read_many([governor_file(c) for c in cpus])
    board = base["proc/device-tree/model"]
    return {
        "hostname": uname["nodename"],
        "kernel_release": release,
        "kernel_version": version,
        "preemption": preemption_model(version, base["sys/kernel/realtime"]),
        "machine": uname["machine"],
        "cpu_model": cpu_model(base["proc/cpuinfo"]),
        "cpu_count": len(cpus),
        "cpus_online": cpus,
        "isolated_cpus": base["sys/devices/system/cpu/isolated"] or "",
        "kernel_cmdline": base["proc/cmdline"],
        "governors": governors(cpus, govs),
        "memory_bytes": memory_bytes(base["proc/meminfo"]),
        "board": board.rstrip("\x00") if board else None,
        "loadavg": base["proc/loadavg"],
        "rtscope_version": __version__,
        "probe_version": probe_version,
        "python_version": platform.python_version(),
        "timestamp": datetime.now(timezone.utc).isoformat(timespec="seconds"),
    }


def snapshot(root: str | os.PathLike = "/", probe_version: str | None = None) -> dict:
    """Everything recorded about this machine with a run (`root`: a fake /proc and /sys tree in tests)."""
    root = Path(root)
    u = platform.uname()
    uname = {"sysname": u.system, "nodename": socket.gethostname(), "release": u.release, "version": u.version,
             "machine": u.machine}
    return record(lambda rels: {r: _read(root, r) for r in rels}, uname, probe_version, os.cpu_count() or 1)


def warnings(snap: dict) -> list[str]:
    """Reasons the machine state may make timing numbers untrustworthy (shown with results): only from what the
    record holds (an imported run's file may record its kernel but not its isolated CPUs: nothing is said about
    what it does not record)."""
    out = []
    if snap.get("accelerator") == "tcg":
        out.append("this target is a VM under TCG, QEMU's emulator: its latencies measure the emulator, not a "
                   "machine (the same spec on a host with KVM, or on the board, gives real numbers)")
    govs = set(snap.get("governors", {}).values())
    if govs - {"performance", NOT_AVAILABLE}:
        out.append(f"CPU governor is {', '.join(sorted(govs - {NOT_AVAILABLE}))}, not performance: "
                   "frequency scaling adds jitter")
    if snap.get("preemption") in ("none", "PREEMPT_DYNAMIC", "PREEMPT") and snap.get("preemption") != "PREEMPT_RT":
        out.append(f"kernel preemption model is {snap.get('preemption')}: not a real-time kernel")
    load = (snap.get("loadavg") or "").split()
    if load and snap.get("cpu_count") and float(load[0]) > 0.5 * snap["cpu_count"]:
        out.append(f"system load average {load[0]} on {snap['cpu_count']} CPUs: other work competes")
    if "isolated_cpus" in snap and not snap["isolated_cpus"]:
        out.append("no isolated CPUs: the probe shares its CPU with the rest of the system")
    return out
