"""labgrid places as targets: a real labgrid coordinator and exporter on 127.0.0.1, the exporter's
NetworkService pointing at a real namespaced sshd (tests/sshd.py)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

import sshd
from rtscope.store import Store
from rtscope.signals import die_with_parent
from proc_helpers import default_signals

BIN = Path(sys.executable).parent
WHY = sshd.available() or (None if (BIN / "labgrid-coordinator").exists() else "labgrid is not installed")
pytestmark = [pytest.mark.real, pytest.mark.skipif(WHY is not None, reason=WHY or "")]


class Lab:
    def __init__(self, base: Path, server: sshd.SshServer):
        self.base, self.port = base, sshd.free_port()
        self.coordinator = f"127.0.0.1:{self.port}"
        (base / "exporter.yaml").write_text(f"board-1:\n  NetworkService:\n    address: 127.0.0.1\n"
                                            f"    username: root\n    port: {server.port}\n")
        self.procs = []

    def start(self) -> "Lab":
        try:
            return self._start()
        except BaseException:
            self.stop()
            raise

    def _start(self) -> "Lab":
        log = open(self.base / "lab.log", "wb")
        # The coordinator keeps its places in its working directory: the test's own.
        self.procs.append(subprocess.Popen([str(BIN / "labgrid-coordinator"), "-l", self.coordinator],
                                           stdout=log, stderr=log, start_new_session=True, cwd=self.base,
                                           preexec_fn=die_with_parent))
        time.sleep(1.5)
        self.procs.append(subprocess.Popen([str(BIN / "labgrid-exporter"), "-c", self.coordinator, "--name", "exp1",
                                            str(self.base / "exporter.yaml")], stdout=log, stderr=log,
                                           start_new_session=True, cwd=self.base, preexec_fn=die_with_parent))
        self.client("create")
        self.client("add-match", "exp1/board-1/*")
        deadline = time.monotonic() + 30
        while "NetworkService" not in self.client("show", check=False).stdout:
            assert time.monotonic() < deadline, (self.base / "lab.log").read_text()
            time.sleep(0.3)
        return self

    def client(self, *args, user: str | None = None, check: bool = True) -> subprocess.CompletedProcess:
        env = {**os.environ, "LG_COORDINATOR": self.coordinator, **({"LG_USERNAME": user} if user else {})}
        proc = subprocess.run([str(BIN / "labgrid-client"), "-p", "pi", *args], capture_output=True, text=True,
                              env=env, timeout=60)
        if check:
            assert proc.returncode == 0, proc.stderr
        return proc

    def holder(self) -> str | None:
        for line in self.client("show").stdout.splitlines():
            if line.strip().startswith("acquired:"):
                value = line.split(":", 1)[1].strip()
                return None if value == "None" else value
        return None

    def stop(self) -> None:
        for p in reversed(self.procs):
            try:
                os.killpg(p.pid, signal.SIGTERM)
                p.wait(10)
            except (ProcessLookupError, subprocess.TimeoutExpired):
                p.kill()


@pytest.fixture(scope="module")
def lab(tmp_path_factory):
    server = sshd.SshServer(tmp_path_factory.mktemp("lgboard"), "rtscope-lab-board").start()
    try:
        lab = Lab(tmp_path_factory.mktemp("lab"), server).start()
    except BaseException:
        server.stop()
        raise
    lab.server = server
    yield lab
    lab.stop()
    server.stop()


def spec(tmp_path: Path, lab: Lab, loops: int = 200) -> Path:
    s = lab.server
    p = tmp_path / "lab.toml"
    p.write_text(f'name = "lab"\ntarget = "pi"\n[targets.pi]\nurl = "labgrid://pi"\ncoordinator = "{lab.coordinator}"\n'
                 f'identity = "{s.user_key}"\nknown_hosts = "{s.known_hosts}"\nworkdir = "{s.workdir}"\n'
                 '[[workload]]\nname = "timer"\nvariants = "absolute"\n'
                 f'[workload.params]\ninterval_us = 1000\nloops = {loops}\n')
    return p


@pytest.fixture(autouse=True)
def forget_targets(clean_targets):
    yield


def test_a_run_on_a_place_acquires_and_releases_it(lab, tmp_path, cli):
    db = str(tmp_path / "s.db")
    r = cli("run", spec(tmp_path, lab), "--db", db)
    assert r.code == 0, r.err
    [run] = Store(db).runs()
    env = run["environment"]
    assert env["hostname"] == "rtscope-lab-board" and env["target_kind"] == "labgrid"
    assert env["labgrid_place"] == "pi" and env["labgrid_coordinator"] == lab.coordinator
    assert lab.holder() is None


def test_a_place_held_by_someone_else(lab, tmp_path, cli):
    lab.client("acquire", user="alice")
    try:
        r = cli("run", spec(tmp_path, lab), "--db", str(tmp_path / "s.db"))
        assert r.code == 1 and "the place is held by" in r.err and "alice" in r.err
        assert "--wait-for-place" in " ".join(r.err.split())
    finally:
        lab.client("release", user="alice")


def test_wait_for_place(lab, tmp_path):
    lab.client("acquire", user="bob")
    proc = subprocess.Popen([sys.executable, "-m", "rtscope", "run", str(spec(tmp_path, lab)), "--db",
                             str(tmp_path / "s.db"), "--wait-for-place", "60"], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    time.sleep(4)
    assert proc.poll() is None  # still waiting
    lab.client("release", user="bob")
    out, err = proc.communicate(timeout=120)
    assert proc.returncode == 0, err
    assert len(Store(str(tmp_path / "s.db")).runs()) == 1 and lab.holder() is None


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGKILL])
def test_the_place_is_released_when_rtscope_is_stopped(lab, tmp_path, sig):
    proc = subprocess.Popen([sys.executable, "-m", "rtscope", "run", str(spec(tmp_path, lab, loops=30000)), "--db",
                             str(tmp_path / "s.db")], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            preexec_fn=default_signals)
    deadline = time.monotonic() + 60
    while not any("rtprobe" in c for c in lab.server.namespace_processes().values()):
        assert time.monotonic() < deadline and proc.poll() is None, proc.communicate()
        time.sleep(0.1)
    assert lab.holder() is not None
    proc.send_signal(sig)
    proc.communicate(timeout=60)
    deadline = time.monotonic() + 30
    while lab.holder() is not None and time.monotonic() < deadline:
        time.sleep(0.3)
    assert lab.holder() is None
