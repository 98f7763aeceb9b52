"""QEMU targets: real guests booted under TCG (x86_64 and the virtual Raspberry Pi 3, stock and PREEMPT_RT
kernels), measured through the SSH target; kills and panics.

The kernels, root file systems and images are built once into the cache (RTSCOPE_CACHE or ~/.cache/rtscope)
and reused; each test class boots its guests once. Bad definitions: tests/test_qemu_target_units.py.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from rtscope.store import Store
from proc_helpers import default_signals
from qemu_skip import qemu_unavailable

WHY = qemu_unavailable("x86_64", "aarch64", root_for="kernels are fetched with apt, arm64 images built through "
                                                      "binfmt_misc")
pytestmark = [pytest.mark.real, pytest.mark.skipif(WHY is not None, reason=WHY or "")]

# Both machines and both kernels, each once (x86_64 PREEMPT_RT and the Pi 3's stock kernel boot in
# test_rtla.py and test_gpio.py, which checks its GPIO controller and TCG record): four guests took 135 s.
GUESTS = {"x86-stock": ("x86_64", "debian:stock"), "pi3-rt": ("aarch64", "debian:rt")}


def table(name: str, arch: str, kernel: str, cpus: int = 2, **extra) -> str:
    lines = [f"[targets.{name}]", 'kind = "qemu"', f'arch = "{arch}"', f'kernel = "{kernel}"', f"cpus = {cpus}",
             'memory = "1G"', 'accel = "tcg"']
    lines += [f'{k} = "{v}"' for k, v in extra.items()]
    return "\n".join(lines) + "\n"


def qemu_processes(marker: str) -> list[int]:
    """QEMU processes whose command line holds `marker`; guests of this test only when the marker holds
    its own guest directory (see `own_guest_dirs`), not those of another test run on the machine."""
    found = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                cmd = Path(f"/proc/{entry}/cmdline").read_bytes().decode(errors="replace")
            except OSError:
                continue
            if "qemu-system" in cmd and marker in cmd:
                found.append(int(entry))
    return found


@pytest.fixture(autouse=True)
def forget_targets(clean_targets):
    yield


@pytest.fixture(autouse=True)
def guests(monkeypatch, tmp_path_factory):
    """The directory this test's guests are made in (rtscope makes them under the temporary directory),
    short enough for QEMU's unix sockets; `guests + "/rtscope-vm-"` marks only this test's guests."""
    import shutil
    import tempfile
    tmp_path_factory.getbasetemp()   # pytest's own base first: made under `mine`, it would go with it
    mine = tempfile.mkdtemp(prefix="rtsq-", dir="/tmp")
    monkeypatch.setattr(tempfile, "tempdir", mine)
    monkeypatch.setenv("TMPDIR", mine)  # for an rtscope started as a subprocess
    yield mine
    shutil.rmtree(mine, ignore_errors=True)


def test_two_guests_timer_and_storage_runs(tmp_path, cli, guests):
    """Study 2's matrix in one spec: two kernels on two machines, each booted once, runs made in the guests."""
    spec = tmp_path / "kernels.toml"
    spec.write_text('name = "kernels"\ntarget = ["x86-stock", "pi3-rt"]\n'
                    + "".join(table(n, a, k, **({"disk": "64M"} if n == "x86-stock" else {}))
                              for n, (a, k) in GUESTS.items())
                    + '[[workload]]\nname = "timer"\nvariants = "absolute"\nruntime = ["native", "cyclictest"]\n'
                      '[workload.params]\ninterval_us = 1000\nloops = 500\n'
                      '[[workload]]\nname = "storage"\nvariants = "write_sync"\n'
                      '[workload.params]\nsize = "64K"\nrepetitions = 2\ndir = "/tmp"\n'
                      '[[workload]]\nname = "storage"\nvariants = "write_sync"\ntarget = "x86-stock"\n'
                      '[workload.params]\nsize = "64K"\nrepetitions = 2\ndir = "/mnt/disk"\n'
                      '[[workload]]\nname = "exec"\nvariants = ["sum", "fib", "sleep"]\nruntime = "native"\n'
                      'target = "local"\n[workload.params]\niterations = 300\n')
    db = str(tmp_path / "s.db")
    r = cli("run", spec, "--db", db)
    assert r.code == 0, r.err
    assert "latencies measure the emulator" in " ".join(r.err.split())
    runs = Store(db).runs()
    local = [r for r in runs if r["settings"]["target"] == "local"]
    runs = [r for r in runs if r["settings"]["target"] != "local"]
    assert len(runs) == 7  # timer native and cyclictest, storage in /tmp: 3 a guest; one on the disk
    # the guests run on this host's CPUs: their runs take turns with the local ones, never overlap them
    assert len(local) == 3
    for mine in local:
        a0, a1 = mine["environment"]["host_window"]
        for theirs in runs:
            b0, b1 = theirs["environment"]["host_window"]
            assert a1 <= b0 or b1 <= a0, (mine.id, theirs.id, (a0, a1), (b0, b1))
    [on_disk] = [r for r in runs if r["params"].get("dir") == "/mnt/disk"]
    assert "virtio-blk" in on_disk["environment"]["vm_disk"] and on_disk["n_samples"] > 0
    # the guest mounted its disk (ext4 wants crc32c, which its kernel cannot load by itself without modprobe):
    # otherwise /mnt/disk was the initramfs's memory and write+fsync touched no disk
    assert any(n.startswith("target filesystem: ext2/ext3/ext4") for n in on_disk["trailer"]["notes"]), \
        on_disk["trailer"]["notes"]
    for run in runs:
        env, name = run["environment"], run["settings"]["target"]
        arch, kernel = GUESTS[name]
        assert env["machine"] == arch and env["hostname"] == "rtscope-vm" and env["target_kind"] == "qemu"
        assert env["accelerator"] == "tcg" and env["qemu_version"].startswith("QEMU emulator")
        assert env["host_kernel"] == os.uname().release
        assert (env["preemption"] == "PREEMPT_RT") == (kernel == "debian:rt"), env["kernel_version"]
        assert run["n_samples"] > 0
    assert qemu_processes(f"{guests}/rtscope-vm-") == []  # every guest shut down


def test_killing_rtscope_leaves_no_qemu(tmp_path, guests):
    """rtscope killed with SIGKILL, and another with SIGTERM, while their probes measure in their guests (booted
    side by side, as a fleet's are): neither guest's QEMU outlives its rtscope. (One vCPU each: two emulated
    vCPU threads, not four, booting on the host's two cores; what is killed is the same.)"""
    runs = {}
    for sig in (signal.SIGKILL, signal.SIGTERM):
        name = f"killed{int(sig)}"
        spec = tmp_path / f"{name}.toml"
        spec.write_text(f'name = "k"\ntarget = "{name}"\n' + table(name, "x86_64", "debian:stock", cpus=1)
                        + '[[workload]]\nname = "timer"\nvariants = "absolute"\n'
                          '[workload.params]\ninterval_us = 1000\nloops = 60000\n')
        proc = subprocess.Popen([sys.executable, "-m", "rtscope", "run", str(spec), "--db",
                                 str(tmp_path / f"{name}.db")], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                text=True, preexec_fn=default_signals)
        runs[sig] = (proc, f"{guests}/rtscope-vm-{name}-")

    def wait_for(done, proc, what: str, timeout: float) -> None:
        deadline = time.monotonic() + timeout
        while not done():
            assert proc.poll() is None, (what, proc.communicate())
            assert time.monotonic() < deadline, what
            time.sleep(0.2)
    try:
        for proc, marker in runs.values():
            wait_for(lambda: qemu_processes(marker), proc, f"QEMU of {marker} started", 300)
        for proc, marker in runs.values():
            wait_for(lambda: any("Accepted publickey" in c.read_text(errors="replace")   # the guest's sshd logs there
                                 for c in Path(marker).parent.glob(f"{Path(marker).name}*/console.log")),
                     proc, f"rtscope in the guest of {marker}", 180)
        time.sleep(3)  # rtscope is in: the probe deployed and measuring by now (the run lasts 60 s)
        for sig, (proc, _) in runs.items():
            proc.send_signal(sig)
        for proc, _ in runs.values():
            proc.communicate(timeout=120)
    finally:   # a failed wait above leaves no rtscope (nor, through it, a guest) running
        for proc, _ in runs.values():
            if proc.poll() is None:
                proc.kill()
                proc.communicate()
    deadline = time.monotonic() + 30
    while any(qemu_processes(marker) for _, marker in runs.values()) and time.monotonic() < deadline:
        time.sleep(0.2)
    assert {marker: qemu_processes(marker) for _, marker in runs.values()} == {m: [] for _, m in runs.values()}


def test_a_guest_that_panics_gives_the_panic_line(tmp_path, cli, guests):
    """A guest whose kernel panics while it boots (no init to run; one vCPU, it panics the same): `rtscope run`
    exits 1 with the kernel's panic line, no QEMU left, no run stored."""
    spec = tmp_path / "p.toml"
    spec.write_text('name = "p"\ntarget = "broken"\n'
                    + table("broken", "x86_64", "debian:stock", cpus=1,
                            kernel_args="rdinit=/no/such/init init=/no/such")
                    + '[[workload]]\nname = "exec"\nvariants = "sum"\n')
    r = cli("run", spec, "--db", str(tmp_path / "s.db"))
    assert r.code == 1
    assert "stopped during boot" in r.err and "Kernel panic" in r.err
    assert qemu_processes(f"{guests}/rtscope-vm-broken-") == []
    assert not (tmp_path / "s.db").exists() or Store(str(tmp_path / "s.db")).runs() == []
