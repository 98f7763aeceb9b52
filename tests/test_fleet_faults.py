"""A lab under faults (docs/lab.md, docs/store.md): a board whose every process is killed mid-monitoring (its
monitoring given up on after --give-up-after intervals, the others finish, exit 3, /metrics says it is down and
why; the same for one target watched alone, continued by --resume once it answers), and the store (a real PostgreSQL server) stopped and started again under two controllers sharing three
boards (each board's intervals stored once, never watched by two controllers at once).

Real boards: OpenSSH servers in their own namespaces (tests/sshd.py). Intervals of 2 s keep each test around 15-30 s.
"""

from __future__ import annotations

import os
import time

import pytest

import pgserver
import sshd
from rtscope.store import Store
from test_fleet_monitor import (Controller, boards, by_board, lab_status, never_twice,  # noqa: F401
                                power_off_mid_interval, probe_running, servers, targets_file)   # (boards, servers: the fixtures of the three sshd boards)

WHY = sshd.available()
pytestmark = [pytest.mark.real, pytest.mark.skipif(WHY is not None, reason=WHY or "")]


def test_a_board_killed_mid_monitoring_is_given_up_on(boards, tmp_path):
    """b3's every process killed during its second interval: after 2 intervals down its monitoring is marked
    incomplete with the reason; b1 and b2 finish; the command ends with exit 3 naming b3; /metrics has b3 down,
    incomplete, with the reason; nothing of rtscope is left running on the boards."""
    from rtscope.serve import boards as lab_boards, metrics
    db = str(tmp_path / "lab.db")
    env = {**os.environ, "RTSCOPE_TARGETS": str(targets_file(tmp_path, boards)), "PYTHONUNBUFFERED": "1"}
    c = Controller(["--target", "b1", "--target", "b2", "--target", "b3", "--duration", "6s", "--interval", "2s",
                    "--interval-us", "1000", "--db", db], env)   # several targets (no fleet named): the same
    try:
        c.wait_for("b3 [1/3]")
        power_off_mid_interval(boards["b3"])       # its second interval under way
        c.wait_for("b3 down")
        c.wait_for("b3 incomplete", timeout=30)
        code = c.finish()
    finally:
        if c.proc.poll() is None:
            c.proc.kill()
    assert code == 3, (c.err, c.lines)
    assert "Traceback" not in c.err
    assert "2 of 3 boards' monitorings finished, 1 incomplete (b3)" in c.lines[-1], c.lines
    err = " ".join(c.err.split())
    assert "incomplete monitorings" in err and "b3: down for 2 intervals (4 s), given up" in err, c.err
    runs = by_board(db)
    for name in ("b1", "b2"):
        assert sorted(r["plan_index"] for r in runs[name]) == [0, 1, 2], name
        never_twice(runs[name])
        assert not probe_running(boards[name])
    assert [r["plan_index"] for r in runs["b3"]] == [0]
    status = lab_status(db, env)
    assert status["b3"]["state"] == "incomplete" and "given up" in status["b3"]["reason"], status["b3"]
    assert status["b3"]["experiment_status"] == "incomplete" and status["b3"]["controller"] is None
    assert {status[n]["state"] for n in ("b1", "b2")} == {"finished"}
    text = metrics.exposition(metrics.read(lab_boards.Lab(Store(db, read_only=True))))[0].decode()
    b3 = [line for line in text.splitlines() if 'target="b3"' in line and line.startswith(
        ("rtscope_board_up", "rtscope_board_incomplete", "rtscope_board_state_info"))]
    assert any(line.startswith("rtscope_board_up{") and float(line.split()[-1]) == 0 for line in b3), b3
    assert any(line.startswith("rtscope_board_incomplete{") and float(line.split()[-1]) == 1 for line in b3), b3
    assert any('state="incomplete"' in line and "given up" in line for line in b3), b3


def test_one_target_killed_mid_monitoring_is_given_up_on_then_resumed(boards, tmp_path):
    """`rtscope monitor --target b3` alone: b3's every process killed during its second interval; it is said down
    (asked again), given up on after 2 intervals: exit 3, the last lines name it and why, its monitoring
    `incomplete` in the store, `rtscope lab` and /metrics; no traceback. Once it answers, `--resume` continues
    the monitoring with the interval it lost, and the board is no longer incomplete."""
    from rtscope.serve import boards as lab_boards, metrics
    db = str(tmp_path / "lab.db")
    env = {**os.environ, "RTSCOPE_TARGETS": str(targets_file(tmp_path, boards)), "PYTHONUNBUFFERED": "1"}
    args = ["--target", "b3", "--duration", "6s", "--interval", "2s", "--interval-us", "1000", "--db", db]
    c = Controller(args, env)
    try:
        c.wait_for("[1/3]")
        power_off_mid_interval(boards["b3"])       # its second interval under way
        c.wait_for("b3 down")
        code = c.finish(timeout=60)
    finally:
        if c.proc.poll() is None:
            c.proc.kill()
    assert code == 3, (c.err, c.lines)
    assert "Traceback" not in c.err
    assert "asked again every 2 s, given up after 2 intervals down" in " ".join(c.lines), c.lines
    assert "intervals stored; target b3 given up on" in c.lines[-1] and "1 of 3" in c.lines[-1], c.lines
    err = " ".join(c.err.split())
    assert "incomplete monitorings" in err and "b3: down for 2 intervals (4 s), given up: target b3" in err, c.err
    runs = by_board(db)
    assert [r["plan_index"] for r in runs["b3"]] == [0]
    exp = runs["b3"][0]["experiment_id"]
    assert Store(db).experiment_row(exp)["status"] == "incomplete"
    status = lab_status(db, env)
    assert status["b3"]["state"] == "incomplete" and "given up" in status["b3"]["reason"], status["b3"]
    text = metrics.exposition(metrics.read(lab_boards.Lab(Store(db, read_only=True))))[0].decode()
    b3 = [line for line in text.splitlines() if 'target="b3"' in line]
    assert any(line.startswith("rtscope_board_up{") and float(line.split()[-1]) == 0 for line in b3), b3
    assert any(line.startswith("rtscope_board_incomplete{") and float(line.split()[-1]) == 1 for line in b3), b3

    boards["b3"].start()                           # it answers again: the same monitoring continued
    again = Controller([*args, "--resume"], env)
    assert again.finish(timeout=60) == 0, (again.err, again.lines)
    assert f"monitoring {exp} finished: 3 intervals stored" in again.lines[-1], again.lines
    runs = by_board(db)
    assert sorted(r["plan_index"] for r in runs["b3"]) == [0, 1, 2] and {r["experiment_id"] for r in runs["b3"]} == {exp}
    never_twice(runs["b3"])
    assert lab_status(db, env)["b3"]["state"] != "incomplete"
    assert not probe_running(boards["b3"])


@pytest.mark.skipif(pgserver.available() is not None, reason=pgserver.available() or "")
def test_two_controllers_while_postgresql_restarts(boards, tmp_path):
    """Two controllers share three boards; the server is stopped for 5 s (longer than a lease of 2 s) mid-fleet:
    each controller spools what it measured, stops the boards whose lease it cannot prove, and takes boards again
    when the server is back. Every board's 5 intervals are stored once, no board was watched by two controllers
    at once, both controllers end with exit 0 and no traceback."""
    pg = pgserver.PgServer().start()
    try:
        url = pg.create_database("lab")
        env = {**os.environ, "RTSCOPE_TARGETS": str(targets_file(tmp_path, boards)), "PYTHONUNBUFFERED": "1"}
        common = ["--target", "lab", "--duration", "10s", "--interval", "2s", "--interval-us", "1000", "--db", url]
        a = Controller(common, {**env, "RTSCOPE_STATE_DIR": str(tmp_path / "a")})
        b = Controller(common, {**env, "RTSCOPE_STATE_DIR": str(tmp_path / "b")})
        try:
            # whichever started first may hold every board (a controller takes its share of the live ones)
            deadline = time.monotonic() + 60
            while not any("[1/5]" in line for line in a.lines + b.lines):
                assert time.monotonic() < deadline, (a.lines, b.lines)
                time.sleep(0.05)
            pg.pause()
            time.sleep(5)
            pg.resume()
            codes = [a.finish(), b.finish()]
        finally:
            for c in (a, b):
                if c.proc.poll() is None:
                    c.proc.kill()
        assert codes == [0, 0], (a.err, a.lines, b.err, b.lines)
        said = "\n".join(a.lines + b.lines) + a.err + b.err
        assert "Traceback" not in said
        assert "its lease cannot be proven" in said, said
        runs = by_board(url)
        for name in ("b1", "b2", "b3"):
            assert sorted(r["plan_index"] for r in runs[name]) == list(range(5)), (name, said)
            assert len({r["experiment_id"] for r in runs[name]}) == 1
            never_twice(runs[name])
        status = lab_status(url, env)
        assert {s["state"] for s in status.values()} == {"finished"}, status
        assert not list(tmp_path.glob("*/spool/*/*.spool"))
        for server in boards.values():
            assert not probe_running(server)
    finally:
        pg.stop()
