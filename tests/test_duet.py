"""Design duet for real: configurations that cannot share a process (VM flags, mlock) measured side by side, a
process each on a CPU of its own, released together at a start gate (experiment/design.py, duet.py; the gates:
BEAM RtScope.DuetGate, rtprobe's rtp_run_open), stored as runs and compared pair by pair. The statistics and
the layout: tests/test_duet_units.py."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time

import pytest

from rtscope.experiment.duet import duet_command
from rtscope.paths import rtprobe
from rtscope.store import Store
from spec_texts import duet_spec

pytestmark = pytest.mark.real


# --- the command and the gate ----------------------------------------------------------------------------

def test_an_arm_that_fails_releases_the_other_from_the_gate(tmp_path):
    """One arm fails before its start: the other, waiting at the gate, gives up at once (not after the gate's
    120 s), and the duet fails with both arms' words."""
    probe = str(rtprobe())
    argv = duet_command([[probe, "exec", "sum", "--iterations", "5", "--output", str(tmp_path / "a.rts")],
                         ["sh", "-c", "sleep 0.3; echo broken >&2; exit 3"]], [0, 1], str(tmp_path / "gate"))
    began = time.monotonic()
    proc = subprocess.run(argv, capture_output=True, text=True, timeout=60)
    assert proc.returncode != 0 and "broken" in proc.stderr
    assert "duet: another arm failed before the start" in proc.stderr
    assert time.monotonic() - began < 30 and not (tmp_path / "a.rts").exists()


def test_arms_pass_the_gate_together_on_their_cpus(tmp_path):
    probe = str(rtprobe())
    outs = [tmp_path / "a.rts", tmp_path / "b.rts"]
    argv = duet_command([[probe, "exec", "sum", "--iterations", "20", "--output", str(o)] for o in outs],
                        [1, 0], str(tmp_path / "gate"))
    assert "taskset -c 1 env RTSCOPE_DUET_GATE=" in argv[2] and "RTSCOPE_DUET_ARM=1" in argv[2]
    proc = subprocess.run(argv, capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    assert all(o.exists() for o in outs)
    assert sorted(p.name for p in tmp_path.glob("gate.*")) == ["gate.0", "gate.1"]


# --- real duets from the CLI -----------------------------------------------------------------------------

def test_native_duet_stored_as_runs_that_take_turns_over_the_cpus(cli, db, tmp_path):
    (tmp_path / "d.toml").write_text(duet_spec("mlock = [false, true]", runtime="native", iterations=300))
    r = cli("run", tmp_path / "d.toml", "--db", db)
    assert r.code == 0, r.err
    assert "design duet: 2 configurations side by side (a duet), a CPU each" in r.out + r.err
    runs = Store(db).runs()
    assert len(runs) == 4
    by_pair: dict[str, list] = {}
    for run in runs:
        p = run.header["pairing"]
        assert p["design"] == "duet" and p["arms"] == 2 and p["block_samples"] == 1 and run.n_samples == 300
        by_pair.setdefault(p["id"], []).append(run)
    assert len(by_pair) == 2
    cpus_of_arm0 = set()
    for arms in by_pair.values():
        arms.sort(key=lambda run: run.header["pairing"]["arm"])
        assert {run.header["pairing"]["cpu"] for run in arms} == {0, 1}         # a CPU each
        cpus_of_arm0.add(arms[0].header["pairing"]["cpu"])
    assert cpus_of_arm0 == {0, 1}                                                # the arms took turns
    shown = cli("show", str(runs[0].id), "--db", db)
    assert "design:   duet, arm" in shown.out and "side by side with the other arms, on CPU" in shown.out
    cmp_ = cli("compare", "--experiment", "1", "--baseline", "mlock=false", "--json", "--db", db)
    assert cmp_.code == 0, cmp_.err
    [c] = json.loads(cmp_.out)["comparisons"]
    assert c["design"] == "duet"
    mean = next(row for row in c["rows"] if row["metric"] == "mean")
    assert mean["paired"]["design"] == "duet" and mean["paired"]["paired_runs"] == 2
    assert mean["paired"]["window_pairs"] == 2 * 10 and mean["p"] is not None


def test_two_erlang_vms_with_different_vm_flags_side_by_side(cli, db, tmp_path):
    (tmp_path / "d.toml").write_text(duet_spec('vm_flags = ["+sbwt none", "+sbwt very_long"]', iterations=100,
                                               pause_ms=1))
    r = cli("run", tmp_path / "d.toml", "--db", db)
    assert r.code == 0, r.err
    runs = Store(db).runs()
    assert len(runs) == 4 and {run.settings["vm_flags"] for run in runs} == {"+sbwt none", "+sbwt very_long"}
    assert {run.header["pairing"]["design"] for run in runs} == {"duet"}
    assert {run.header["settings"]["schedulers_online"] for run in runs} == {1}   # each VM on its own CPU
    cmp_ = cli("compare", "--experiment", "1", "--baseline", "vm_flags=+sbwt none", "--db", db)
    assert cmp_.code == 0, cmp_.err
    assert "design duet: paired t-test on window-pair differences" in cmp_.out
    assert "in 2 duet runs, the arms side by side" in cmp_.out


def test_until_decided_makes_each_round_a_duet_whose_arms_take_turns(cli, db, tmp_path):
    """--until-decided adds one repetition a round: each round is one duet, the arms on the other CPUs than in
    the round before."""
    text = duet_spec("mlock = [false, true]", runtime="native", iterations=100).replace(
        "repetitions = 2", "repetitions = 2\nbaseline = { mlock = false }")
    (tmp_path / "d.toml").write_text(text)
    r = cli("run", tmp_path / "d.toml", "--db", db, "--until-decided", "--budget", "8s")
    assert r.code == 0, r.err
    runs = Store(db).runs()
    assert len(runs) >= 4 and {run.header["pairing"]["design"] for run in runs} == {"duet"}
    first_arm = [run for run in runs if run.header["pairing"]["arm"] == 0]
    cpus = [run.header["pairing"]["cpu"] for run in sorted(first_arm, key=lambda run: run.id)]
    assert all(a != b for a, b in zip(cpus, cpus[1:])), cpus        # round after round, the other CPU


def gated_processes(gate_dir: str) -> list[int]:
    """The processes whose environment names a duet gate under gate_dir (the arms of a duet run there)."""
    out = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/environ", "rb") as f:
                    env = f.read()
                with open(f"/proc/{entry}/stat") as f:
                    state = f.read().rsplit(")", 1)[1].split()[0]
            except OSError:
                continue
            if b"RTSCOPE_DUET_GATE=" + gate_dir.encode() in env and state != "Z":
                out.append(int(entry))
    return out


def test_a_stopped_duet_leaves_no_arm_behind(tmp_path):
    """SIGINT while both arms measure: rtscope exits 130, the experiment is interrupted with nothing stored, and
    no arm's process is left."""
    spec = tmp_path / "d.toml"
    spec.write_text(duet_spec("mlock = [false, true]", runtime="native", iterations=100_000, pause_ms=1))
    db = str(tmp_path / "s.db")
    cmd = [sys.executable, "-m", "rtscope", "run", str(spec), "--db", db]
    env = {**os.environ, "TMPDIR": str(tmp_path)}           # the run directories, so the gates, under tmp_path
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline and len(gated_processes(str(tmp_path))) < 2:
        time.sleep(0.05)
    assert len(gated_processes(str(tmp_path))) >= 2           # both arms started
    proc.send_signal(signal.SIGINT)
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 130, err
    assert "resume with" in err and not Store(db).runs()
    deadline = time.monotonic() + 10
    while gated_processes(str(tmp_path)) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not gated_processes(str(tmp_path))
