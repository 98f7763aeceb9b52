"""Setting kernel_cmdline on a QEMU guest (Debian's stock x86_64 kernel, under TCG here), through `rtscope run`:
the parameters reach the guest kernel's /proc/cmdline and are recorded with each run; the guest boots once,
with them (the pool tells it the first run's settings before it opens), and the second run does not boot it
again."""

from __future__ import annotations

import pytest

from qemu_skip import qemu_unavailable
from rtscope.store import Store

WHY = qemu_unavailable("x86_64", root_for="kernels are fetched with apt")
pytestmark = [pytest.mark.real, pytest.mark.skipif(WHY is not None, reason=WHY or "")]


def test_isolcpus_and_nohz_full_reach_the_guest_and_the_run(tmp_path, cli, clean_targets, monkeypatch):
    import tempfile
    from rtscope.vm import qemu
    mine = tempfile.mkdtemp(prefix="rtsq-", dir="/tmp")
    monkeypatch.setattr(tempfile, "tempdir", mine)  # short paths for QEMU's unix sockets
    boots = []
    real_start = qemu.Guest.start
    monkeypatch.setattr(qemu.Guest, "start", lambda self: (boots.append(self.kernel_args), real_start(self))[1])
    cmdline = "isolcpus=1 nohz_full=1"
    spec = tmp_path / "cmdline.toml"
    spec.write_text('name = "cmdline"\ntarget = "guest"\nrepetitions = 2\n'
                    '[targets.guest]\nkind = "qemu"\narch = "x86_64"\nkernel = "debian:stock"\ncpus = 2\n'
                    'memory = "1G"\naccel = "tcg"\nkernel_args = "mitigations=off"\n'
                    '[[workload]]\nname = "exec"\nvariants = "sum"\n[workload.params]\niterations = 50\n'
                    f'pause_ms = 0\n[workload.settings]\nkernel_cmdline = "{cmdline}"\n')
    db = str(tmp_path / "store.db")
    r = cli("run", spec, "--db", db)
    assert r.code == 0, r.out + r.err
    assert boots == [f"mitigations=off {cmdline}"]  # one boot, with the run's command line
    runs = Store(db).runs()
    assert len(runs) == 2
    for run in runs:
        assert run.settings["kernel_cmdline"] == cmdline
        assert {"isolcpus=1", "nohz_full=1", "mitigations=off"} <= set(run.machine["kernel_cmdline"].split())
        assert run.machine["isolated_cpus"] == "1"  # the guest kernel took it
        assert run.machine["guest_kernel_args"] == f"mitigations=off {cmdline}"
        assert f"kernel_cmdline: the guest of target guest booted with {cmdline}" in run.trailer["notes"]
