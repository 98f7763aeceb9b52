"""System settings governor and min_freq against a fake sysfs tree: applied, always restored, unavailable. A real
run stopped by a signal or kill -9: tests/test_governor_signals.py."""

from pathlib import Path

import pytest

from rtscope.settings import governor
from rtscope.errors import RtscopeError
from rtscope.settings.governor import Unavailable, cpufreq_applied, parse_freq, parse_governor
from rtscope.settings.registry import SETTINGS
from rtscope.settings.base import RunContext
from fake_sysfs import CPU, fake_sysfs

pytestmark = pytest.mark.fast



def read(root: Path, cpu: int, file: str) -> str:
    return (root / CPU / f"cpu{cpu}" / "cpufreq" / file).read_text().strip()


def test_governor_applied_on_every_cpu_and_restored(tmp_path):
    root = fake_sysfs(tmp_path)
    (root / CPU / "cpu1" / "cpufreq" / "scaling_governor").write_text("powersave\n")  # CPUs may differ
    ctx = RunContext(request=None, workdir=tmp_path, notes=[])
    with cpufreq_applied("scaling_governor", "performance", ctx, root=root):
        assert [read(root, c, "scaling_governor") for c in (0, 1)] == ["performance", "performance"]
    assert [read(root, c, "scaling_governor") for c in (0, 1)] == ["schedutil", "powersave"]
    assert ctx.notes == ["scaling_governor set to performance on 2 CPU(s) (was powersave, schedutil)"]


def test_restored_when_the_run_fails_or_is_interrupted(tmp_path):
    root = fake_sysfs(tmp_path)
    for exc in (RuntimeError("probe failed"), KeyboardInterrupt()):
        with pytest.raises(type(exc)):
            with cpufreq_applied("scaling_governor", "powersave", root=root):
                assert read(root, 0, "scaling_governor") == "powersave"
                raise exc
        assert read(root, 0, "scaling_governor") == read(root, 1, "scaling_governor") == "schedutil"


def test_a_signal_right_after_the_kernel_took_the_values_still_restores_them(tmp_path, monkeypatch):
    """SIGTERM (or Ctrl-C) arriving once the values are written but before the setting knows it: they are still
    written back (a CI run once left scaling_min_freq at its maximum after a SIGTERM just then)."""
    import os
    from rtscope.settings import undo
    real, calls = undo.write_many, []

    def written_then_interrupted(target, writes):   # the first call (the setting's) interrupted; the undo's not
        errors = real(target, writes)
        calls.append(writes)
        if len(calls) == 1:
            raise KeyboardInterrupt
        return errors

    monkeypatch.setattr(undo, "write_many", written_then_interrupted)
    root = fake_sysfs(tmp_path)
    with pytest.raises(KeyboardInterrupt):
        with cpufreq_applied("scaling_min_freq", "max", root=root):
            pass
    assert read(root, 0, "scaling_min_freq") == read(root, 1, "scaling_min_freq") == "600000"
    assert not list(Path(undo.JOURNAL_DIR).glob(f"*-{os.getpid()}-*.undo"))   # its journal went too


def test_a_cpu_without_cpufreq_makes_the_setting_unavailable_and_nothing_changes(tmp_path):
    root = fake_sysfs(tmp_path)
    (root / CPU / "cpu1" / "cpufreq" / "scaling_governor").unlink()
    (root / CPU / "cpu1" / "cpufreq" / "scaling_governor").mkdir()  # readable as missing: unavailable
    with pytest.raises(Unavailable, match="CPU.s. 1 have no cpufreq"):
        with cpufreq_applied("scaling_governor", "performance", root=root):
            pass
    assert read(root, 0, "scaling_governor") == "schedutil"


def test_kernel_refusing_a_value_is_an_error_and_nothing_stays_changed(tmp_path, monkeypatch):
    """(The refusal is simulated where the target writes: a fake tree cannot refuse a value as sysfs does.)"""
    from rtscope.settings import undo
    root = fake_sysfs(tmp_path)
    real_write_many = undo.write_many

    def refuse_on_cpu1(target, pairs):
        said = real_write_many(target, [(p, t) for p, t in pairs if not ("cpu1" in p and t == "performance")])
        return [("Invalid argument" if "cpu1" in p and t == "performance" else said.pop(0)) for p, t in pairs]

    monkeypatch.setattr(undo, "write_many", refuse_on_cpu1)
    with pytest.raises(RtscopeError, match="scaling_governor: the kernel refused performance in .*cpu1.*: Invalid"):
        with cpufreq_applied("scaling_governor", "performance", root=root):
            pass
    assert read(root, 0, "scaling_governor") == read(root, 1, "scaling_governor") == "schedutil"


def test_not_available_without_cpufreq_and_governors_not_offered(tmp_path):
    bare = tmp_path / "bare"
    (bare / CPU).mkdir(parents=True)
    (bare / CPU / "online").write_text("0-1\n")
    reason = SETTINGS["governor"].unavailable("performance", bare)
    assert reason.startswith("not available on this machine") and "cpufreq" in reason
    assert SETTINGS["min_freq"].unavailable("max", bare).startswith("not available on this machine")
    root = fake_sysfs(tmp_path / "r", offered="powersave schedutil")
    assert SETTINGS["governor"].unavailable("performance", root) == \
        "governor 'performance' is not offered by this kernel on CPU 0; available: powersave, schedutil"
    assert SETTINGS["governor"].unavailable("powersave", root) is None


def test_this_machine_says_what_it_has(monkeypatch):
    monkeypatch.delenv(governor.ROOT_ENV, raising=False)
    has_cpufreq = Path("/sys/devices/system/cpu/cpu0/cpufreq/scaling_governor").exists()
    reason = SETTINGS["governor"].unavailable("performance")
    if has_cpufreq:
        assert reason is None or "not offered" in reason or "permission" in reason
    else:
        assert reason.startswith("not available on this machine")


def test_min_freq_values(tmp_path):
    root = fake_sysfs(tmp_path)
    for value, want in (("max", "1500000"), ("min", "600000"), (parse_freq("1.2GHz"), "1200000")):
        with cpufreq_applied("scaling_min_freq", value, root=root):
            assert read(root, 0, "scaling_min_freq") == read(root, 1, "scaling_min_freq") == want
        assert read(root, 0, "scaling_min_freq") == "600000"
    assert "outside CPU 0's range 600000..1500000 kHz" in SETTINGS["min_freq"].unavailable(2_000_000, root)


@pytest.mark.parametrize("raw, want", [(800000, 800000), ("800000", 800000), ("1200MHz", 1200000),
                                       ("1.4 GHz", 1400000), ("900khz", 900), ("max", "max"), ("MIN", "min")])
def test_parse_freq(raw, want):
    assert parse_freq(raw) == want


@pytest.mark.parametrize("raw", [0, -5, True, "fast", "1.5kHz", 1.5, "GHz"])
def test_parse_freq_rejects(raw):
    with pytest.raises(ValueError):
        parse_freq(raw)


def test_parse_governor():
    assert parse_governor(" performance ") == "performance"
    with pytest.raises(ValueError, match="unknown governor 'turbo'"):
        parse_governor("turbo")
