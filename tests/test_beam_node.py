"""BEAM node targets over Erlang distribution: a real second node (tests/beamnode.py) that rtscope did not
start, in its own mount namespace with this checkout hidden, so the harness must come over the connection.

Each test checks the board afterwards: alive, no RtScope module (current or old) and no process of rtscope's.
The node URLs and tables refused before any node is reached: tests/test_beam_node_units.py.
"""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

import beamnode
import sshd
from proc_helpers import default_signals
from rtscope.store import Store

WHY = beamnode.available()
pytestmark = [pytest.mark.real, pytest.mark.skipif(WHY is not None, reason=WHY or "")]
CLEAN = "modules=0 processes=0 old=0"


@pytest.fixture(scope="module")
def board(tmp_path_factory):
    b = beamnode.Board(tmp_path_factory.mktemp("board"), erl_flags="+sbwt none",
                       fake_cpufreq="powersave").start()
    yield b
    b.stop()


@pytest.fixture(autouse=True)
def forget_targets(clean_targets):
    yield


def relays() -> list[str]:
    out = subprocess.run(["pgrep", "-af", "RtScope.Relay"], capture_output=True, text=True).stdout
    return [line for line in out.splitlines() if "pgrep" not in line]


def spec_file(tmp_path: Path, table: str, workload: str, settings: str = "", target: str = "board") -> Path:
    spec = tmp_path / "node.toml"
    spec.write_text(f'name = "node"\ntarget = "{target}"\n{table}\n{workload}\n'
                    + (f"[workload.settings]\n{settings}\n" if settings else ""))
    return spec


EXEC_SUM = '[[workload]]\nname = "exec"\nvariants = "sum"\nruntime = "beam"\n' \
           '[workload.params]\niterations = 300\npause_ms = 0\n'


def run_json(cli, db: str) -> dict:
    runs = json.loads(cli("runs", "--json", "--db", db).out)
    assert len(runs) == 1, runs
    shown = json.loads(cli("show", str(runs[0]["id"]), "--json", "--db", db).out)
    return {**shown["run"], **shown}


def test_a_run_executes_in_the_node_and_leaves_nothing_there(board, cli, tmp_path):
    db = str(tmp_path / "s.db")
    spec = spec_file(tmp_path, board.table("board"), EXEC_SUM, 'vm_flags = "+sbwt none"')
    r = cli("run", spec, "--db", db)
    assert r.code == 0, r.out + r.err
    shown = run_json(cli, db)
    assert shown["stats"]["n"] == 300 and shown["stats"]["min"] > 0
    # The node's VM, not one rtscope started: its flags in force, its name in the machine record.
    assert shown["settings"]["vm_flags"] == "+sbwt none"
    env = shown["environment"]
    assert env["target_kind"] == "erlang" and env["node"] == board.node and env["node_access"] == "erlang distribution"
    assert env["hostname"] == beamnode.HOST and env["kernel_release"] and env["python_version"] is None
    assert board.alive() and board.leftovers() == CLEAN
    assert relays() == []


def test_explain_on_a_node_is_the_beam_side_only(board, cli, tmp_path):
    """No shell and no tracefs on a node target: explain keeps the BEAM's causes (GCs, times scheduled out),
    no kernel trace, no marks; pinning the node's VM is refused."""
    db = str(tmp_path / "s.db")
    spec = spec_file(tmp_path, board.table("board"), EXEC_SUM.replace("300", "50"), "explain = 3")
    r = cli("run", spec, "--db", db)
    assert r.code == 0, r.out + r.err
    [run] = Store(db).runs()
    assert run.trailer["explain"] == {"samples": 3, "per_thread": 3, "source": "erlang:trace"}
    samples = json.loads(cli("explain", run.id, "--db", db, "--json").out)["samples"]
    assert len(samples) == 3 and all(c["kind"] in ("gc", "scheduled_out") for s in samples for c in s["causes"])
    assert all(s["unexplained_ns"] == 0 and s["scheduler"] >= 1 for s in samples)
    assert board.leftovers() == CLEAN
    r = cli("run", spec_file(tmp_path, board.table("board"), EXEC_SUM, "cpu = 0"), "--db", db)
    assert r.code == 2 and "setting cpu applies to a VM rtscope starts; target board is a running BEAM node" in r.err


def test_rtscope_targets_checks_a_node(board, cli, tmp_path):
    spec = spec_file(tmp_path, board.table("board"), EXEC_SUM)
    r = cli("targets", "--spec", spec, "--json")
    [row] = [t for t in json.loads(r.out) if t["name"] == "board"]
    assert row["reachable"] and row["hostname"] == beamnode.HOST and row["runtimes"]["beam"] == "ok"
    assert row["runtimes"]["native"] == "target board (erlang) runs runtime beam only, not native"
    assert board.leftovers() == CLEAN


def test_the_cookie_is_never_stored_nor_shown(board, cli, tmp_path):
    db = str(tmp_path / "s.db")
    table = board.table("board").replace(f'cookie_file = "{board.cookie_file}"', f'cookie = "{board.cookie}"')
    spec = spec_file(tmp_path, table, EXEC_SUM.replace("300", "20"))
    r = cli("run", spec, "--db", db)
    assert r.code == 0, r.out + r.err
    assert board.cookie.encode() not in Path(db).read_bytes()
    listed = cli("targets", "--spec", spec, "--no-check", "--json")
    assert board.cookie not in listed.out + listed.err and "(secret, not shown)" in listed.out
    assert board.leftovers() == CLEAN


def test_governor_is_written_through_the_node_and_restored(board, cli, tmp_path):
    db = str(tmp_path / "s.db")
    spec = spec_file(tmp_path, board.table("board"), EXEC_SUM.replace("300", "50"), 'governor = "performance"')
    r = cli("run", spec, "--db", db)
    assert r.code == 0, r.out + r.err
    shown = run_json(cli, db)
    assert shown["settings"]["governor"] == "performance"
    assert any("scaling_governor set to performance on 1 CPU(s) on target board (was powersave)" in n
               for n in shown["trailer"]["notes"]), shown["trailer"]
    # The fake tree exists only in the board's namespace: the write went through the node. Undone there.
    assert list(board.sysfs.iterdir()) == []
    gov = f"{board.sysfs}/sys/devices/system/cpu/cpu0/cpufreq/scaling_governor"
    assert board.inspect(f'IO.write(File.read!("{gov}"))') == "powersave\n"
    assert board.leftovers() == CLEAN


def test_callback_threads_on_the_node(board, cli, tmp_path):
    db = str(tmp_path / "s.db")
    spec = spec_file(tmp_path, board.table("board"), '[[workload]]\nname = "tasks"\nvariants = "switch"\n'
                     'runtime = "beam"\n[workload.params]\niterations = 2000\n', 'model = "callback_thread"')
    r = cli("run", spec, "--db", db)
    assert r.code == 0, r.out + r.err
    shown = run_json(cli, db)
    assert shown["settings"]["model"] == "callback_thread" and shown["environment"]["node"] == board.node
    assert shown["stats"]["n"] > 0
    assert board.leftovers() == CLEAN


@pytest.mark.parametrize("variant", ["spawn_each", "spawn_recursive"])
def test_spawning_processes_on_the_node(board, cli, tmp_path, variant):
    db = str(tmp_path / "s.db")
    spec = spec_file(tmp_path, board.table("board"), f'[[workload]]\nname = "exec"\nvariants = "{variant}"\n'
                     'runtime = "beam"\n[workload.params]\nn = 500\niterations = 40\npause_ms = 0\n')
    r = cli("run", spec, "--db", db)
    assert r.code == 0, r.out + r.err
    shown = run_json(cli, db)
    assert shown["variant"] == variant and shown["params"]["n"] == 500 and shown["stats"]["n"] == 40
    # 500 processes cannot start in less than a nanosecond each
    assert shown["stats"]["min"] > 500 and shown["environment"]["node"] == board.node
    assert board.leftovers() == CLEAN


def test_connecting_to_another_node_from_the_node(board, cli, tmp_path):
    db = str(tmp_path / "s.db")
    spec = spec_file(tmp_path, board.table("board"), '[[workload]]\nname = "exec"\nvariants = "nodeconnect"\n'
                     'runtime = "beam"\n[workload.params]\niterations = 30\npause_ms = 0\n')
    r = cli("run", spec, "--db", db)
    assert r.code == 0, r.out + r.err
    shown = run_json(cli, db)
    assert shown["variant"] == "nodeconnect" and shown["stats"]["n"] == 30
    assert shown["stats"]["min"] > 10_000  # a handshake over TCP takes more than 10 µs
    assert board.leftovers() == CLEAN
    assert [p for p in board.programs() if "rtscope_peer" in p] == []  # the peer node was stopped


# ---- errors: one clear message, nothing stored, the node unharmed ------------------------------------------

def _error(cli, tmp_path, spec: Path) -> str:
    db = str(tmp_path / "s.db")
    r = cli("run", spec, "--db", db)
    assert r.code != 0, r.out + r.err
    assert not Path(db).exists() or Store(db).runs() == []
    return " ".join(r.err.split())


def test_wrong_cookie(board, cli, tmp_path):
    wrong = tmp_path / "wrong.cookie"
    wrong.write_text("not-the-cookie\n")
    spec = spec_file(tmp_path, board.table("board").replace(str(board.cookie_file), str(wrong)), EXEC_SUM)
    err = _error(cli, tmp_path, spec)
    assert f"node {board.node} refused the connection: wrong cookie" in err, err
    assert board.cookie not in err and "not-the-cookie" not in err
    assert board.alive() and board.leftovers() == CLEAN and relays() == []


def test_no_such_node(board, cli, tmp_path):
    table = board.table("board").replace(board.name, "nosuch")
    err = _error(cli, tmp_path, spec_file(tmp_path, table, EXEC_SUM))
    assert f"no node named nosuch on {beamnode.HOST}; nodes running there:" in err and board.name in err, err
    assert relays() == []


def test_vm_flags_cannot_change_on_a_running_node(board, cli, tmp_path):
    err = _error(cli, tmp_path, spec_file(tmp_path, board.table("board"), EXEC_SUM, 'vm_flags = "+sbwt very_long"'))
    assert "a running node's VM flags cannot change" in err and "+sbwt very_long" in err, err
    assert board.leftovers() == CLEAN


def test_a_runtime_that_needs_a_shell(board, cli, tmp_path):
    err = _error(cli, tmp_path, spec_file(tmp_path, board.table("board"), EXEC_SUM.replace('"beam"', '"native"')))
    assert "target board (erlang) runs runtime beam only, not native" in err, err
    assert board.leftovers() == CLEAN


@pytest.mark.parametrize("way", ["erlang", "nerves_ssh"])
def test_gpio_on_a_node_runs_the_port_program_there(board, nerves, cli, tmp_path, way):
    """This machine has no GPIO: the port program, sent into the session's directory on the node, says so from
    there; the directory goes with the session."""
    b, table = (board, board.table("board")) if way == "erlang" else (nerves, nerves.nerves_table("board"))
    spec = spec_file(tmp_path, table, '[[workload]]\nname = "gpio"\nvariants = "write"\nruntime = "beam"\n')
    err = _error(cli, tmp_path, spec)
    assert "no GPIO chip /dev/gpiochip0; chips here: none" in err, err
    assert b.leftovers() == CLEAN and b.inspect(RUN_DIRS) == "[]"


def test_a_workload_raising_on_the_node(tmp_path, cli):
    # The node caps process heaps: a measuring process asked for a larger minimum heap cannot be spawned.
    b = beamnode.Board(tmp_path / "capped", erl_flags="+hmax 20000000").start()
    try:
        spec = spec_file(tmp_path, b.table("board"), EXEC_SUM, "min_heap_size = 40000000")
        err = _error(cli, tmp_path, spec)
        assert f"on node {b.node}:" in err and "spawn_opt" in err, err
        assert b.alive() and b.leftovers() == CLEAN
    finally:
        b.stop()


def start_run(spec: Path, db: str) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-m", "rtscope", "run", str(spec), "--db", db], text=True,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, preexec_fn=default_signals)


RUN_DIRS = 'IO.write(inspect(File.ls!("/tmp/rtscope")))'
LONG_SLEEP = '[[workload]]\nname = "exec"\nvariants = "sleep"\nruntime = "beam"\n' \
             '[workload.params]\nn = 10\niterations = 3000\npause_ms = 0\n'


def wait_for_the_harness(b: beamnode.Board, proc: subprocess.Popen) -> None:
    deadline = time.monotonic() + 60
    while not b.leftovers().startswith("modules=") or b.leftovers().startswith("modules=0 "):
        assert time.monotonic() < deadline and proc.poll() is None, proc.communicate()
        time.sleep(0.2)
    time.sleep(1)  # the run is under way


def test_the_node_dies_mid_run(tmp_path):
    b = beamnode.Board(tmp_path / "dying").start()
    db = str(tmp_path / "s.db")
    proc = start_run(spec_file(tmp_path, b.table("board"), LONG_SLEEP), db)
    try:
        wait_for_the_harness(b, proc)
        b.kill()
        out, err = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
        b.stop()
    assert proc.returncode != 0
    assert f"node {b.node} is down or the connection to it was lost" in " ".join(err.split()), err
    assert Store(db).runs() == [] and relays() == []


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGKILL])
def test_stopping_rtscope_mid_run_leaves_the_node_clean(board, tmp_path, sig):
    db = str(tmp_path / "s.db")
    proc = start_run(spec_file(tmp_path, board.table("board"), LONG_SLEEP), db)
    try:
        wait_for_the_harness(board, proc)
        proc.send_signal(sig)
        proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode != 0
    # Killed outright, rtscope cannot unload: the relay sees its stdin close, or the node's guard sees the
    # connection go; either way the modules and the run's processes are gone.
    deadline = time.monotonic() + 30
    while board.leftovers() != CLEAN or relays():
        assert time.monotonic() < deadline, (board.leftovers(), relays())
        time.sleep(0.5)
    assert board.alive() and Store(db).runs() == []
    assert board.inspect(RUN_DIRS) == "[]"  # the guard removed the session's run directories too


# ---- the nerves_ssh way: an SSH daemon in the node (Elixir exec channel, SFTP) -------------------------------

@pytest.fixture(scope="module")
def nerves(tmp_path_factory):
    b = beamnode.Board(tmp_path_factory.mktemp("nerves"), ssh_port=sshd.free_port()).start()
    yield b
    b.stop()


NOTHING_IN_TMP = 'IO.write(inspect(Path.wildcard("/tmp/rtscope-code-*") ++ Path.wildcard("/tmp/rtscope/*")))'


def test_a_run_through_nerves_ssh(nerves, cli, tmp_path):
    db = str(tmp_path / "s.db")
    spec = spec_file(tmp_path, nerves.nerves_table("device"), EXEC_SUM, target="device")
    r = cli("run", spec, "--db", db)
    assert r.code == 0, r.out + r.err
    shown = run_json(cli, db)
    assert shown["stats"]["n"] == 300 and shown["stats"]["min"] > 0
    env = shown["environment"]
    assert env["target_kind"] == "nerves_ssh" and env["node_access"] == "nerves_ssh"
    assert env["hostname"] == beamnode.HOST and env["kernel_release"]
    # The object code went to /tmp only while loading; the run directory is gone too.
    assert nerves.leftovers() == CLEAN and nerves.inspect(NOTHING_IN_TMP) == "[]"


def test_nerves_ssh_verifies_the_host_key(nerves, cli, tmp_path):
    table = nerves.nerves_table("device").replace(str(nerves.base / "ssh" / "known_hosts"), str(tmp_path / "kh"))
    (tmp_path / "kh").write_text("")
    err = _error(cli, tmp_path, spec_file(tmp_path, table, EXEC_SUM, target="device"))
    assert "unknown host key (ssh-ed25519 SHA256:" in err and "never accepted blindly" in err, err
    assert nerves.leftovers() == CLEAN


def test_killing_rtscope_mid_run_on_nerves_ssh(nerves, tmp_path):
    db = str(tmp_path / "s.db")
    proc = start_run(spec_file(tmp_path, nerves.nerves_table("device"), LONG_SLEEP, target="device"), db)
    try:
        wait_for_the_harness(nerves, proc)
        proc.kill()
        proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
    deadline = time.monotonic() + 30
    while nerves.leftovers() != CLEAN:
        assert time.monotonic() < deadline, nerves.leftovers()
        time.sleep(0.5)
    assert nerves.alive() and Store(db).runs() == [] and nerves.inspect(RUN_DIRS) == "[]"
