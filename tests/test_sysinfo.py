from pathlib import Path

from rtscope import sysinfo
import pytest

pytestmark = pytest.mark.fast


def fake_root(tmp_path: Path, version: str, governor: str | None = None, realtime: str | None = None,
              model: str | None = None) -> Path:
    def put(rel: str, text: str):
        p = tmp_path / rel
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(text)
    put("proc/sys/kernel/version", version)
    put("proc/sys/kernel/osrelease", "6.1.0-test")
    put("proc/cpuinfo", "processor\t: 0\nmodel name\t: Test CPU @ 1.4GHz\nprocessor\t: 1\n")
    put("proc/meminfo", "MemTotal:        1000 kB\n")
    put("sys/devices/system/cpu/online", "0-1")
    if governor:
        for c in (0, 1):
            put(f"sys/devices/system/cpu/cpu{c}/cpufreq/scaling_governor", governor + "\n")
    if realtime:
        put("sys/kernel/realtime", realtime)
    if model:
        put("proc/device-tree/model", model + "\x00")
    return tmp_path


def test_preemption_models():
    assert sysinfo.preemption_model("#1 SMP PREEMPT_RT Mon", None) == "PREEMPT_RT"
    assert sysinfo.preemption_model("#1 SMP PREEMPT", "1") == "PREEMPT_RT"
    assert sysinfo.preemption_model("#1 SMP PREEMPT_DYNAMIC @0", None) == "PREEMPT_DYNAMIC"
    assert sysinfo.preemption_model("#1 SMP PREEMPT Tue", None) == "PREEMPT"
    assert sysinfo.preemption_model("#1 SMP Debian 6.1", None) == "none"


def test_snapshot_of_a_board_with_cpufreq(tmp_path):
    snap = sysinfo.snapshot(fake_root(tmp_path, "#1 SMP PREEMPT_RT", "conservative", model="Raspberry Pi 3 Model B"))
    assert snap["preemption"] == "PREEMPT_RT"
    assert snap["governors"] == {"0": "conservative", "1": "conservative"}
    assert snap["board"] == "Raspberry Pi 3 Model B"
    assert snap["cpu_model"] == "Test CPU @ 1.4GHz" and snap["cpu_count"] == 2
    assert snap["memory_bytes"] == 1000 * 1024 and snap["kernel_release"] == "6.1.0-test"
    assert any("governor is conservative" in w for w in sysinfo.warnings(snap))


def test_no_cpufreq_reports_not_available(tmp_path):
    snap = sysinfo.snapshot(fake_root(tmp_path, "#1 SMP PREEMPT_DYNAMIC"))
    assert set(snap["governors"].values()) == {"not available"}
    assert snap["board"] is None
    assert not any("governor" in w for w in sysinfo.warnings(snap))
