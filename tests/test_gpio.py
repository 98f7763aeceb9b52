"""GPIO workloads on real kernel GPIO: the virtual Raspberry Pi 3 (qemu-system-aarch64 -M virt, Debian's arm64
kernel) has a PL061 controller, /dev/gpiochip0 with 8 lines. This machine's own kernel has no GPIO.

One guest is booted for the module, with Erlang and Elixir for arm64 in its root file system (the target's
`packages`); runs go through rtscope's runner on it like on a board: rtprobe deployed over SSH (cross-built for
aarch64), the BEAM harness's compiled modules copied there, a fresh VM per BEAM run, and a Nerves-like device (a
BEAM node with nerves_ssh's daemon) in the same guest. Setting explain there: a call's window explained, a guest
without tracefs refused (the culprit named, which judges timing: tests/test_gpio_explain.py).
"""

from __future__ import annotations

import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

import numpy as np
import pytest

from rtscope import paths
from rtscope.errors import ProbeError, RtscopeError
from rtscope.experiment.runner import execute
from rtscope.experiment.spec import build_request
from rtscope.store import Store
from rtscope.targets.deploy import place_file

sys.path.insert(0, str(Path(__file__).parent))
import beamnode  # noqa: E402  (nerves_ssh as the test boards run it)
from gpio_guest import explained_run, pi3  # noqa: E402,F401  (the module's guest)
from qemu_skip import qemu_unavailable  # noqa: E402

WHY = qemu_unavailable("aarch64", root_for="arm64 guest images are built through binfmt_misc")
pytestmark = [pytest.mark.real, pytest.mark.skipif(WHY is not None, reason=WHY or "")]


def measure(pi3, tmp_path, variant: str, runtime: str = "native", **params):
    store = Store(str(tmp_path / "s.db"))
    req = build_request("gpio", variant, runtime, params, {"target": "pi3"})
    run = store.get_run(execute(req, store, target=pi3))
    return run, store.samples(run.id)


def test_the_virtual_pi3_has_a_gpio_controller_and_the_record_says_tcg(pi3):
    assert pi3.run(["sh", "-c", "ls /dev/gpiochip0 && cat /sys/bus/gpio/devices/gpiochip0/of_node/compatible"
                    ]).stdout.startswith("/dev/gpiochip0")
    snap = pi3.snapshot()
    assert snap["machine"] == "aarch64" and snap["accelerator"] == "tcg" and snap["vcpus"] == 2


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
    assert_absolute_schedule(data, 20_000_000)


def assert_absolute_schedule(data, period_ns: int) -> None:
    """Each rising edge is its deadline plus its lateness, so consecutive edges are one period apart but for the
    lateness they differ by: after a stall of the (emulated) guest the edges catch up, each period shorter, and
    an average of the periods would not be the period (it failed so in CI)."""
    period, late = data["period"].astype(np.int64), data["lateness"].astype(np.int64)
    assert (late >= 0).all() and (period[1:] - late[1:] + late[:-1] == period_ns).all(), list(zip(period, late))


def _failure(pi3, tmp_path, **params) -> str:
    with pytest.raises(ProbeError) as e:
        measure(pi3, tmp_path, "write", iterations=5, **params)
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


# ---- setting explain in the guest, what judges no timing (the culprit: tests/test_gpio_explain.py, alone) ----

@pytest.mark.parametrize("variant, column, params", [
    ("write", "write_1", {"line": 2}),
    ("read", "duration", {"line": 3}),
])
def test_explain_a_call_explains_its_primary(pi3, tmp_path, cli, variant, column, params):
    # pause_ms 1: the caller sleeps between iterations, so each window shows it switched in (the task current
    # during a call is known only from a sched_switch within the trace read before it).
    run, data, out = explained_run(pi3, tmp_path, cli, variant, iterations=300, pause_ms=1, **params)
    assert [c["name"] for c in run.columns][0] == column and run.columns[-1]["name"] == "start"
    assert run.trailer["explain"]["column"] == column
    took = data[column] + (data["write_0"] if variant == "write" else 0)
    assert (np.diff(data["start"]) >= took[:-1]).all()  # one call after the other, on the trace's clock
    samples = out["samples"]
    assert [s["value_ns"] for s in samples] == sorted(data[column].tolist(), reverse=True)[:10]
    traced = [s for s in samples if not s["note"]]
    assert traced, samples
    for s in traced:  # what ran during the call: its causes, the caller's own time and the rest, the call's time
        assert sum(c["duration_ns"] for c in s["causes"]) + s["self_ns"] + s["unexplained_ns"] == s["value_ns"]
        assert s["self_ns"] > 0, [(x["value_ns"], x["self_ns"], x["idle_ns"], x["unexplained_ns"], x["measuring_pid"],
                                   [(c["kind"], c["name"], c["pid"], c["duration_ns"]) for c in x["causes"]])
                                  for x in samples]


def test_explain_refused_where_the_guest_cannot_trace(pi3, tmp_path, monkeypatch):
    # The guest's image has no umount; its tracefs is looked for under a tree without one instead (the target's
    # sysfs_root, as test_explain.py does locally): the check itself runs in the guest's shell.
    monkeypatch.setattr(pi3, "sysfs_root", "/tmp/no-tracefs")
    store = Store(str(tmp_path / "refused.db"))
    req = build_request("gpio", "blink", "native", {"iterations": 5, "line": 4}, {"target": "pi3", "explain": 5})
    with pytest.raises(RtscopeError) as e:
        execute(req, store, target=pi3)
    assert str(e.value).startswith("explain = 5: target pi3: tracefs not mounted at /tmp/no-tracefs/sys/kernel/tracing; "
                                   "mount -t tracefs nodev /tmp/no-tracefs/sys/kernel/tracing")
    assert store.runs() == []


# ---- the BEAM: the harness in a fresh Erlang VM in the guest, the line through rtprobe's port -------------------
# A fresh VM in the emulated guest costs 10-35 s a run (now and then 70-115 s, and 160 s for two beside a loaded
# neighbour in CI), so the fresh VM measures once here; the harness's other variants (genserver_write, blink) and
# the port program's refusal run in the Nerves-like device's node below: the same harness modules and port program,
# without a VM started per run.

def test_beam_write_latency_and_the_nerves_csv(pi3, tmp_path, cli):
    run, data = measure(pi3, tmp_path, "write", "beam", iterations=100, pause_ms=0, line=1)
    assert [c["name"] for c in run.columns] == ["write_1", "write_0", "heap_size", "minor_gcs"]
    assert run.n_samples == 100 and (data["write_1"] > 0).all() and (data["heap_size"] > 0).all()
    assert run.machine["machine"] == "aarch64" and run.settings["otp_release"]
    r = cli("export", str(run.id), "--units", "us", "--db", str(tmp_path / "s.db"))
    lines = r.out.splitlines()
    assert lines[0] == "count,time_for_write_1,time_for_write_0,heap_size,minor_gcs" and len(lines) == 101


# ---- a Nerves-like device: a BEAM node with nerves_ssh's daemon, in the arm64 guest, GPIO through it ----------

def forward(pi3, port: int) -> tuple[int, socket.socket]:
    """127.0.0.1:P here -> 127.0.0.1:port in the guest, through the guest's SSH connection."""
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(4)

    def pump(src, dst):
        try:
            while data := src.recv(65536):
                dst.sendall(data)
        except OSError:
            pass
        finally:
            for end in (src, dst):
                try:
                    end.close()
                except OSError:
                    pass

    def accept():
        while True:
            try:
                conn, _ = server.accept()
            except OSError:
                return
            chan = pi3.transport.open_channel("direct-tcpip", ("127.0.0.1", port), ("127.0.0.1", 0))
            threading.Thread(target=pump, args=(conn, chan), daemon=True).start()
            threading.Thread(target=pump, args=(chan, conn), daemon=True).start()

    threading.Thread(target=accept, daemon=True).start()
    return server.getsockname()[1], server


def test_gpio_on_a_nerves_like_device(pi3, tmp_path, cli):
    """A spec run on the device: the harness's write, its GenServer write and its blink on an absolute schedule,
    each in the device's running VM; a line the chip does not have refused through the harness, nothing stored."""
    keys = tmp_path / "keys"
    keys.mkdir()
    for key in ("ssh_host_ed25519_key", "id_ed25519"):
        subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(keys / key)], check=True)
    (keys / "authorized_keys").write_text((keys / "id_ed25519.pub").read_text())
    pi3.check(["mkdir", "-p", "/tmp/nerves"], "making the daemon's directory")
    for name in ("ssh_host_ed25519_key", "ssh_host_ed25519_key.pub", "authorized_keys"):
        pi3.put(str(keys / name), f"/tmp/nerves/{name}", 0o600)
    code = beamnode.NERVES_SSH.format(port=2222, dir="/tmp/nerves") + "Process.sleep(:infinity)"
    device = pi3.spawn(["elixir", "-e", code], cwd="/tmp", log="/tmp/nerves/vm.log")
    local_port, listener = forward(pi3, 2222)
    host_key = " ".join((keys / "ssh_host_ed25519_key.pub").read_text().split()[:2])
    (keys / "known_hosts").write_text(f"[127.0.0.1]:{local_port} {host_key}\n")
    try:
        deadline = time.monotonic() + 120  # the VM starts in the emulator
        while pi3.run(["grep", "-qi", ":08AE 00000000:0000 0A", "/proc/net/tcp"]).returncode != 0:  # 2222 listens
            assert device.running() and time.monotonic() < deadline, device.log_tail()
            time.sleep(0.5)
        spec = tmp_path / "device.toml"
        spec.write_text(f'name = "device"\ntarget = "device"\n[targets.device]\n'
                        f'url = "nerves+ssh://root@127.0.0.1:{local_port}"\nidentity = "{keys / "id_ed25519"}"\n'
                        f'known_hosts = "{keys / "known_hosts"}"\n'
                        '[[workload]]\nname = "gpio"\nvariants = ["write", "genserver_write"]\nruntime = "beam"\n'
                        '[workload.params]\nline = 3\niterations = 200\npause_ms = 0\n'
                        '[[workload]]\nname = "gpio"\nvariants = "blink"\nruntime = "beam"\n'
                        '[workload.params]\nline = 4\niterations = 30\nperiod_ms = 20\n')
        db = str(tmp_path / "device.db")
        r = cli("run", spec, "--db", db)
        assert r.code == 0, r.out + r.err
        store = Store(db)
        runs = {run["variant"]: run for run in store.runs()}
        assert sorted(run["variant"] for run in store.runs()) == ["blink", "genserver_write", "write"]
        for variant, run in runs.items():
            env = run["environment"]
            assert run["n_samples"] == (30 if variant == "blink" else 200), (variant, run["n_samples"])
            assert env["target_kind"] == "nerves_ssh" and env["machine"] == "aarch64"
        for variant in ("write", "genserver_write"):  # each call timed, directly and through the GenServer
            data = store.samples(runs[variant]["id"])
            assert (data["write_1"] > 0).all() and (data["write_0"] > 0).all(), variant
        assert_absolute_schedule(store.samples(runs["blink"]["id"]), 20_000_000)
        # The port program's refusal reaches the user through the harness (the chip's is the same path).
        bad = tmp_path / "bad.toml"
        bad.write_text(spec.read_text().split("[[workload]]")[0] + '[[workload]]\nname = "gpio"\nvariants = "write"\n'
                       'runtime = "beam"\n[workload.params]\nline = 99\niterations = 5\n')
        r = cli("run", bad, "--db", str(tmp_path / "bad.db"))
        assert r.code == 1 and "has 8 lines, 0..7" in " ".join(r.err.split()), r.out + r.err
        assert Store(str(tmp_path / "bad.db")).runs() == []
        # Nothing of rtscope's left in the device's /tmp: no session directory, no port program.
        assert pi3.run(["sh", "-c", "ls -A /tmp/rtscope 2>/dev/null; ls -d /tmp/rtscope-code-* 2>/dev/null"]
                       ).stdout.strip() == ""
        assert device.running()  # the device's VM keeps running
    finally:
        listener.close()
        device.stop()
