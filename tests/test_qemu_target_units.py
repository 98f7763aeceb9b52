"""QEMU targets' definitions, before any guest is booted: an unknown kernel, arch or accelerator and a bad CPU
count refused by `rtscope check` with the valid choices, a missing QEMU named with its package. Real guests
booted under TCG: tests/test_qemu_target.py."""

from __future__ import annotations

import pytest

from rtscope import targets
from rtscope.errors import RtscopeError, UsageError

pytestmark = pytest.mark.fast


def test_bad_vm_definitions(tmp_path, cli, monkeypatch):
    for extra, message in (('kernel = "debian:xenomai"', "unknown kernel 'debian:xenomai'; valid: debian:stock, "
                                                          "debian:rt, or an absolute path"),
                           ('arch = "riscv64"', "unknown arch 'riscv64'; valid: x86_64, aarch64"),
                           ('accel = "hvf"', "unknown accel 'hvf'; valid: auto, kvm, tcg"),
                           ('cpus = 0', "cpus must be an integer >= 1")):
        spec = tmp_path / "b.toml"
        spec.write_text(f'name = "b"\n[targets.vm]\nkind = "qemu"\n{extra}\n'
                        '[[workload]]\nname = "exec"\nvariants = "sum"\n')
        r = cli("check", spec)
        assert r.code == 2 and message in " ".join(r.err.split()), r.err
    from rtscope.vm import qemu
    monkeypatch.setattr(qemu.shutil, "which", lambda name: None)
    with pytest.raises(RtscopeError, match="qemu-system-aarch64 is not installed: sudo apt-get install -y "
                                           "qemu-system-arm"):
        qemu.qemu_binary("aarch64")
    with pytest.raises(UsageError):
        targets.define("vm", {"kind": "qemu", "kernel": "stock"})
