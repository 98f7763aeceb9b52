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

from . import __version__

NOT_AVAILABLE = "not available"


def _read(root: Path, rel: str) -> str | None:
    try:
        return (root / rel.lstrip("/")).read_text(errors="replace").strip()
    except OSError:
        return None


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


def online_cpus(root: Path) -> list[int]:
    """CPUs online, from sysfs (falls back to os.cpu_count for a bare tree)."""
    text = _read(root, "sys/devices/system/cpu/online")
    if not text:
        return list(range(os.cpu_count() or 1))
    cpus: list[int] = []
    for part in text.split(","):
        lo, _, hi = part.partition("-")
        cpus.extend(range(int(lo), int(hi or lo) + 1))
    return cpus


def governors(root: Path, cpus: list[int]) -> dict[str, str]:
    """cpufreq governor per CPU, or "not available" where the kernel has no cpufreq."""
    return {str(c): _read(root, f"sys/devices/system/cpu/cpu{c}/cpufreq/scaling_governor") or NOT_AVAILABLE
            for c in cpus}


def memory_bytes(meminfo: str | None) -> int | None:
    m = re.search(r"^MemTotal:\s+(\d+) kB", meminfo or "", re.MULTILINE)
    return int(m.group(1)) * 1024 if m else None


def snapshot(root: str | os.PathLike = "/", probe_version: str | None = None) -> dict:
    """Everything recorded about the machine with a run."""
    root = Path(root)
    uname = platform.uname()
    version = _read(root, "proc/sys/kernel/version") or uname.version
    release = _read(root, "proc/sys/kernel/osrelease") or uname.release
    cpus = online_cpus(root)
    board = _read(root, "proc/device-tree/model")
    return {
        "hostname": socket.gethostname(),
        "kernel_release": release,
        "kernel_version": version,
        "preemption": preemption_model(version, _read(root, "sys/kernel/realtime")),
        "machine": uname.machine,
        "cpu_model": cpu_model(_read(root, "proc/cpuinfo")),
        "cpu_count": len(cpus),
        "cpus_online": cpus,
        "isolated_cpus": _read(root, "sys/devices/system/cpu/isolated") or "",
        "governors": governors(root, cpus),
        "memory_bytes": memory_bytes(_read(root, "proc/meminfo")),
        "board": board.rstrip("\x00") if board else None,
        "loadavg": _read(root, "proc/loadavg"),
        "rtscope_version": __version__,
        "probe_version": probe_version,
        "python_version": platform.python_version(),
        "timestamp": datetime.now(timezone.utc).isoformat(timespec="seconds"),
    }


def warnings(snap: dict) -> list[str]:
    """Reasons the machine state may make timing numbers untrustworthy (shown with results)."""
    out = []
    govs = set(snap.get("governors", {}).values())
    if govs - {"performance", NOT_AVAILABLE}:
        out.append(f"CPU governor is {', '.join(sorted(govs - {NOT_AVAILABLE}))}, not performance: "
                   "frequency scaling adds jitter")
    if snap.get("preemption") in ("none", "PREEMPT_DYNAMIC", "PREEMPT") and snap.get("preemption") != "PREEMPT_RT":
        out.append(f"kernel preemption model is {snap.get('preemption')}: not a real-time kernel")
    load = (snap.get("loadavg") or "").split()
    if load and snap.get("cpu_count") and float(load[0]) > 0.5 * snap["cpu_count"]:
        out.append(f"system load average {load[0]} on {snap['cpu_count']} CPUs: other work competes")
    if not snap.get("isolated_cpus"):
        out.append("no isolated CPUs: the probe shares its CPU with the rest of the system")
    return out
