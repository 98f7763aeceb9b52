"""`rtscope monitor` of a fleet from one process, and a lab shared by several controllers (docs/lab.md).

Real boards: OpenSSH servers in their own namespaces (tests/sshd.py); a real PostgreSQL server for two
controllers (tests/pgserver.py). Intervals of 2-3 s keep each test around 20 s.
"""

from __future__ import annotations

import json
import re
import os
import subprocess
import sys
import threading
import time
from datetime import datetime
from pathlib import Path

import pytest

import pgserver
import sshd
from proc_helpers import default_signals
from rtscope.store import Store

WHY = sshd.available()
pytestmark = [pytest.mark.real, pytest.mark.skipif(WHY is not None, reason=WHY or "")]


@pytest.fixture(scope="module")
def servers(tmp_path_factory):
    servers = {f"b{i}": sshd.SshServer(tmp_path_factory.mktemp(f"b{i}"), f"rtscope-fleet-{i}").start()
               for i in (1, 2, 3)}
    yield servers
    for s in servers.values():
        s.stop()


@pytest.fixture
def boards(servers):
    """The three boards, each answering: one a failed test left powered off is started again."""
    for s in servers.values():
        if s.proc.poll() is not None:
            s.start()
    return servers


def targets_file(tmp_path: Path, servers: dict) -> Path:
    p = tmp_path / "lab-targets.toml"
    names = ", ".join(f'"{n}"' for n in servers)
    p.write_text("".join(s.table(n) for n, s in servers.items()) + f"[fleets]\nlab = [{names}]\n")
    return p


class Controller:
    """A `rtscope monitor` process; its output lines read as they come (with when they came)."""

    def __init__(self, args: list[str], env: dict):
        self.proc = subprocess.Popen([sys.executable, "-m", "rtscope", "monitor", *args], text=True,
                                     stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env,
                                     preexec_fn=default_signals)
        self.lines: list[str] = []
        self.err = ""
        self.reader = threading.Thread(target=self._read, daemon=True)
        self.reader.start()

    def _read(self) -> None:
        for line in self.proc.stdout:
            self.lines.append(line.rstrip("\n"))

    def wait_for(self, text: str, timeout: float = 60) -> str:
        deadline = time.monotonic() + timeout
        while True:
            found = next((line for line in list(self.lines) if text in line), None)
            if found is not None:
                return found
            assert self.proc.poll() is None or self.reader.is_alive(), \
                (text, self.lines, self.proc.stderr.read())
            assert time.monotonic() < deadline, (f"no line with {text!r} within {timeout} s", self.lines)
            time.sleep(0.05)

    def finish(self, timeout: float = 120) -> int:
        try:
            self.err = self.proc.stderr.read() if self.proc.wait(timeout) is not None else ""
        finally:
            if self.proc.poll() is None:
                self.proc.kill()
        self.reader.join(5)
        return self.proc.returncode


def lab_controller(tmp_path: Path, servers: dict, db: str, duration: str, *more: str) -> tuple["Controller", dict]:
    """`rtscope monitor --target lab` of the boards at 2 s intervals, and its environment."""
    env = {**os.environ, "RTSCOPE_TARGETS": str(targets_file(tmp_path, servers)), "PYTHONUNBUFFERED": "1"}
    return Controller(["--target", "lab", "--duration", duration, "--interval", "2s", "--interval-us", "1000",
                       "--db", db, *more], env), env


def epoch(iso: str) -> float:
    return datetime.fromisoformat(iso.replace("Z", "+00:00")).timestamp()


def by_board(db: str) -> dict[str, list]:
    out: dict[str, list] = {}
    for run in Store(db).runs():
        out.setdefault(run["settings"]["target"], []).append(run)
    for runs in out.values():
        runs.sort(key=lambda r: epoch(r["started_at"]))
    return out


def never_twice(runs: list) -> None:
    """One board's intervals never overlap in time: it was never watched by two controllers at once."""
    for a, b in zip(runs, runs[1:]):
        assert epoch(b["started_at"]) >= epoch(a["finished_at"]), (a.id, a["finished_at"], b.id, b["started_at"])


def stored_status(db: str) -> dict:
    """`rtscope lab --json`'s boards, read in this process."""
    from rtscope.experiment.fleet import lab_status as status
    return {b["board"]: b for b in status(Store(db))["boards"]}


def lab_status(db: str, env: dict) -> dict:
    r = subprocess.run([sys.executable, "-m", "rtscope", "lab", "--json", "--db", db], capture_output=True,
                       text=True, env=env, timeout=60)
    assert r.returncode == 0, r.stderr
    return {b["board"]: b for b in json.loads(r.stdout)["boards"]}


def probe_running(server: sshd.SshServer) -> bool:
    return any(c.split(" ")[0].endswith("/rtprobe") for c in server.namespace_processes().values())


def power_off_mid_interval(server: sshd.SshServer) -> float:
    """Every process of the board killed once an interval's probe runs there; when (Unix time)."""
    deadline = time.monotonic() + 10
    while not probe_running(server):
        assert time.monotonic() < deadline
        time.sleep(0.02)
    at = time.time()
    server.power_off()
    return at


def test_one_controller_a_board_goes_down_mid_interval_and_comes_back(boards, tmp_path):
    db = str(tmp_path / "lab.db")
    c, env = lab_controller(tmp_path, boards, db, "8s", "--give-up-after", "0")   # 0: asked until it answers
    try:
        c.wait_for("b2 [1/4]")
        down_at = power_off_mid_interval(boards["b2"])       # its second interval under way
        c.wait_for("b2 down")
        status = lab_status(db, env)
        assert status["b2"]["state"] == "down" and "b2" in status["b2"]["reason"]
        assert status["b1"]["state"] == "watching" and status["b1"]["controller"] == status["b2"]["controller"]
        time.sleep(2.5)
        up_at = time.time()
        boards["b2"].start()
        c.wait_for("b2 answers again")
        code = c.finish()
    finally:
        if c.proc.poll() is None:
            c.proc.kill()
    assert code == 0, (c.err, c.lines)
    assert "3 of 3 boards' monitorings finished, 12 intervals stored" in c.lines[-1]
    assert not any(re.match(r"board +state", line) for line in c.lines)   # piped: the lines, no table
    bounds = [line for line in c.lines if "worst case" in line]   # each interval's running bound, as monitor's
    assert len(bounds) == 12, c.lines
    assert all("seen in" in line and ("bound at p = 1e-09" in line or "no bound:" in line) for line in bounds)
    runs = by_board(db)
    for name, server in boards.items():
        assert sorted(r["plan_index"] for r in runs[name]) == list(range(4)), name  # nothing lost
        assert {r["environment"]["hostname"] for r in runs[name]} == {server.hostname}
        never_twice(runs[name])
    for name in ("b1", "b3"):   # the others kept going while b2 was down
        assert any(down_at < epoch(r["started_at"]) < up_at for r in runs[name]), name
    assert any(epoch(r["started_at"]) > up_at for r in runs["b2"])   # b2's intervals resumed
    status = stored_status(db)
    assert {b["state"] for b in status.values()} == {"finished"} and {b["intervals"] for b in status.values()} == {4}
    assert all(b["last_interval"]["max_us"] > 0 for b in status.values())
    for b in status.values():   # each last interval's running bound, as its controller recorded it
        last = b["last_interval"]
        assert (last["bound_us"] is None) != (last["bound_reason"] is None), last
        assert last["bound_reason"] != "not recorded (yet) by its controller", last
    r = subprocess.run([sys.executable, "-m", "rtscope", "lab", "--db", db], capture_output=True, text=True,
                       env={**os.environ, "COLUMNS": "80"}, timeout=60)     # the table, piped, 80 columns
    assert r.returncode == 0 and "bound µs" in r.stdout, r.stdout + r.stderr
    rows = {line.split()[0]: line for line in r.stdout.splitlines()[1:] if line.split()}
    for name, b in status.items():
        bound = b["last_interval"]["bound_us"]
        assert name in rows and (bound is None or f"{bound:.1f}" in rows[name]), r.stdout


@pytest.mark.skipif(pgserver.available() is not None, reason=pgserver.available() or "")
def test_two_controllers_share_a_lab_and_take_over_a_killed_ones_boards(boards, tmp_path):
    pg = pgserver.PgServer().start()
    try:
        url = pg.create_database("lab")
        env = {**os.environ, "RTSCOPE_TARGETS": str(targets_file(tmp_path, boards)), "PYTHONUNBUFFERED": "1"}
        common = ["--duration", "15s", "--interval", "3s", "--interval-us", "1000", "--db", url]
        a = Controller(["--target", "b1", "--target", "b2", *common], env)
        b = None
        try:
            a.wait_for("b1 watched")
            a.wait_for("b2 watched")
            b = Controller(["--target", "lab", *common], env)   # started later: takes the unwatched board
            b.wait_for("b3 watched")
            status = lab_status(url, env)
            assert status["b1"]["controller"] == status["b2"]["controller"] != status["b3"]["controller"]
            a.wait_for("b1 [2/5]")
            time.sleep(0.5)                                      # mid-interval
            assert not any(" watched" in line and line.startswith(("b1", "b2")) for line in b.lines), b.lines
            assert a.proc.poll() is None and not any("finished" in line for line in a.lines), a.lines
            a.proc.kill()
            killed_at = time.time()
            a.finish()
            b.wait_for("b1 watched")
            b.wait_for("b2 watched")
            code = b.finish()
        finally:
            for c in (a, b):
                if c is not None and c.proc.poll() is None:
                    c.proc.kill()
        assert code == 0, (b.err, b.lines)
        runs = by_board(url)
        for name in ("b1", "b2", "b3"):
            assert sorted(r["plan_index"] for r in runs[name]) == list(range(5)), name
            assert len({r["experiment_id"] for r in runs[name]}) == 1   # one monitoring, continued
            never_twice(runs[name])
        for name in ("b1", "b2"):   # taken over within two intervals of the kill
            after = [epoch(r["started_at"]) for r in runs[name] if epoch(r["started_at"]) > killed_at]
            assert after and after[0] - killed_at <= 2 * 3, (name, after[0] - killed_at)
            print(f"{name} taken over {after[0] - killed_at:.1f} s after the kill (interval 3 s)")
        status = stored_status(url)
        assert {s["state"] for s in status.values()} == {"finished"}
    finally:
        pg.stop()


@pytest.mark.parametrize("fleets, args, message", [
    ('lab = ["b1", "nope"]', ["--target", "lab"], "[fleets] lab: unknown target 'nope'"),
    ('b1 = ["b1"]', ["--target", "b1"], "'b1' is a target's name too"),
    ('lab = []', ["--target", "lab"], "a fleet is a non-empty list of target names"),
    ('lab = ["b1"]', ["--target", "lab", "--resume"], "--resume is for one target"),
    ('lab = ["b1"]', ["--target", "lab", "--target", "ghost"], "unknown target 'ghost'"),
])
def test_bad_fleets(cli, tmp_path, monkeypatch, clean_targets, fleets, args, message):
    from rtscope import targets
    tf = tmp_path / "t.toml"
    tf.write_text('[targets.b1]\nurl = "ssh://root@127.0.0.1:9"\n[targets.b2]\nurl = "ssh://root@127.0.0.1:9"\n'
                  f"[fleets]\n{fleets}\n")
    monkeypatch.setenv("RTSCOPE_TARGETS", str(tf))
    targets.FLEETS.clear()
    db = tmp_path / "s.db"
    try:
        r = cli("monitor", *args, "--db", str(db))
    finally:
        targets.FLEETS.clear()
    assert r.code == 2 and message in " ".join(r.err.split()), r.err
    assert not db.exists() or Store(str(db)).runs() == []


def test_lab_of_an_empty_store(cli, db):
    r = cli("lab", "--db", db)
    assert r.code == 0 and "no board in the lab's lease table yet" in r.out
    r = cli("lab", "--json", "--db", db)
    assert r.code == 0 and json.loads(r.out) == {"controllers": [], "boards": []}


def test_live_table_on_a_terminal(tmp_path, monkeypatch):
    """Two boards of kind local (this machine twice: only the display is under test here); piped, the first
    test's controller printed the lines alone."""
    import terminal
    tf = tmp_path / "t.toml"
    tf.write_text('[targets.l1]\nkind = "local"\n[targets.l2]\nkind = "local"\n[fleets]\nhere = ["l1", "l2"]\n')
    monkeypatch.setenv("RTSCOPE_TARGETS", str(tf))
    r = terminal.on_terminal(tmp_path, "monitor", "--target", "here", "--duration", "2s", "--interval", "1s", "--db",
            tmp_path / "s.db")
    assert r.code == 0, r.err
    for board in ("l1", "l2"):
        assert f"{board} [1/2] load none" in r.out and f"{board} [2/2] load none" in r.out
    # the table under the lines, last drawn with both boards finished
    assert re.search(r"board +state +intervals", r.out)
    assert re.search(r"l1 +finished +2/2", r.out) and re.search(r"l2 +finished +2/2", r.out)


def test_sigterm_gives_the_boards_back_and_the_same_command_continues(tmp_path):
    """Two boards of kind local (this machine twice): SIGTERM stops both intervals, marks both monitorings
    interrupted and frees their leases; the same command started again makes exactly what is missing."""
    import signal
    tf = tmp_path / "t.toml"
    tf.write_text('[targets.l1]\nkind = "local"\n[targets.l2]\nkind = "local"\n[fleets]\nhere = ["l1", "l2"]\n')
    env = {**os.environ, "RTSCOPE_TARGETS": str(tf), "PYTHONUNBUFFERED": "1"}
    db = str(tmp_path / "s.db")
    args = ["--target", "here", "--duration", "3s", "--interval", "1s", "--db", db]
    c = Controller(args, env)
    c.wait_for("l1 [1/3]")
    c.proc.send_signal(signal.SIGTERM)
    assert c.finish() == 143 and "terminated (SIGTERM)" in c.err, c.err
    status = stored_status(db)
    assert {b["state"] for b in status.values()} == {"unwatched"}
    assert {b["experiment_status"] for b in status.values()} == {"interrupted"}
    c = Controller(args, env)
    assert c.finish() == 0, c.err
    assert any(line.startswith("l1 watched: monitoring 1,") for line in c.lines), c.lines   # continued, not anew
    runs = by_board(db)
    assert {n: sorted(r["plan_index"] for r in runs[n]) for n in runs} == {"l1": [0, 1, 2], "l2": [0, 1, 2]}
    assert {n: len({r["experiment_id"] for r in runs[n]}) for n in runs} == {"l1": 1, "l2": 1}
