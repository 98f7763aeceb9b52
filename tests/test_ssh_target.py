"""SSH targets against a real OpenSSH server that looks like another machine (tests/sshd.py).

Every runtime runs on the target with the target's machine record; settings,
load and files go through the target; faults leave nothing behind there.
"""

from __future__ import annotations

import os
import signal
import socket
import struct
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

import sshd
from fake_sysfs import CPU, fake_sysfs
from rtscope import targets
from rtscope.errors import RtscopeError
from rtscope.experiment.runner import execute
from rtscope.experiment.spec import build_request
from rtscope.store import Store
from rtscope.targets.ssh import SshTarget
from proc_helpers import default_signals

WHY = sshd.available()
pytestmark = [pytest.mark.real, pytest.mark.skipif(WHY is not None, reason=WHY or "")]


@pytest.fixture(scope="module")
def board(tmp_path_factory):
    server = sshd.SshServer(tmp_path_factory.mktemp("board"), "rtscope-board-1").start()
    yield server
    server.stop()



def define(server: sshd.SshServer, name: str = "board", **extra) -> str:
    targets.define(name, {"url": server.url, "identity": str(server.user_key),
                          "known_hosts": str(server.known_hosts), "workdir": str(server.workdir), **extra},
                   replace=True)
    return name


def spec_file(tmp_path: Path, server: sshd.SshServer, body: str, name: str = "board", **extra) -> Path:
    p = tmp_path / "spec.toml"
    p.write_text(f'name = "remote"\ntarget = "{name}"\n{server.table(name, **extra)}\n{body}')
    return p


def no_leftovers(server: sshd.SshServer, wait: float = 10.0) -> dict:
    """The target namespace's processes other than sshd's own per-connection ones, once they settle."""
    deadline = time.monotonic() + wait
    while True:
        left = {p: c for p, c in server.namespace_processes().items() if not c.startswith("sshd")}
        if not left or time.monotonic() > deadline:
            return left
        time.sleep(0.1)


def fleet_spec(tmp_path: Path, servers: dict, repetitions: int) -> Path:
    """A spec running 0.9 s of exec sleep per repetition on each of `servers` (name -> SshServer)."""
    spec = tmp_path / "fleet.toml"
    names = ", ".join(f'"{n}"' for n in servers)
    spec.write_text(f'name = "fleet"\ntarget = [{names}]\nrepetitions = {repetitions}\n'
                    + "".join(s.table(n) for n, s in servers.items())
                    + '[[workload]]\nname = "exec"\nvariants = "sleep"\n'
                      '[workload.params]\nn = 300\niterations = 3\npause_ms = 0\n')
    return spec


def start_run(spec: Path, db: str, *more: str) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-m", "rtscope", "run", str(spec), "--db", db, *more], text=True,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, preexec_fn=default_signals)


def wait_until_running(proc: subprocess.Popen, server: sshd.SshServer, *names: str) -> None:
    """Until every one of `names` runs in the target's namespace (the run is under way there)."""
    deadline = time.monotonic() + 60
    while not all(any(n in c for c in server.namespace_processes().values()) for n in names):
        assert time.monotonic() < deadline and proc.poll() is None, proc.communicate()
        time.sleep(0.05)


def signal_mid_run(spec: Path, db: str, server: sshd.SshServer, sig: int, *names: str) -> tuple[subprocess.Popen, str]:
    """`rtscope run SPEC` sent `sig` once every one of `names` runs on `server`: the ended process, its stderr."""
    proc = start_run(spec, db)
    try:
        wait_until_running(proc, server, *names)
        proc.send_signal(sig)
        _, err = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
    return proc, err


# ---- the target itself ------------------------------------------------------------------------------

def test_commands_files_and_machine_record(board, tmp_path):
    t = SshTarget("b", board.url, identity=str(board.user_key), known_hosts=str(board.known_hosts),
                  workdir=str(board.workdir))
    with t:
        assert t.uname()["nodename"] == "rtscope-board-1"
        r = t.run(["sh", "-c", "echo out; echo err >&2; exit 3"])
        assert (r.returncode, r.stdout, r.stderr) == (3, "out\n", "err\n")
        assert t.run(["cat"], stdin=b"piped\x00bytes").stdout == "piped\x00bytes"
        # The checkout is hidden on the target: it is another machine as far as rtscope can tell.
        assert t.run(["test", "-e", str(Path(__file__))]).returncode != 0
        local = tmp_path / "f.bin"
        local.write_bytes(os.urandom(100_000))
        t.put(str(local), f"{board.workdir}/f.bin", 0o600)
        t.get(f"{board.workdir}/f.bin", str(tmp_path / "back.bin"))
        assert (tmp_path / "back.bin").read_bytes() == local.read_bytes()
        files = t.read_files(["/proc/sys/kernel/hostname", "/no/such/file", f"{board.workdir}/f.bin"])
        assert files["/proc/sys/kernel/hostname"] == "rtscope-board-1\n" and files["/no/such/file"] is None
        snap = t.snapshot("probe 1")
        assert snap["hostname"] == "rtscope-board-1" and snap["target"] == "b" and snap["target_kind"] == "ssh"
        assert snap["cpu_count"] >= 1 and snap["kernel_release"]


def test_timeout_kills_the_whole_group_on_the_target(board):
    t = SshTarget("b", board.url, identity=str(board.user_key), known_hosts=str(board.known_hosts),
                  workdir=str(board.workdir))
    with t:
        with pytest.raises(RtscopeError, match=r"sh did not finish within 1 s on target b; stopped"):
            t.run(["sh", "-c", "trap '' TERM; sleep 300 & sleep 301"], timeout=1)
    assert no_leftovers(board) == {}


# ---- runs on the target -------------------------------------------------------------------------------

@pytest.mark.parametrize("runtime, workload, variant, params", [
    ("native", "exec", "sum", {"iterations": 50, "pause_ms": 0}),
    ("native", "timer", "absolute", {"interval_us": 500, "loops": 200}),
    ("native", "storage", "write_sync", {"size": "64K", "repetitions": 2}),
    ("cyclictest", "timer", "absolute", {"interval_us": 500, "loops": 200}),
    ("fio", "storage", "read", {"size": "64K", "repetitions": 2}),
    ("beam", "exec", "sum", {"iterations": 20, "pause_ms": 0}),
    ("native", "tasks", "memory", {"counts": "1,100"}),
])
def test_each_runtime_runs_on_the_target(board, tmp_path, clean_targets, runtime, workload, variant, params):
    name = define(board)
    if workload == "storage":
        params = {**params, "dir": str(board.workdir)}
    settings = {"target": name, **({"model": "cbtask"} if workload == "tasks" else {})}
    req = build_request(workload, variant, runtime, params, settings)
    store = Store(str(tmp_path / "s.db"))
    with targets.Pool() as pool:
        run = store.get_run(execute(req, store, target=pool.get(name)))
    assert run["n_samples"] > 0 and run["settings"]["target"] == name
    env = run["environment"]
    assert env["hostname"] == "rtscope-board-1" and env["target"] == name and env["target_kind"] == "ssh"
    assert no_leftovers(board) == {}
    # Run directories are removed; deployed tools stay in the cache for the next run.
    assert sshd.run_dirs(board.workdir) == []


def test_a_run_takes_one_request_and_records_the_state_of_its_time(board, tmp_path, clean_targets, monkeypatch):
    """The run directory, the machine state, the probe and its sample file: one request on the target's session
    per run, no channel of its own; the machine record read whole once per connection, its changing part (load,
    governors) per run."""
    import paramiko
    name = define(board)
    store = Store(str(tmp_path / "s.db"))
    req = build_request("exec", "sum", "native", {"iterations": 10, "pause_ms": 0}, {"target": name})
    opened = []
    real_open = paramiko.Transport.open_channel
    monkeypatch.setattr(paramiko.Transport, "open_channel",
                        lambda self, kind, *a, **kw: (opened.append(kind), real_open(self, kind, *a, **kw))[1])
    with targets.Pool() as pool:
        t = pool.get(name)
        whole = t.snapshot()
        per_run = []
        for _ in range(3):
            before = len(opened), t.session.requests
            run = store.get_run(execute(req, store, target=t))
            per_run.append((len(opened) - before[0], t.session.requests - before[1]))
            env = run["environment"]
            per_run_keys = ("loadavg", "timestamp", "probe_version", "host_window")   # what each run has of its own
            assert {k: v for k, v in env.items() if k not in per_run_keys} == \
                {k: v for k, v in whole.items() if k not in per_run_keys}
            assert env["loadavg"] and env["timestamp"] >= whole["timestamp"] and env["probe_version"]
        assert per_run[1:] == [(0, 1), (0, 1)]  # the first run also deploys and asks the probe's version
        # A run directory is removed after the next command's reply (which makes the next run's ahead): the
        # last run's and the next one are left, until the target closes. The target does both after it has
        # replied, so a moment after the run returns it may still hold the one before, or not yet the next.
        deadline = time.monotonic() + 5
        while len(left := sshd.run_dirs(board.workdir, wait=0)) != 2 and time.monotonic() < deadline:
            time.sleep(0.05)
        assert len(left) == 2
    assert sshd.run_dirs(board.workdir) == []
    samples = store.samples(store.runs()[-1].id)["duration"]
    assert len(samples) == 10 and (samples > 0).all()


def test_a_large_sample_file_comes_back_whole(board, tmp_path, clean_targets):
    """16 MB back on the run's channel: sshd reports the exit status before such output has all come."""
    name = define(board)
    store = Store(str(tmp_path / "s.db"))
    req = build_request("exec", "nothing", "native", {"iterations": 1_000_000, "pause_ms": 0}, {"target": name})
    with targets.Pool() as pool:
        t = pool.get(name)
        for _ in range(2):
            run = store.get_run(execute(req, store, target=t))
            assert run.n_samples == 1_000_000
            assert len(store.samples(run.id)["duration"]) == 1_000_000


def test_deploy_once_per_version(board, tmp_path, clean_targets):
    name = define(board)
    store = Store(str(tmp_path / "s.db"))
    req = build_request("exec", "sum", "native", {"iterations": 10, "pause_ms": 0}, {"target": name})
    with targets.Pool() as pool:
        execute(req, store, target=pool.get(name))
    cached = sorted((board.workdir / "cache").glob("*/rtprobe"))
    assert len(cached) == 1
    stamp = cached[0].stat().st_mtime_ns
    with targets.Pool() as pool:  # a new connection (a new experiment) finds it there
        t = pool.get(name)
        execute(req, store, target=t)
        execute(req, store, target=t)
    assert sorted((board.workdir / "cache").glob("*/rtprobe")) == cached
    assert cached[0].stat().st_mtime_ns == stamp


def test_governor_on_the_targets_fake_sysfs(board, tmp_path, clean_targets):
    root = tmp_path / "sysfs"
    cpu = fake_sysfs(root) / CPU
    name = define(board, sysfs_root=str(root))
    seen = []
    store = Store(str(tmp_path / "s.db"))
    req = build_request("exec", "sum", "native", {"iterations": 10, "pause_ms": 0},
                        {"target": name, "governor": "performance"})
    with targets.Pool() as pool:
        t = pool.get(name)
        real_run = t.run

        def spy(argv, **kw):  # the probe starts while the governor is set
            if argv and argv[0].endswith("rtprobe") and "exec" in argv:
                seen.append((cpu / "cpu1/cpufreq/scaling_governor").read_text().strip())
            return real_run(argv, **kw)

        t.run = spy
        run = store.get_run(execute(req, store, target=t))
    assert seen == ["performance"]
    assert (cpu / "cpu0/cpufreq/scaling_governor").read_text().strip() == "schedutil"
    assert run["settings"]["governor"] == "performance"
    assert run["environment"]["governors"] == {"0": "performance", "1": "performance"}  # as measured
    assert any("on target board" in n for n in run["trailer"]["notes"])


def test_load_started_and_stopped_on_the_target(board, tmp_path, clean_targets):
    name = define(board)
    store = Store(str(tmp_path / "s.db"))
    req = build_request("timer", "absolute", "native", {"interval_us": 1000, "loops": 300},
                        {"target": name, "load": "cpu"})
    seen: list[dict] = []
    with targets.Pool() as pool:
        t = pool.get(name)
        real_run = t.run

        def spy(argv, **kw):
            if argv and argv[0].endswith("rtprobe") and "timer" in argv:
                seen.append(board.namespace_processes())
            return real_run(argv, **kw)

        t.run = spy
        run = store.get_run(execute(req, store, target=t))
    assert seen and any("stress-ng" in c for c in seen[0].values())  # the load ran there, not here
    assert any("on target board" in n and n.startswith("load cpu") for n in run["trailer"]["notes"])
    assert no_leftovers(board) == {}


# ---- experiments from the CLI: fleets, interruption ----------------------------------------------------

def test_cli_run_on_a_target_and_sysinfo(board, tmp_path, cli, clean_targets):
    spec = spec_file(tmp_path, board, '[[workload]]\nname = "exec"\nvariants = ["sum", "fib"]\n'
                                      '[workload.params]\niterations = 30\npause_ms = 0\n')
    db = str(tmp_path / "s.db")
    r = cli("run", spec, "--db", db)
    assert r.code == 0, r.err
    assert "target=board" in r.out
    runs = Store(db).runs()
    assert len(runs) == 2 and {x["environment"]["hostname"] for x in runs} == {"rtscope-board-1"}
    r = cli("sysinfo", "--target", "board", "--spec", spec, "--json")
    assert r.code == 0 and '"hostname": "rtscope-board-1"' in r.out
    r = cli("targets", "--spec", spec)
    assert r.code == 0 and "rtscope-board-1" in r.out and "runtime native: ok" in r.out


def test_a_duet_on_the_target(board, tmp_path, cli, clean_targets):
    """Design duet over SSH: the two arms started side by side on the board's CPUs by one command, the gate
    under the board's run directory, nothing left there."""
    spec = tmp_path / "duet.toml"
    spec.write_text(f'name = "remote"\ntarget = "board"\ndesign = "duet"\nrepetitions = 2\n{board.table("board")}\n'
                    '[[workload]]\nname = "exec"\nvariants = "sum"\n[workload.params]\niterations = 50\n'
                    'pause_ms = 0\n[workload.settings]\nmlock = [false, true]\n')
    db = str(tmp_path / "s.db")
    r = cli("run", spec, "--db", db)
    assert r.code == 0, r.err
    runs = Store(db).runs()
    assert len(runs) == 4 and {x["environment"]["hostname"] for x in runs} == {"rtscope-board-1"}
    assert {x.header["pairing"]["design"] for x in runs} == {"duet"}
    assert {x.header["pairing"]["cpu"] for x in runs} == {0, 1}
    assert no_leftovers(board) == {} and sshd.run_dirs(board.workdir) == []


def test_two_targets_run_in_parallel(board, tmp_path, clean_targets, tmp_path_factory):
    other = sshd.SshServer(tmp_path_factory.mktemp("board2"), "rtscope-board-2").start()
    try:
        spec = fleet_spec(tmp_path, {"one": board, "two": other}, 2)
        db = str(tmp_path / "s.db")
        proc = start_run(spec, db)
        together = per_board_max = 0
        while proc.poll() is None:
            probes = [sum(c.split(" ")[0].endswith("/rtprobe") for c in s.namespace_processes().values())
                      for s in (board, other)]
            together += all(probes)
            per_board_max = max(per_board_max, *probes)
            time.sleep(0.02)
        out, err = proc.communicate()
        assert proc.returncode == 0, err
    finally:
        other.stop()
    hosts = sorted(x["environment"]["hostname"] for x in Store(db).runs())
    assert hosts == ["rtscope-board-1"] * 2 + ["rtscope-board-2"] * 2
    assert together > 0        # both boards measured at the same time
    assert per_board_max == 1  # never two runs at once on one board


def test_a_target_that_goes_away_fails_its_runs_while_the_other_finishes(board, tmp_path, cli, clean_targets,
                                                                         tmp_path_factory):
    other = sshd.SshServer(tmp_path_factory.mktemp("board3"), "rtscope-board-3").start()
    spec = fleet_spec(tmp_path, {"one": board, "gone": other}, 3)
    db = str(tmp_path / "s.db")
    proc = start_run(spec, db, "--reconnect-for", "3")  # it does not come back: tried again for 3 s
    try:
        wait_until_running(proc, other, "rtprobe")
        other.power_off()  # mid-run
        out, err = proc.communicate(timeout=120)
    finally:
        other.stop()
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 1, err
    assert "target gone" in err and "(the others finished)" in err and "--resume" in err
    assert "tried again for 3 s: --reconnect-for" in err, err
    runs = Store(db).runs()
    assert sorted(x["settings"]["target"] for x in runs).count("one") == 3
    assert no_leftovers(board) == {}


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGKILL])
def test_killing_rtscope_mid_run_leaves_nothing_on_the_target(board, tmp_path, sig, clean_targets):
    spec = spec_file(tmp_path, board, '[[workload]]\nname = "timer"\nvariants = "absolute"\n'
                                      '[workload.params]\ninterval_us = 1000\nloops = 30000\n'
                                      '[workload.settings]\nload = "cpu"\n')
    db = str(tmp_path / "s.db")
    proc, err = signal_mid_run(spec, db, board, sig, "rtprobe", "stress-ng")
    assert proc.returncode != 0
    assert no_leftovers(board, wait=20) == {}
    assert Store(db).runs() == []
    if sig == signal.SIGTERM:
        assert "marked interrupted" in err
        assert sshd.run_dirs(board.workdir) == []


# ---- errors: one clear line naming the target, nothing stored -----------------------------------------

def _error(cli, tmp_path, table: str, target_name: str = "bad") -> str:
    spec = tmp_path / "bad.toml"
    spec.write_text(f'name = "bad"\ntarget = "{target_name}"\n{table}\n[[workload]]\nname = "exec"\n'
                    'variants = "sum"\n[workload.params]\niterations = 5\n')
    db = str(tmp_path / "s.db")
    r = cli("run", spec, "--db", db)
    assert r.code == 1, r.out + r.err
    assert not Path(db).exists() or Store(db).runs() == []
    return " ".join(r.err.split())


def test_unreachable_host(cli, tmp_path, clean_targets):
    (tmp_path / "known_hosts").write_text("")
    err = _error(cli, tmp_path, f'[targets.bad]\nurl = "ssh://root@127.0.0.1:{sshd.free_port()}"\n'
                               f'known_hosts = "{tmp_path / "known_hosts"}"\n')
    assert "target bad" in err and "unreachable: connection refused" in err


def test_a_host_that_resets_the_handshake(tmp_path):
    """A board that accepts the connection and resets it (an sshd killed as it starts, a board powering off):
    rtscope's own error, never paramiko's traceback from its transport thread."""
    listener = socket.create_server(("127.0.0.1", 0))
    port = listener.getsockname()[1]

    def reset_each():
        while True:
            try:
                conn, _ = listener.accept()
            except OSError:
                return
            conn.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))   # close sends RST
            time.sleep(0.2)   # paramiko has sent its banner and waits for the board's
            conn.close()
    threading.Thread(target=reset_each, daemon=True).start()
    (tmp_path / "known_hosts").write_text("")
    spec = tmp_path / "bad.toml"
    spec.write_text(f'name = "bad"\ntarget = "bad"\n[targets.bad]\nurl = "ssh://root@127.0.0.1:{port}"\n'
                    f'known_hosts = "{tmp_path / "known_hosts"}"\n'
                    '[[workload]]\nname = "exec"\nvariants = "sum"\n[workload.params]\niterations = 5\n')
    try:   # a process of its own: in pytest's, its logging handlers would hide a traceback logged to stderr
        r = subprocess.run([sys.executable, "-m", "rtscope", "run", str(spec), "--db", str(tmp_path / "s.db")],
                           capture_output=True, text=True, timeout=120)
    finally:
        listener.close()
    assert r.returncode == 1 and "target bad" in r.stderr and "reset by peer" in r.stderr, r.stderr
    assert "Traceback" not in r.stderr, r.stderr


def test_wrong_key(board, cli, tmp_path, clean_targets):
    wrong = tmp_path / "wrong_key"
    sshd.keygen(wrong)
    err = _error(cli, tmp_path, board.table("bad").replace(str(board.user_key), str(wrong)))
    assert "target bad" in err and "authentication failed for user root (key" in err


def test_unknown_host_key(board, cli, tmp_path, clean_targets):
    empty = tmp_path / "empty_known_hosts"
    empty.write_text("")
    err = _error(cli, tmp_path, board.table("bad").replace(str(board.known_hosts), str(empty)))
    assert "target bad" in err and "unknown host key (ssh-ed25519 SHA256:" in err and "never accepted" in err


def test_changed_host_key(board, cli, tmp_path, clean_targets):
    other = tmp_path / "other_host_key"
    pub = sshd.keygen(other)
    changed = tmp_path / "changed_known_hosts"
    changed.write_text(f"[127.0.0.1]:{board.port} {' '.join(pub.split()[:2])}\n")
    err = _error(cli, tmp_path, board.table("bad").replace(str(board.known_hosts), str(changed)))
    assert "target bad" in err and "the host key CHANGED" in err and "ssh-keygen -R" in err


def test_workdir_without_permission(board, cli, tmp_path, clean_targets):
    err = _error(cli, tmp_path, board.table("bad").replace(str(board.workdir), "/proc/version/rtscope"))
    assert "target bad" in err and "workdir /proc/version/rtscope cannot be created or is not writable" in err


def test_disk_full_on_the_target(cli, tmp_path, clean_targets):
    small = sshd.SshServer(tmp_path / "small", "rtscope-small", workdir_bytes=64 * 1024).start()
    try:
        err = _error(cli, tmp_path, small.table("bad"))
    finally:
        small.stop()
    assert "target bad" in err and "cannot copy rtprobe" in err


def test_ssh_environment_shorthand_says_what_to_write(cli, tmp_path):
    spec = tmp_path / "old.toml"
    spec.write_text('name = "old"\n[[workload]]\nname = "exec"\nvariants = "sum"\n'
                    '[workload.settings]\nenv = "ssh:pi@board"\n')
    r = cli("check", spec)
    assert r.code == 2 and "another machine is a target, not an environment" in " ".join(r.err.split())


def test_bad_target_definitions(cli, tmp_path, clean_targets):
    for table, message in ((' [targets.x]\nurl = "telnet://x"\n', "has no known scheme"),
                           ('[targets.x]\nurl = "ssh://h"\ncolour = "red"\n', "unknown key 'colour'"),
                           ('[targets.local]\nurl = "ssh://h"\n', "is built in")):
        spec = tmp_path / "t.toml"
        spec.write_text(f'name = "t"\n{table}\n[[workload]]\nname = "exec"\nvariants = "sum"\n')
        r = cli("check", spec)
        assert r.code == 2 and message in " ".join(r.err.split()), r.err
    spec.write_text('name = "t"\ntarget = "nowhere"\n[[workload]]\nname = "exec"\nvariants = "sum"\n')
    r = cli("check", spec)
    assert r.code == 2 and "unknown target 'nowhere'; defined: local" in " ".join(r.err.split())


def test_fleet_interrupted_then_resumed_exactly(board, tmp_path, clean_targets, tmp_path_factory):
    other = sshd.SshServer(tmp_path_factory.mktemp("board4"), "rtscope-board-4").start()
    try:
        spec = fleet_spec(tmp_path, {"one": board, "two": other}, 3)
        db = str(tmp_path / "s.db")
        proc = start_run(spec, db)
        wait_until_running(proc, other, "rtprobe")
        proc.send_signal(signal.SIGINT)
        out, err = proc.communicate(timeout=60)
        assert proc.returncode == 130, err
        assert "marked interrupted" in err
        assert no_leftovers(board) == {} and no_leftovers(other) == {}
        before = Store(db).runs()
        assert len(before) < 6
        r = subprocess.run([sys.executable, "-m", "rtscope", "run", str(spec), "--db", db, "--resume"],
                           capture_output=True, text=True, timeout=120)
        assert r.returncode == 0, r.stderr
        runs = Store(db).runs()
        assert sorted(x["plan_index"] for x in runs) == list(range(6))  # none lost, none twice
        assert sorted(x["settings"]["target"] for x in runs) == ["one"] * 3 + ["two"] * 3
    finally:
        other.stop()


def test_target_url_without_a_table(board, tmp_path, cli, clean_targets, monkeypatch):
    """--target ssh://... uses the default keys and ~/.ssh/known_hosts, like ssh does."""
    home = tmp_path / "home"
    (home / ".ssh").mkdir(parents=True)
    for src, dest in ((board.user_key, "id_ed25519"), (board.known_hosts, "known_hosts")):
        (home / ".ssh" / dest).write_bytes(Path(src).read_bytes())
        (home / ".ssh" / dest).chmod(0o600)
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.delenv("SSH_AUTH_SOCK", raising=False)
    spec = tmp_path / "s.toml"
    spec.write_text('name = "url"\n[[workload]]\nname = "exec"\nvariants = "sum"\n'
                    '[workload.params]\niterations = 20\npause_ms = 0\n')
    db = str(tmp_path / "s.db")
    r = cli("run", spec, "--db", db, "--target", board.url)
    assert r.code == 0, r.err
    [run] = Store(db).runs()
    assert run["settings"]["target"] == board.url and run["environment"]["hostname"] == "rtscope-board-1"


def test_monitor_a_target(board, tmp_path, cli, clean_targets):
    define(board)
    db = str(tmp_path / "m.db")
    r = cli("monitor", "--target", "board", "--duration", "4s", "--interval", "2s", "--db", db)
    assert r.code == 0, r.err
    runs = Store(db).runs()
    assert len(runs) == 2 and {x["environment"]["hostname"] for x in runs} == {"rtscope-board-1"}
    assert all(x["trailer"]["histograms"] for x in runs)
    assert no_leftovers(board) == {}
