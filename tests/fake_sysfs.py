"""A fake sysfs tree of CPUs with cpufreq files: where the governor and min_freq settings are tested (no cpufreq
on this machine)."""

from __future__ import annotations

from pathlib import Path

CPU = "sys/devices/system/cpu"


def fake_sysfs(root: Path, cpus=(0, 1), governor_="schedutil", offered="performance powersave schedutil",
               min_freq=600000) -> Path:
    """CPUs `cpus` online, each governed by `governor_` with `offered` available: the root."""
    (root / CPU).mkdir(parents=True, exist_ok=True)
    (root / CPU / "online").write_text(f"{cpus[0]}-{cpus[-1]}\n")
    for c in cpus:
        d = root / CPU / f"cpu{c}" / "cpufreq"
        d.mkdir(parents=True, exist_ok=True)
        (d / "scaling_governor").write_text(governor_ + "\n")
        (d / "scaling_available_governors").write_text(offered + "\n")
        (d / "scaling_min_freq").write_text(f"{min_freq}\n")
        (d / "cpuinfo_min_freq").write_text("600000\n")
        (d / "cpuinfo_max_freq").write_text("1500000\n")
    return root
