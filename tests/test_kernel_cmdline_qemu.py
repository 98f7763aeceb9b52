"""Setting kernel_cmdline on a QEMU guest (Debian's stock x86_64 kernel, under TCG here): the parameters reach
the guest kernel's /proc/cmdline and are recorded with the run; the guest boots once for them, and a second run
with the same command line does not boot it again."""

from __future__ import annotations

import pytest

from qemu_skip import qemu_unavailable
from rtscope import targets
from rtscope.experiment.runner import execute
from rtscope.experiment.spec import build_request
from rtscope.store import Store

WHY = qemu_unavailable("x86_64", root_for="kernels are fetched with apt")
pytestmark = [pytest.mark.skipif(WHY is not None, reason=WHY or ""), pytest.mark.slow]


def test_isolcpus_and_nohz_full_reach_the_guest_and_the_run(tmp_path, clean_targets, monkeypatch):
    import tempfile
    mine = tempfile.mkdtemp(prefix="rtsq-", dir="/tmp")
    monkeypatch.setattr(tempfile, "tempdir", mine)  # short paths for QEMU's unix sockets
    targets.define("guest", {"kind": "qemu", "arch": "x86_64", "kernel": "debian:stock", "cpus": 2,
                             "memory": "1G", "accel": "tcg", "kernel_args": "mitigations=off"}, replace=True)
    store = Store(str(tmp_path / "store.db"))
    guest = targets.make(targets.resolve("guest"))  # not opened: the run's kernel_cmdline boots it, once
    cmdline = "isolcpus=1 nohz_full=1"
    req = build_request("exec", "sum", "native", {"iterations": 50, "pause_ms": 0},
                        {"kernel_cmdline": cmdline, "target": "guest"})
    try:
        first = execute(req, store, target=guest)
        qemu_pid = guest.guest.proc.pid
        running = guest.run(["cat", "/proc/cmdline"]).stdout.split()
        isolated = guest.run(["cat", "/sys/devices/system/cpu/isolated"]).stdout.strip()
        second = execute(req, store, target=guest)
        assert guest.guest.proc.pid == qemu_pid  # the same command line: no second boot
    finally:
        guest.close()
    assert {"isolcpus=1", "nohz_full=1", "mitigations=off"} <= set(running)
    assert isolated == "1"
    for run_id in (first, second):
        run = store.get_run(run_id)
        assert run.settings["kernel_cmdline"] == cmdline
        assert {"isolcpus=1", "nohz_full=1"} <= set(run.machine["kernel_cmdline"].split())
        assert run.machine["isolated_cpus"] == "1"
        assert run.machine["guest_kernel_args"] == f"mitigations=off {cmdline}"
        assert any(n == f"kernel_cmdline: the guest of target guest booted with {cmdline}"
                   for n in run.trailer["notes"])
