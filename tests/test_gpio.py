"""GPIO workloads on real kernel GPIO: the virtual Raspberry Pi 3 (qemu-system-aarch64 -M virt, Debian's arm64
kernel) has a PL061 controller, /dev/gpiochip0 with 8 lines. This machine's own kernel has no GPIO.

One guest is booted for the module, with Erlang and Elixir for arm64 in its root file system (the target's
`packages`); runs go through rtscope's runner on it like on a board: rtprobe deployed over SSH (cross-built for
aarch64), the BEAM harness's compiled modules copied there, a fresh VM per BEAM run.
"""

from __future__ import annotations

import os
import statistics

import numpy as np
import pytest

from rtscope import paths, targets
from rtscope.errors import ProbeError
from rtscope.runner import execute
from rtscope.spec import build_request
from rtscope.store import Store
from rtscope.targets.deploy import place_file

WHY = None
if os.geteuid() != 0:
    WHY = "needs root (arm64 guest images are built through binfmt_misc)"
elif not os.path.exists("/usr/bin/qemu-system-aarch64"):
    WHY = "qemu-system-arm is not installed"
pytestmark = [pytest.mark.skipif(WHY is not None, reason=WHY or ""), pytest.mark.slow]


@pytest.fixture(scope="module")
def pi3(tmp_path_factory):
    import tempfile
    saved = tempfile.tempdir
    tempfile.tempdir = str(tmp_path_factory.mktemp("guest"))  # this module's guest, nobody else's
    before = dict(targets.TARGETS)
    targets.define("pi3", {"kind": "qemu", "arch": "aarch64", "kernel": "debian:stock", "accel": "tcg",
                           "packages": ["elixir"]}, replace=True)
    try:
        with targets.Pool() as pool:
            yield pool.get("pi3")
    finally:
        targets.TARGETS.clear()
        targets.TARGETS.update(before)
        tempfile.tempdir = saved


def measure(pi3, tmp_path, variant: str, runtime: str = "native", **params):
    store = Store(str(tmp_path / "s.db"))
    req = build_request("gpio", variant, runtime, params, {"target": "pi3"})
    run = store.get_run(execute(req, store, target=pi3))
    return run, store.samples(run.id)


def test_write_latency_per_call(pi3, tmp_path):
    run, data = measure(pi3, tmp_path, "write", iterations=300, pause_ms=0, line=2)
    assert run.n_samples == 300 and [c["name"] for c in run.columns] == ["write_1", "write_0", "cpu"]
    assert (data["write_1"] > 0).all() and (data["write_0"] > 0).all()
    assert run.params == {"chip": "/dev/gpiochip0", "line": 2, "iterations": 300, "pause_ms": 0}
    assert run.machine["machine"] == "aarch64"


def test_read_latency_per_call(pi3, tmp_path):
    run, data = measure(pi3, tmp_path, "read", iterations=200, pause_ms=0, line=3)
    assert run.n_samples == 200 and (data["duration"] > 0).all()
    assert set(np.unique(data["value"])) <= {0, 1}


def test_blink_keeps_its_period(pi3, tmp_path):
    run, data = measure(pi3, tmp_path, "blink", iterations=40, period_ms=20, line=4)
    assert run.n_samples == 40 and run.params["period_ms"] == 20
    # On an absolute schedule the periods average out to the period, however late single edges are.
    assert abs(statistics.mean(data["period"]) - 20e6) < 2e6, statistics.mean(data["period"])
    assert (data["lateness"] >= 0).all()


def _failure(pi3, tmp_path, runtime: str = "native", **params) -> str:
    with pytest.raises(ProbeError) as e:
        measure(pi3, tmp_path, "write", runtime, iterations=5, **params)
    return " ".join(str(e.value).split())


def test_a_line_or_chip_that_does_not_exist(pi3, tmp_path):
    assert "no line 99 on /dev/gpiochip0: " in _failure(pi3, tmp_path, line=99)
    assert "has 8 lines, 0..7" in _failure(pi3, tmp_path, line=99)
    assert "no GPIO chip /dev/gpiochip7; chips here: /dev/gpiochip0" in _failure(pi3, tmp_path,
                                                                               chip="/dev/gpiochip7")
    assert Store(str(tmp_path / "s.db")).runs() == []


def test_a_busy_line_and_no_permission(pi3, tmp_path):
    probe = place_file(pi3, paths.for_arch("rtprobe", "aarch64"))
    holder = pi3.spawn(["sh", "-c", f"sleep 60 | {probe} gpio port --line 5"], cwd="/tmp", log="/tmp/holder.log")
    try:
        msg = ""
        for _ in range(50):  # until the holder has the line
            msg = _failure(pi3, tmp_path, line=5)
            if "busy" in msg:
                break
        assert "line 5 of /dev/gpiochip0 is busy: another consumer holds it (rtscope)" in msg
    finally:
        holder.stop()
    denied = pi3.run(["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", probe, "gpio", "write",
                      "--output", "/tmp/denied.rts"])
    assert denied.returncode == 1 and "no permission to open /dev/gpiochip0" in denied.stderr, denied.stderr


def test_the_port_program_reads_back_what_it_wrote(pi3):
    """The BEAM's way to the line: {packet,2} frames; the PL061 reads an output line back."""
    probe = place_file(pi3, paths.for_arch("rtprobe", "aarch64"))
    for value in "10":
        frames = f"\\000\\001{value}\\000\\001r"  # set VALUE, then read
        r = pi3.run(["sh", "-c", f"printf '{frames}' | {probe} gpio port --line 6 | od -An -c"])
        assert r.returncode == 0 and r.stdout.split() == ["\\0", "005", "r", "e", "a", "d", "y", "\\0", "001", "k",
                                                          "\\0", "001", value], r.stdout


# ---- the BEAM: the harness in a fresh Erlang VM in the guest, the line through rtprobe's port -------------------

def test_beam_write_latency_and_the_nerves_csv(pi3, tmp_path, cli):
    run, data = measure(pi3, tmp_path, "write", "beam", iterations=100, pause_ms=0, line=1)
    assert [c["name"] for c in run.columns] == ["write_1", "write_0", "heap_size", "minor_gcs"]
    assert run.n_samples == 100 and (data["write_1"] > 0).all() and (data["heap_size"] > 0).all()
    assert run.machine["machine"] == "aarch64" and run.settings["otp_release"]
    r = cli("export", str(run.id), "--units", "us", "--db", str(tmp_path / "s.db"))
    lines = r.out.splitlines()
    assert lines[0] == "count,time_for_write_1,time_for_write_0,heap_size,minor_gcs" and len(lines) == 101


def test_beam_read_blink_and_genserver(pi3, tmp_path):
    run, data = measure(pi3, tmp_path, "read", "beam", iterations=50, pause_ms=0, line=1)
    assert run.n_samples == 50 and (data["duration"] > 0).all()
    run, data = measure(pi3, tmp_path, "blink", "beam", iterations=30, period_ms=20, line=4)
    assert run.n_samples == 30 and abs(statistics.mean(data["period"]) - 20e6) < 3e6, statistics.mean(data["period"])
    run, data = measure(pi3, tmp_path, "genserver_write", "beam", iterations=50, pause_ms=0, line=7)
    assert run.n_samples == 50 and (data["write_0"] > 0).all()


def test_beam_errors_name_the_line(pi3, tmp_path):
    assert "has 8 lines, 0..7" in _failure(pi3, tmp_path, "beam", line=99)
    assert "no GPIO chip /dev/gpiochip7" in _failure(pi3, tmp_path, "beam", chip="/dev/gpiochip7")
