"""The board side of faults (docs/lab.md, "When a board hangs, reboots or its probe never returns"), against a real
OpenSSH target in its own namespaces (tests/sshd.py): every process of the target stopped (SIGSTOP) during `rtscope
run`, its probe alone stopped, the target "rebooted" (every process killed, sshd started again on the same port
with the same host key and a new boot id), and a finite `monitor` of a board that hangs.

The boot id: a namespace cannot change the kernel's /proc/sys/kernel/random/boot_id, so each start of the target
bind-mounts a file of the test over it inside the target's mount namespace; rtscope reads the real path. Bounds
are set low through the target's table (keepalive_s, silent_after_s) and the options (--run-timeout,
--reconnect-for); runs are 4 of about 1 s each.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
import uuid
from pathlib import Path

import pytest

import sshd
from proc_helpers import default_signals
from rtscope.store import Store
from test_ssh_target import no_leftovers

WHY = sshd.available()
pytestmark = [pytest.mark.real, pytest.mark.skipif(WHY is not None, reason=WHY or "")]

KEEPALIVE_S, SILENT_AFTER_S = 1, 3
RUNS = 4


class Board(sshd.SshServer):
    """A target whose boot id is a file of the test, bind-mounted over the kernel's in its namespace."""

    def __init__(self, base: Path, hostname: str):
        self.boot_id = base / "boot_id"
        base.mkdir(parents=True, exist_ok=True)
        self.boot_id.write_text(str(uuid.uuid4()) + "\n")
        super().__init__(base, hostname, setup=(f"mount --bind {self.boot_id} /proc/sys/kernel/random/boot_id",))

    def reboot(self) -> None:
        """Like a board that resets: every process killed, a new boot id, sshd back on its port with its key."""
        self.power_off()
        self.boot_id.write_text(str(uuid.uuid4()) + "\n")
        self.start()

    def signal_all(self, sig: int) -> None:
        for pid in [self.proc.pid, *self.namespace_processes()]:
            try:
                os.kill(pid, sig)
            except ProcessLookupError:
                pass

    def probe_pids(self) -> list[int]:
        return [p for p, c in self.namespace_processes().items() if c.split(" ")[0].endswith("/rtprobe")]


@pytest.fixture
def board(tmp_path):
    server = Board(tmp_path / "board", "rtscope-faulty-1").start()
    yield server
    server.signal_all(signal.SIGCONT)
    server.stop()


def spec_file(tmp_path: Path, board: Board) -> Path:
    p = tmp_path / "spec.toml"
    p.write_text(f'name = "faults"\ntarget = "board"\nrepetitions = {RUNS}\n'
                 + board.table("board") + f"keepalive_s = {KEEPALIVE_S}\nsilent_after_s = {SILENT_AFTER_S}\n"
                 + '[[workload]]\nname = "exec"\nvariants = "sleep"\n'
                   '[workload.params]\nn = 300\niterations = 3\npause_ms = 0\n')
    return p


class Command:
    """An `rtscope` process; its stderr lines read as they come."""

    def __init__(self, *args: str):
        self.proc = subprocess.Popen([sys.executable, "-m", "rtscope", *args], text=True, stdout=subprocess.PIPE,
                                     stderr=subprocess.PIPE, env={**os.environ, "PYTHONUNBUFFERED": "1",
                                                                  "COLUMNS": "300"},
                                     preexec_fn=default_signals)
        self.err: list[str] = []
        self.out = ""
        self.reader = threading.Thread(target=self._read, daemon=True)
        self.reader.start()

    def _read(self) -> None:
        for line in self.proc.stderr:
            self.err.append(line.rstrip("\n"))

    def wait_for(self, text: str, timeout: float = 60) -> None:
        deadline = time.monotonic() + timeout
        while not any(text in line for line in list(self.err)):
            assert self.proc.poll() is None, (text, self.err)
            assert time.monotonic() < deadline, (text, self.err)
            time.sleep(0.05)

    def finish(self, timeout: float = 120) -> int:
        try:
            self.out = self.proc.stdout.read() if self.proc.wait(timeout) is not None else ""
        finally:
            if self.proc.poll() is None:
                self.proc.kill()
        self.reader.join(5)
        return self.proc.returncode

    @property
    def said(self) -> str:
        return " ".join(" ".join(self.err).split())


def stored(db: str) -> tuple[list[int], dict]:
    """The plan indexes stored (sorted, duplicates kept) and the experiment's record."""
    store = Store(db)
    runs = store.runs()
    exp = store.experiment_row(runs[0]["experiment_id"] if runs else 1)
    return sorted(r["plan_index"] for r in runs), exp


def wait_for_probe(board: Board, timeout: float = 20) -> list[int]:
    deadline = time.monotonic() + timeout
    while not (pids := board.probe_pids()):
        assert time.monotonic() < deadline, "no probe ran on the board"
        time.sleep(0.02)
    return pids


def test_a_hung_board_ends_the_run_then_resume_completes_it(board, tmp_path):
    """Every process of the target stopped while its second run's probe runs (the TCP connection stays open):
    `rtscope run` ends within the silence bound (3 s) plus a keepalive and some slack, exit 1, naming the board,
    the run and how long it was silent; the finished run stays stored once, the experiment is failed with the
    attempt recorded. Once continued, nothing of rtscope is left on the target, and --resume stores the rest."""
    db, spec = str(tmp_path / "s.db"), spec_file(tmp_path, board)
    c = Command("run", str(spec), "--db", db)
    c.wait_for("run 1:")
    wait_for_probe(board)
    board.signal_all(signal.SIGSTOP)
    stopped_at = time.monotonic()
    code = c.finish(timeout=60)
    took = time.monotonic() - stopped_at
    assert code == 1, c.err
    assert took < SILENT_AFTER_S + KEEPALIVE_S + 10, took
    said = c.said
    assert "Traceback" not in said
    assert "target board (root@127.0.0.1:" in said and "is not answering: silent for" in said, said
    assert "run 2 (exec/sleep/native" in said and "experiment 1 stopped (marked failed)" in said, said
    indexes, exp = stored(db)
    assert indexes == [0] and exp["status"] == "failed"
    assert [(a["index"], a["result"]) for a in exp["spec"]["attempts"]] == [(1, "failed")]
    assert "silent for" in exp["spec"]["attempts"][0]["reason"]

    board.signal_all(signal.SIGCONT)
    assert no_leftovers(board) == {}
    again = Command("run", str(spec), "--db", db, "--resume")
    assert again.finish() == 0, again.err
    indexes, exp = stored(db)
    assert indexes == list(range(RUNS)) and exp["status"] == "finished"
    assert sshd.run_dirs(board.workdir) == []      # the hung run's too (its rtscope is gone)


def test_a_probe_that_never_returns_is_killed_and_the_next_run_goes_on(board, tmp_path):
    """The probe of the second run alone stopped (the board answers): it is killed at --run-timeout (5 s), its run
    recorded as failed with the reason, the two runs after it made and stored; exit 1 naming the run; nothing left
    stopped or running on the target."""
    db, spec = str(tmp_path / "s.db"), spec_file(tmp_path, board)
    c = Command("run", str(spec), "--db", db, "--run-timeout", "5")
    c.wait_for("run 1:")
    for pid in wait_for_probe(board):
        os.kill(pid, signal.SIGSTOP)
    started = time.monotonic()
    code = c.finish(timeout=90)
    assert code == 1, c.err
    assert time.monotonic() - started < 5 + 2 * 3 + 20
    said = c.said
    assert "Traceback" not in said
    assert "run 2 (exec/sleep/native" in said and "did not finish within 5 s on target board; stopped (the " \
        "target answers); its deadline: --run-timeout" in said, said
    assert "1 run failed, the others are stored" in said, said
    indexes, exp = stored(db)
    assert indexes == [0, 2, 3] and exp["status"] == "failed"
    assert [(a["index"], a["result"]) for a in exp["spec"]["attempts"]] == [(1, "failed")]
    assert no_leftovers(board) == {}


def test_a_board_that_reboots_mid_run_is_reconnected_and_the_run_made_again(board, tmp_path):
    """The target 'reboots' during the second run's probe (every process killed, sshd back on its port with its
    host key, a new boot id): rtscope reconnects, makes that run once more with the attempt recorded (a note in
    the run, the interrupted attempt in the experiment); every planned run is stored exactly once, exit 0."""
    db, spec = str(tmp_path / "s.db"), spec_file(tmp_path, board)
    first_boot = board.boot_id.read_text().strip()
    c = Command("run", str(spec), "--db", db, "--reconnect-for", "30")
    c.wait_for("run 1:")
    wait_for_probe(board)
    board.reboot()
    code = c.finish(timeout=90)
    said = c.said
    assert code == 0, said
    assert "Traceback" not in said
    assert "run 2 (exec/sleep/native" in said and "interrupted: target board" in said and \
        "the connection was lost" in said and "it is made once more" in said, said
    indexes, exp = stored(db)
    assert indexes == list(range(RUNS)) and exp["status"] == "finished"
    attempts = exp["spec"]["attempts"]
    assert [(a["index"], a["attempt"], a["result"]) for a in attempts] == [(1, 1, "interrupted")]
    assert "it rebooted (a new boot id)" in attempts[0]["reason"]
    redone = next(r for r in Store(db).runs() if r["plan_index"] == 1)
    notes = json.dumps(redone.trailer.get("notes", []))
    assert "attempt 2 of this run" in notes and "rebooted" in notes
    assert board.boot_id.read_text().strip() != first_boot
    assert no_leftovers(board) == {}
    assert sshd.run_dirs(board.workdir) == []      # the interrupted attempt's too


def test_a_hung_board_in_a_fleet_run_fails_alone(board, tmp_path):
    """Two boards in one `rtscope run`; every process of one stopped mid-run: it fails, named with its silence,
    while the other makes and stores all its runs; exit 1; nothing left on the hung one once continued."""
    other = Board(tmp_path / "other", "rtscope-faulty-2").start()
    try:
        spec = tmp_path / "fleet.toml"
        bounds = f"keepalive_s = {KEEPALIVE_S}\nsilent_after_s = {SILENT_AFTER_S}\n"
        spec.write_text(f'name = "fleet"\ntarget = ["board", "other"]\nrepetitions = 3\n'
                        + board.table("board") + bounds + other.table("other") + bounds
                        + '[[workload]]\nname = "exec"\nvariants = "sleep"\n'
                          '[workload.params]\nn = 300\niterations = 3\npause_ms = 0\n')
        db = str(tmp_path / "s.db")
        c = Command("run", str(spec), "--db", db)
        wait_for_probe(board)
        board.signal_all(signal.SIGSTOP)
        code = c.finish(timeout=90)
        said = c.said
        assert code == 1, said
        assert "Traceback" not in said
        assert "target board failed (its remaining runs stop; the other targets go on)" in said, said
        assert "is not answering: silent for" in said and "1 of 2 targets failed (the others finished)" in said
        targets = [r["settings"]["target"] for r in Store(db).runs()]
        assert targets.count("other") == 3 and targets.count("board") == 0, targets
        board.signal_all(signal.SIGCONT)
        assert no_leftovers(board) == {} and no_leftovers(other) == {}
    finally:
        other.stop()


def monitor(tmp_path: Path, board: Board, db: str, fault, wait_for: str | None = None, timeout: float = 60):
    """`rtscope monitor` of the board (3 intervals of 2 s), fault(probe pids) during its second interval, then
    until it ends (after a line with `wait_for`): the monitor (its lines) and its exit status."""
    from test_fleet_monitor import Controller
    targets = tmp_path / "targets.toml"
    targets.write_text(board.table("board") + f"keepalive_s = {KEEPALIVE_S}\nsilent_after_s = {SILENT_AFTER_S}\n")
    env = {**os.environ, "RTSCOPE_TARGETS": str(targets), "PYTHONUNBUFFERED": "1"}
    c = Controller(["--target", "board", "--duration", "6s", "--interval", "2s", "--interval-us", "1000",
                    "--db", db], env)
    try:
        c.wait_for("[1/3]")
        fault(wait_for_probe(board))
        if wait_for:
            c.wait_for(wait_for)
        return c, c.finish(timeout=timeout)
    finally:
        if c.proc.poll() is None:
            c.proc.kill()


def test_a_finite_monitor_gives_a_hung_board_up(board, tmp_path):
    """`rtscope monitor` of one board whose every process is stopped during its second interval: said down with its
    silence, given up on after 2 intervals as a dead board is: exit 3, its monitoring incomplete, /metrics says
    it is not up; nothing of rtscope left on it once continued."""
    from rtscope.serve import boards as lab_boards, metrics
    db = str(tmp_path / "lab.db")
    stopped_at = []
    c, code = monitor(tmp_path, board, db, lambda _: (board.signal_all(signal.SIGSTOP),
                                                      stopped_at.append(time.monotonic())), "board down")
    took = time.monotonic() - stopped_at[0]
    assert code == 3, (c.err, c.lines)
    assert took < 4 * SILENT_AFTER_S + 2 * 2 + 15, took
    down = next(line for line in c.lines if "board down" in line)
    assert "is not answering: silent for" in down, down
    assert "given up" in " ".join(c.err.split()), c.err
    store = Store(db)
    runs = store.runs()
    assert [r["plan_index"] for r in runs] == [0]
    assert store.experiment_row(runs[0]["experiment_id"])["status"] == "incomplete"
    text = metrics.exposition(metrics.read(lab_boards.Lab(Store(db, read_only=True))))[0].decode()
    up = [line for line in text.splitlines() if line.startswith('rtscope_board_up{') and 'target="board"' in line]
    assert up and float(up[0].split()[-1]) == 0, text
    board.signal_all(signal.SIGCONT)
    assert no_leftovers(board) == {}


def test_a_monitor_resumes_after_its_board_reboots_with_the_gap_recorded(board, tmp_path):
    """The board reboots during the second interval: said down, its intervals resume once it answers (the lost one
    made again, with the gap recorded in its run), every interval stored once, exit 0."""
    db = str(tmp_path / "lab.db")
    c, code = monitor(tmp_path, board, db, lambda _: board.reboot(), timeout=90)
    assert code == 0, (c.err, c.lines)
    said = " ".join(c.lines)
    assert "board down" in said and "board answers again: its intervals resume" in said, c.lines
    runs = sorted(Store(db).runs(), key=lambda r: r["plan_index"])
    assert [r["plan_index"] for r in runs] == [0, 1, 2]
    notes = json.dumps(runs[1].trailer.get("notes", []))
    assert "made after its target was down for" in notes and "the connection was lost" in notes, notes
    assert no_leftovers(board) == {}


def test_a_probe_error_in_a_one_target_monitor_is_a_failed_interval(board, tmp_path):
    """The probe of the second interval killed (the board answers): that interval is failed, not the board down;
    the third is made; the monitoring ends failed (exit 1) naming the interval, with the attempt recorded."""
    db = str(tmp_path / "lab.db")
    c, code = monitor(tmp_path, board, db, lambda pids: [os.kill(pid, signal.SIGKILL) for pid in pids],
                      "[2/3] failed, not stored: interval 2 failed (target board answers): rtprobe failed")
    assert code == 1, (c.err, c.lines)
    assert not any("board down" in line for line in c.lines), c.lines
    assert "1 run failed, the others are stored" in " ".join(c.err.split()), c.err
    store = Store(db)
    runs = store.runs()
    assert sorted(r["plan_index"] for r in runs) == [0, 2]
    exp = store.experiment_row(runs[0]["experiment_id"])
    assert exp["status"] == "failed" and [a["index"] for a in exp["spec"]["attempts"]] == [1]
    assert no_leftovers(board) == {}


def test_kill_9_mid_run_leaves_no_run_directory_after_the_next_connection(board, tmp_path):
    """rtscope killed with -9 during a run leaves its run directories on the target (it cannot remove them); the
    next rtscope of this host that connects removes them (their owner is dead), leaving none once it ends."""
    db, spec = str(tmp_path / "s.db"), spec_file(tmp_path, board)
    c = Command("run", str(spec), "--db", db)
    wait_for_probe(board)
    c.proc.kill()
    c.finish()
    assert no_leftovers(board) == {}
    left = sshd.run_dirs(board.workdir, wait=0)
    assert left and all(f"-{c.proc.pid}-" in name for name in left), left
    spec.write_text(spec.read_text().replace(f"repetitions = {RUNS}", "repetitions = 1"))
    assert Command("run", str(spec), "--db", db).finish() == 0
    assert sshd.run_dirs(board.workdir) == []
