"""The settings remedies are made of, against this machine's real procfs/sysfs (root): irq_affinity,
workqueue_cpumask, rt_runtime_us, cpu_dma_latency (and kernel_cmdline's refusal where rtscope boots nothing;
its QEMU boot is in test_kernel_cmdline_qemu.py). Each applied for the run and put back after it — also after an
error, SIGTERM and `kill -9` of rtscope (then by the next run, `--resume`) — locally and on an SSH target,
refused with a reason where it cannot be applied, recorded with the run, a matrix axis and a tune knob. The
values and the refusals that touch nothing: tests/test_remedy_settings_units.py.
"""

from __future__ import annotations

import os
import signal
import struct
import subprocess
import sys
import time
from pathlib import Path

import pytest

from rtscope.errors import RtscopeError
from rtscope.settings import kernel_cmdline, kernel_files, pm_qos, undo
from rtscope.settings.base import RunContext
from rtscope.settings.registry import SETTINGS
from rtscope.store import Store
from rtscope.targets import LocalTarget
import sshd
from proc_helpers import default_signals
from test_remedy_settings_units import exec_spec

ROOT = os.geteuid() == 0
pytestmark = [pytest.mark.real, pytest.mark.alone, pytest.mark.skipif(not ROOT, reason="needs root: the settings write /proc and /sys")]

WQ = Path("/sys/devices/virtual/workqueue/cpumask")
RT = Path("/proc/sys/kernel/sched_rt_runtime_us")
DMA = Path("/dev/cpu_dma_latency")


def movable_irq() -> tuple[int, str]:
    """An IRQ of this machine with an action name of its own, whose affinity the kernel lets change."""
    table = kernel_files.interrupts(LocalTarget())
    for n, words in sorted(table.items()):
        name = words[-1] if words else ""
        f = irq_file(n)
        if not name or not f.exists() or [m for m, w in table.items() if name in w] != [n]:
            continue
        old = f.read_text()
        try:
            f.write_text("0\n")
        except OSError:
            continue
        f.write_text(old)
        return n, name
    pytest.skip("no IRQ here whose affinity can be changed")


def irq_file(n: int) -> Path:
    return Path(f"/proc/irq/{n}/smp_affinity_list")


def holders() -> list[int]:
    """The processes holding a cpu_dma_latency request for rtscope (here or on the namespaced SSH target)."""
    found = []
    for entry in os.listdir("/proc"):
        try:
            if entry.isdigit() and Path(f"/proc/{entry}/cmdline").read_bytes() == b"sleep\x002147483647\x00":
                found.append(int(entry))
        except OSError:
            pass
    return found


def wait_no_holder(limit: float = 20) -> None:
    """Until no holder is left (locally it dies by PR_SET_PDEATHSIG, over SSH by the session supervisor): the
    kernel drops a request when its file closes. (The kernel's limit itself may be another process's: rtprobe
    timer holds 0 while it runs.)"""
    deadline = time.monotonic() + limit
    while holders() and time.monotonic() < deadline:
        time.sleep(0.05)
    assert holders() == []


def dma_limit() -> int:
    with open(DMA, "rb") as f:
        return struct.unpack("i", f.read(4))[0]


@pytest.fixture
def originals():
    """The files these tests change, as they were; written back whatever a test did (and checked unchanged)."""
    n, _ = movable_irq()
    files = [WQ, RT, irq_file(n)]
    before = {f: f.read_text() for f in files}
    yield before
    changed = {str(f): f.read_text() for f in files if f.read_text() != before[f]}
    for f in files:
        if f.read_text() != before[f]:
            f.write_text(before[f])
    assert changed == {}, "a setting was not put back"


def ctx(target=None) -> RunContext:
    return RunContext(request=None, workdir=Path("/tmp"), notes=[], target=target or LocalTarget(), run_dir="/tmp")


# ---- applied and put back on this machine's kernel ----------------------------------------------------------

def test_each_applied_for_the_run_and_put_back(originals):
    n, name = movable_irq()
    c = ctx()
    with SETTINGS["irq_affinity"].apply(f"{name}@1", c), SETTINGS["workqueue_cpumask"].apply("1", c), \
            SETTINGS["rt_runtime_us"].apply(-1, c), SETTINGS["cpu_dma_latency"].apply(0, c):
        assert irq_file(n).read_text().strip() == "1"
        assert kernel_files.from_mask(WQ.read_text()) == 0b10
        assert RT.read_text().strip() == "-1"
        assert dma_limit() == 0 and len(holders()) == 1
        assert list(Path(undo.JOURNAL_DIR).glob(f"*-{os.getpid()}-*.undo"))
    assert {f: f.read_text() for f in originals} == originals
    assert holders() == []
    assert not list(Path(undo.JOURNAL_DIR).glob(f"*-{os.getpid()}-*.undo"))
    notes = " | ".join(c.notes)
    assert f"IRQ {n} (was {originals[irq_file(n)].strip()}) moved to CPU 1" in notes
    assert "cpu_dma_latency: a request of 0 µs held" in notes and "limit: 0 µs" in notes


def test_put_back_when_the_run_fails(originals):
    with pytest.raises(RuntimeError):
        with SETTINGS["rt_runtime_us"].apply(-1, ctx()), SETTINGS["workqueue_cpumask"].apply("0", ctx()):
            raise RuntimeError("the probe failed")
    # the fixture checks the files


def test_every_irq_moved_and_put_back(originals):
    irqs = sorted(kernel_files.interrupts(LocalTarget()))
    before = {n: irq_file(n).read_text() for n in irqs if irq_file(n).exists()}
    c = ctx()
    with SETTINGS["irq_affinity"].apply("*@0", c):
        moved = [n for n in before if irq_file(n).read_text().strip() == "0"]
        assert len(moved) >= len(before) // 2  # those the kernel refuses are left out, and said
    assert {n: irq_file(n).read_text() for n in before} == before


def test_refused_with_the_reason_and_the_valid_values():
    t = LocalTarget()
    check = {name: SETTINGS[name].unavailable for name in ("irq_affinity", "workqueue_cpumask", "rt_runtime_us")}
    online = t.online_cpus()
    far = max(online) + 7
    assert "no IRQ named 'no-such-irq' in /proc/interrupts" in check["irq_affinity"]("no-such-irq@0", t)
    assert "IRQs: " in check["irq_affinity"]("no-such-irq@0", t)
    assert "no IRQ 99999" in check["irq_affinity"]("99999@0", t)
    assert f"CPU {far} is not online" in check["irq_affinity"](f"*@{far}", t)
    assert "online: " in check["workqueue_cpumask"](str(far), t)
    period = int(Path("/proc/sys/kernel/sched_rt_period_us").read_text())
    said = check["rt_runtime_us"](period + 1, t)
    assert "above the RT period" in said and f"valid: -1 (no throttling) or 1..{period}" in said
    assert check["rt_runtime_us"](-1, t) is None and check["workqueue_cpumask"]("0", t) is None
    assert pm_qos.unavailable(0, t) is None
    assert "targets of kind qemu" in kernel_cmdline.unavailable("isolcpus=1", t)
    # a machine without the files (a fake sysfs root): the file named
    fake = LocalTarget(sysfs_root="/nonexistent-root")
    assert "has no /nonexistent-root/proc/sys/kernel/sched_rt_runtime_us" in check["rt_runtime_us"](-1, fake)
    assert "has no /nonexistent-root/sys/devices/virtual/workqueue/cpumask" in check["workqueue_cpumask"]("0", fake)


def test_a_file_that_cannot_be_written_is_refused_and_nothing_changes(tmp_path):
    """A fake root on a read-only tmpfs: the setting is unavailable, naming the file, and applying it fails."""
    root = tmp_path / "root"
    root.mkdir()
    subprocess.run(["mount", "-t", "tmpfs", "-o", "size=1m", "none", str(root)], check=True)
    try:
        (root / "sys/devices/system/cpu").mkdir(parents=True)
        (root / "sys/devices/system/cpu/online").write_text("0-1\n")
        rt = root / "proc/sys/kernel"
        rt.mkdir(parents=True)
        (rt / "sched_rt_period_us").write_text("1000000\n")
        (rt / "sched_rt_runtime_us").write_text("950000\n")
        t = LocalTarget(sysfs_root=str(root))
        with SETTINGS["rt_runtime_us"].apply(-1, ctx(t)):
            assert (rt / "sched_rt_runtime_us").read_text() == "-1\n"
        assert (rt / "sched_rt_runtime_us").read_text() == "950000\n"
        subprocess.run(["mount", "-o", "remount,ro", str(root)], check=True)
        said = SETTINGS["rt_runtime_us"].unavailable(-1, t)
        assert said == f"cannot write {rt / 'sched_rt_runtime_us'}: permission denied (run as root)"
        with pytest.raises(RtscopeError, match="permission denied"):
            with SETTINGS["rt_runtime_us"].apply(-1, ctx(t)):
                pass
        assert (rt / "sched_rt_runtime_us").read_text() == "950000\n"
    finally:
        subprocess.run(["umount", str(root)], check=True)


# ---- through the CLI: a matrix axis, recorded with the run, a tune knob -------------------------------------

def test_a_matrix_axis_recorded_with_each_run(originals, tmp_path, cli):
    n, name = movable_irq()
    spec = exec_spec(tmp_path, f'irq_affinity = ["{name}@0", "{name}@1"]\nworkqueue_cpumask = "0"\n'
                               'rt_runtime_us = -1\ncpu_dma_latency = 0\n')
    db = str(tmp_path / "s.db")
    r = cli("run", spec, "--db", db)
    assert r.code == 0, r.out + r.err
    store = Store(db)
    runs = store.runs()
    assert len(runs) == 2
    seen = set()
    for run in runs:
        assert run.settings["workqueue_cpumask"] == "0" and run.settings["rt_runtime_us"] == -1
        assert run.settings["cpu_dma_latency"] == 0
        seen.add(run.settings["irq_affinity"])
        notes = " | ".join(run.trailer["notes"])
        assert f"IRQ {n} (was " in notes and "rt_runtime_us = -1: " in notes and "cpu_dma_latency: a request" in notes
        assert run.machine["kernel_cmdline"] == Path("/proc/cmdline").read_text().strip()
    assert seen == {f"{name}@0", f"{name}@1"}


def test_arms_of_one_interleaved_run_switch_rt_runtime_us_block_by_block(originals, tmp_path, cli):
    """Configurations that differ in rt_runtime_us (a kernel file) are arms of one `rtprobe interleave`: it
    writes each arm's value before the arm's blocks, and the file is put back after the run."""
    now = int(originals[RT])
    spec = exec_spec(tmp_path, f"rt_runtime_us = [{now}, -1]\n", extra='design = "interleaved"\n')
    db = str(tmp_path / "s.db")
    r = cli("run", spec, "--db", db)
    assert r.code == 0, r.out + r.err
    runs = Store(db).runs()
    assert len(runs) == 2 and len({run.header["pairing"]["id"] for run in runs}) == 1   # one run, two arms
    assert sorted(run.settings["rt_runtime_us"] for run in runs) == [-1, now]
    for run in runs:
        assert run.trailer["blocks_switched_to"] >= 1
        assert any("rt_runtime_us switched with the arms: 1 file(s)" in n for n in run.trailer["notes"])
    assert RT.read_text() == originals[RT]


def test_tune_accepts_them_as_knobs(tmp_path, cli):
    spec = tmp_path / "tune.toml"
    spec.write_text('name = "t"\n[tune]\nbudget = 20\n[[workload]]\nname = "exec"\nvariants = "sum"\n'
                    '[workload.params]\niterations = 100\n[workload.settings]\n'
                    'irq_affinity = ["*@0", "*@1"]\nrt_runtime_us = { min = 900000, max = 1000000 }\n'
                    'workqueue_cpumask = ["0", "1"]\ncpu_dma_latency = [0, 100]\n')
    r = cli("check", spec)
    assert r.code == 0, r.out + r.err
    bad = tmp_path / "bad.toml"
    bad.write_text(spec.read_text().replace('"*@1"', '"*"'))
    r = cli("check", bad)
    assert r.code != 0 and "IRQs@CPUs" in r.out + r.err


# ---- kill -9: the originals come back at the next run (--resume) --------------------------------------------

def long_spec(tmp_path: Path, settings: str, extra: str = "") -> Path:
    """One run of about 2 s (exec sleep: rtprobe timer would hold a cpu_dma_latency request of its own)."""
    p = tmp_path / "long.toml"
    p.write_text(f'name = "long"\n{extra}[[workload]]\nname = "exec"\nvariants = "sleep"\n'
                 '[workload.params]\nn = 5\niterations = 400\npause_ms = 0\n'
                 f'[workload.settings]\n{settings}')
    return p


DMA_US = 7  # a request nothing else on this machine makes


def start(spec: Path, db: str, *more: str) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-m", "rtscope", "run", str(spec), "--db", db, *more], text=True,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, preexec_fn=default_signals)


def wait_for(check, proc: subprocess.Popen, what: str, limit: float = 60) -> None:
    deadline = time.monotonic() + limit
    while not check():
        assert proc.poll() is None, proc.communicate()
        assert time.monotonic() < deadline, f"waited for {what}"
        time.sleep(0.02)


def killed_mid_run(spec: Path, db: str, n: int) -> list[Path]:
    """`rtscope run SPEC` killed with SIGKILL once its settings are applied; what it leaves: the files changed,
    their originals in a journal (returned), and no PM QoS request (its holder died with rtscope)."""
    proc = start(spec, db)
    try:
        wait_for(lambda: RT.read_text().strip() == "-1" and irq_file(n).read_text().strip() == "1"
                 and dma_limit() <= DMA_US and holders(), proc, "the settings applied")
        proc.send_signal(signal.SIGKILL)
        proc.wait(30)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert RT.read_text().strip() == "-1" and irq_file(n).read_text().strip() == "1"
    journals = [p for p in Path(undo.JOURNAL_DIR).glob("*.undo") if str(RT) in p.read_text()]
    assert journals
    wait_no_holder()
    return journals


@pytest.mark.parametrize("sig, code", [(signal.SIGTERM, 143), (signal.SIGINT, 130)])
def test_sigterm_or_ctrl_c_puts_them_back_before_rtscope_exits(originals, tmp_path, sig, code):
    n, _ = movable_irq()
    spec = long_spec(tmp_path, f'irq_affinity = "{n}@1"\nworkqueue_cpumask = "1"\nrt_runtime_us = -1\n'
                                f'cpu_dma_latency = {DMA_US}\n')
    proc = start(spec, str(tmp_path / "s.db"))
    try:
        wait_for(lambda: RT.read_text().strip() == "-1" and dma_limit() <= DMA_US and holders(), proc,
                 "the settings applied")
        proc.send_signal(sig)
        _, err = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == code, err
    assert {f: f.read_text() for f in originals} == originals  # back before rtscope exited
    assert holders() == []
    assert not [p for p in Path(undo.JOURNAL_DIR).glob(f"*-{proc.pid}-*.undo")]


def test_kill_9_then_resume_puts_the_originals_back(originals, tmp_path, cli):
    n, name = movable_irq()
    spec = long_spec(tmp_path, f'irq_affinity = "{n}@1"\nworkqueue_cpumask = "1"\nrt_runtime_us = -1\n'
                                f'cpu_dma_latency = {DMA_US}\n')
    db = str(tmp_path / "s.db")
    journals = killed_mid_run(spec, db, n)
    said = " ".join(cli("check", spec).out.split())
    assert f"left changed: target local: {RT} (was {originals[RT].strip()})" in said
    assert "no longer running); the next run on this target from this host writes them back" in said
    r = cli("run", spec, "--db", db, "--resume")
    assert r.code == 0, r.out + r.err
    assert {f: f.read_text() for f in originals} == originals
    assert not any(p.exists() for p in journals)
    notes = [x for run in Store(db).runs() for x in run.trailer.get("notes", [])]
    assert any("wrote back what a killed rtscope" in x and str(RT) in x for x in notes), notes


# ---- on an SSH target (a real sshd in its own namespaces, the same kernel) ----------------------------------

@pytest.fixture(scope="module")
def board(tmp_path_factory):
    why = sshd.available()
    if why:
        pytest.skip(why)
    server = sshd.SshServer(tmp_path_factory.mktemp("board"), "rtscope-remedy-board").start()
    yield server
    server.stop()


def test_on_an_ssh_target_recorded_and_put_back_also_after_kill_9(board, originals, tmp_path, cli, clean_targets):
    n, name = movable_irq()
    settings = f'irq_affinity = "{name}@1"\nworkqueue_cpumask = "1"\nrt_runtime_us = -1\n' \
               f'cpu_dma_latency = {DMA_US}\n'
    spec = long_spec(tmp_path, settings, extra=f'target = "board"\n{board.table("board")}\n')
    db = str(tmp_path / "s.db")
    journals = killed_mid_run(spec, db, n)
    r = cli("run", spec, "--db", db, "--resume")
    assert r.code == 0, r.out + r.err
    assert {f: f.read_text() for f in originals} == originals
    runs = Store(db).runs()
    assert runs and all(run.settings["irq_affinity"] == f"{name}@1" for run in runs)
    notes = [x for run in runs for x in run.trailer.get("notes", [])]
    assert any("wrote back what a killed rtscope" in x for x in notes), notes
    assert any(x.startswith(f"irq_affinity = {name}@1 on target board: IRQ {n} (was ") for x in notes), notes
    held = f"cpu_dma_latency: a request of {DMA_US} µs held on /dev/cpu_dma_latency on target board"
    assert any(held in x for x in notes), notes
    assert holders() == []
    assert not any(p.exists() for p in journals)
    assert "kernel_cmdline" in runs[0].machine
