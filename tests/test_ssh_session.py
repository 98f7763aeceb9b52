"""The SSH session agent against a real OpenSSH server (tests/sshd.py): one channel per connection.

The login shell (with its rc files) starts once per experiment, counted by a ~/.bashrc that notes each start;
a run is one request; a slow link (+200 ms RTT through a relay) loses nothing when rtscope is stopped mid-run;
a target where the agent cannot run gets a channel per command, with a warning.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
import tomllib
from pathlib import Path

import pytest

import sshd
from rtscope import targets
from rtscope.errors import RtscopeError
from rtscope.experiment.runner import execute
from rtscope.experiment.spec import build_request
from rtscope.store import Store
from rtscope.targets.ssh import SshTarget
from fake_sysfs import CPU, fake_sysfs
from test_ssh_target import no_leftovers, signal_mid_run

WHY = sshd.available()
pytestmark = [pytest.mark.real, pytest.mark.skipif(WHY is not None, reason=WHY or "")]

EXEC_SUM = '[[workload]]\nname = "exec"\nvariants = "sum"\n[workload.params]\niterations = 10\npause_ms = 0\n'


@pytest.fixture(scope="module")
def slow(tmp_path_factory):
    """A board whose root's ~/.bashrc sleeps 200 ms and adds a line to `shells` each time it runs (bash sources
    it for every command from sshd), and puts a directory of its own on the PATH."""
    base = tmp_path_factory.mktemp("slow")
    (base / "bin").mkdir()
    tool = base / "bin" / "rtscope-test-tool"
    tool.write_text("#!/bin/sh\necho tool\n")
    tool.chmod(0o755)
    bashrc = f'sleep 0.2; echo x >> {base}/shells; export PATH="$PATH:{base}/bin"'
    server = sshd.SshServer(base / "server", "rtscope-slow",
                            setup=(f"printf '%s\\n' '{bashrc}' > {Path.home()}/.bashrc",)).start()
    server.shells = base / "shells"
    yield server
    server.stop()


@pytest.fixture(scope="module")
def far(tmp_path_factory):
    """A board behind a relay that adds 200 ms of round-trip time (a cellular or VPN link)."""
    base = tmp_path_factory.mktemp("far")
    server = sshd.SshServer(base / "server", "rtscope-far").start()
    relay = sshd.DelayRelay(server.port, 0.100)
    server.far_table = lambda name: sshd.relayed_table(server, relay, name, base)
    yield server
    relay.close()
    server.stop()


def shells_started(server) -> int:
    return server.shells.read_text().count("x") if server.shells.exists() else 0


def target_of(server: sshd.SshServer, **kw) -> SshTarget:
    return SshTarget("b", server.url, identity=str(server.user_key), known_hosts=str(server.known_hosts),
                     workdir=str(server.workdir), **kw)


def write_spec(tmp_path: Path, table: str, name: str, body: str, repetitions: int = 1) -> Path:
    spec = tmp_path / f"{name}.toml"
    spec.write_text(f'name = "session"\ntarget = "{name}"\nrepetitions = {repetitions}\n{table}\n{body}')
    return spec


# ---- the login shell starts once ---------------------------------------------------------------------

def test_the_login_shell_starts_once_per_experiment(slow, tmp_path, cli, clean_targets):
    """Its ~/.bashrc runs once for a whole experiment of 4 runs with the agent; once per command without."""
    db = str(tmp_path / "s.db")
    counts = {}
    for name, extra in (("agent", ""), ("channels", "session = false\n")):
        spec = write_spec(tmp_path, slow.table(name) + extra, name, EXEC_SUM, repetitions=4)
        before = shells_started(slow)
        r = cli("run", spec, "--db", db)
        assert r.code == 0, r.err
        counts[name] = shells_started(slow) - before
    assert counts["agent"] == 1
    assert counts["channels"] >= 4 + 4  # a channel per run, and the fixed ones: what the agent saves is real
    assert len(Store(db).runs()) == 8
    assert no_leftovers(slow) == {}


def test_the_agents_commands_see_the_login_shells_path_and_no_rc_file(slow):
    with target_of(slow) as t:
        assert t.session is not None
        assert t.which("rtscope-test-tool").endswith("/bin/rtscope-test-tool")  # the PATH .bashrc made
        r = t.run(["sh", "-c", 'echo "${ENV-none} ${BASH_ENV-none} $HOME"; rtscope-test-tool'])
        assert r.stdout == f"none none {Path.home()}\ntool\n"
    assert shells_started(slow) >= 1


# ---- one channel, many commands ----------------------------------------------------------------------

def test_commands_stdin_and_stops_keep_the_one_session(slow):
    with target_of(slow) as t:
        session = t.session
        before = shells_started(slow)
        every_byte = bytes(range(256)) * 3
        assert t.run(["cat"], stdin=every_byte, binary=True).stdout == every_byte  # written in the request
        big = bytes(range(256)) * 40                                               # more: through SFTP
        assert t.run(["cat"], stdin=big, binary=True).stdout == big
        r = t.run(["sh", "-c", "printf out; printf err >&2; exit 7"])
        assert (r.returncode, r.stdout, r.stderr) == (7, "out", "err")
        # A timeout stops the command's whole group, and the session carries on.
        with pytest.raises(RtscopeError, match=r"sh did not finish within 1 s on target b; stopped"):
            t.run(["sh", "-c", "trap '' TERM; sleep 300 & sleep 301"], timeout=1)
        assert t.run(["echo", "after"]).stdout == "after\n"
        # So does the fleet's interrupt, from another thread.
        threading.Timer(0.5, t.interrupt).start()
        r = t.run(["sleep", "300"], timeout=60)
        assert r.returncode != 0 and t.run(["echo", "again"]).stdout == "again\n"
        # Another thread's command while one runs: a channel of its own, both answered.
        other = {}
        worker = threading.Thread(target=lambda: other.update(r=t.run(["sh", "-c", "sleep 1; echo slow"])))
        worker.start()
        time.sleep(0.3)
        assert t.run(["echo", "meanwhile"]).stdout == "meanwhile\n"
        worker.join()
        assert other["r"].stdout == "slow\n"
        assert t.session is session and shells_started(slow) - before == 1  # that one other channel only
    assert no_leftovers(slow) == {}


def test_an_agent_killed_on_the_target_is_started_again(slow):
    with target_of(slow) as t:
        first = t.session
        slow_pids = [p for p, c in slow.namespace_processes().items() if "rtscope-session" in c]
        assert first.pid in slow_pids
        os.kill(first.pid, signal.SIGKILL)  # the target's processes are this machine's (no PID namespace)
        time.sleep(0.2)
        assert t.run(["echo", "back"]).stdout == "back\n"
        assert t.session is not first and t.session.pid != first.pid
    assert no_leftovers(slow) == {}


def test_a_run_with_load_takes_no_channel_and_no_login_shell(slow, tmp_path, clean_targets):
    """Load runs as a job of the agent: started, asked and stopped by requests; the killed rtscope's settings
    were looked for in the request that connected."""
    targets.define("slowload", tomllib.loads(slow.table("slowload"))["targets"]["slowload"], replace=True)
    store = Store(str(tmp_path / "s.db"))
    req = build_request("timer", "absolute", "native", {"interval_us": 1000, "loops": 300},
                        {"target": "slowload", "load": "cpu"})
    with targets.Pool() as pool:
        t = pool.get("slowload")
        assert t.answers.get("undo") is not None  # the check for a killed rtscope's settings came with it
        execute(req, store, target=t)  # deploys, asks the version
        assert "undo" not in t.answers  # taken by the first run
        before, requests, seen = shells_started(slow), t.session.requests, []
        real_run = t.run
        t.run = lambda argv, **kw: (seen.append(slow.namespace_processes()) if "timer" in argv else None,
                                    real_run(argv, **kw))[1]
        run = store.get_run(execute(req, store, target=t))
        assert shells_started(slow) == before and not t._channels  # no login shell, no channel of its own
        assert any("stress-ng" in c for c in seen[0].values()) and t.session.requests - requests >= 3
        assert any(n.startswith("load cpu") for n in run["trailer"]["notes"])
    assert no_leftovers(slow) == {}


def test_a_job_dies_with_its_agent(slow):
    """However the agent ends (here killed on the target), its background jobs' watchers kill them."""
    with target_of(slow) as t:
        job = t.spawn(["sleep", "300"], cwd=str(slow.workdir / "jobs"), log=str(slow.workdir / "jobs" / "log"))
        assert job.running() and job.members() == 1 and job.exit_code() is None
        other = t.spawn(["sh", "-c", "echo said; exit 3"], cwd=str(slow.workdir / "jobs"),
                        log=str(slow.workdir / "jobs" / "log2"))
        deadline = time.monotonic() + 5
        while other.exit_code() is None and time.monotonic() < deadline:
            time.sleep(0.05)
        assert (other.exit_code(), other.log_tail()) == (3, "said")
        other.stop()
        killed = t.session.pid
        os.kill(killed, signal.SIGKILL)
        # At once, before the channel's end reaches rtscope: the request finds a dead agent, which never took
        # it, so it goes to a new agent.
        assert t.run(["echo", "back"]).stdout == "back\n"
        assert t.session.pid != killed
        deadline = time.monotonic() + 5
        while any("sleep 300" in c for c in slow.namespace_processes().values()) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert not any("sleep 300" in c for c in slow.namespace_processes().values())
        assert not job.running()
        job.stop()
    assert no_leftovers(slow) == {}


# ---- the fallback ---------------------------------------------------------------------------------------

def test_where_the_agent_cannot_run_each_command_gets_a_channel_with_a_warning(tmp_path, cli, clean_targets):
    """A target without `env` (the agent's launcher): today's path, a warning, the runs stored."""
    server = sshd.SshServer(tmp_path / "noenv", "rtscope-noenv", setup=("mount --bind /bin/false /usr/bin/env",)).start()
    try:
        spec = write_spec(tmp_path, server.table("noenv"), "noenv", EXEC_SUM, repetitions=2)
        db = str(tmp_path / "s.db")
        r = cli("run", spec, "--db", db)
        assert r.code == 0, r.err
        said = " ".join(r.err.split())
        assert "warning: target noenv" in said and "the session agent cannot run there" in said
        assert "each command opens its own SSH channel instead" in said
        assert len(Store(db).runs()) == 2
        assert no_leftovers(server) == {}
    finally:
        server.stop()


# ---- a slow link: +200 ms RTT ---------------------------------------------------------------------------

def test_a_run_is_one_request_over_a_slow_link(far, tmp_path, cli, clean_targets):
    spec = write_spec(tmp_path, far.far_table("far"), "far", EXEC_SUM, repetitions=3)
    db = str(tmp_path / "s.db")
    r = cli("run", spec, "--db", db)
    assert r.code == 0, r.err
    runs = Store(db).runs()
    assert len(runs) == 3 and {x["environment"]["hostname"] for x in runs} == {"rtscope-far"}


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT])
def test_stopped_mid_run_over_a_slow_link_leaves_nothing_and_resumes_exactly(far, tmp_path, sig, clean_targets):
    """Ctrl-C or SIGTERM while a run with load and a governor measures, 200 ms away: no process left on the target,
    the governor written back, the experiment marked interrupted; --resume then stores every run exactly once."""
    cpu = fake_sysfs(tmp_path / "sysfs") / CPU
    body = ('[[workload]]\nname = "timer"\nvariants = "absolute"\n[workload.params]\ninterval_us = 1000\n'
            'loops = 1500\n[workload.settings]\nload = "cpu"\ngovernor = "performance"\n')
    spec = write_spec(tmp_path, far.far_table("far") + f'sysfs_root = "{tmp_path / "sysfs"}"\n', "far", body,
                      repetitions=2)
    db = str(tmp_path / "s.db")
    proc, err = signal_mid_run(spec, db, far, sig, "rtprobe", "stress-ng")
    assert proc.returncode != 0 and "marked interrupted" in err, err
    assert "Traceback" not in err
    assert no_leftovers(far, wait=20) == {}
    assert [(cpu / f"cpu{c}/cpufreq/scaling_governor").read_text().strip() for c in (0, 1)] == ["schedutil"] * 2
    assert sshd.run_dirs(far.workdir) == []
    if sig != signal.SIGTERM:
        return  # one of the two is resumed: that is slow over this link
    done = subprocess.run([sys.executable, "-m", "rtscope", "run", str(spec), "--db", db, "--resume"],
                          capture_output=True, text=True, timeout=180)
    assert done.returncode == 0, done.stderr
    runs = Store(db).runs()
    assert sorted(x["plan_index"] for x in runs) == [0, 1]  # none lost, none twice
    assert no_leftovers(far) == {}
