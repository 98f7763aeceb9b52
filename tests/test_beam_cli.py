"""Runtime beam end to end through the CLI, on the real Erlang VM: tiny runs stored with their settings, a VM
that dies stores nothing. The refusals before any VM starts: tests/test_beam_cli_units.py."""

import pytest

import rtscope.runtimes.beam  # noqa: F401  (registers runtime beam; kept for when runtimes/__init__ omits it)
from rtscope.runtimes import RUNTIMES
from rtscope.store import Store
from test_beam_cli_units import run_spec, spec

pytestmark = pytest.mark.real


def need_beam():
    why = RUNTIMES["beam"].unavailable()
    if why:
        pytest.skip(why)


def stored(db):
    return Store(db).runs()


def test_exec_run_is_stored_with_its_settings(cli, db, tmp_path):
    need_beam()
    r = run_spec(cli, db, tmp_path, spec(("exec", "nothing", {"iterations": 50, "pause_ms": 0},
                                          {"priority": "high", "fullsweep_after": 0, "vm_flags": "+sbwt  none"})))
    assert r.code == 0, r.err + r.out
    [run] = stored(db)
    assert (run["workload"], run["variant"], run["runtime"], run["n_samples"]) == ("exec", "nothing", "beam", 50)
    s = run["settings"]
    assert (s["priority"], s["fullsweep_after"], s["vm_flags"]) == ("high", 0, "+sbwt none")
    # what the measuring process itself reported
    assert run["header"]["process"]["priority"] == "high"
    assert run["header"]["process"]["fullsweep_after"] == 0
    assert [c["name"] for c in run["columns"]] == ["duration", "heap_size", "minor_gcs"]
    data = Store(db).samples(run.id)
    assert len(data["duration"]) == 50 and (data["duration"] > 0).all()
    assert (data["heap_size"] >= 233).all()


def test_timer_and_msgq_runs(cli, db, tmp_path):
    need_beam()
    text = spec(("timer", "send_after", {"interval_us": 2000, "loops": 10}, {"priority": "high"}),
                ("msgq", "pmap", {"elements": 200, "iterations": 2}, {"message_queue_data": "off_heap"}),
                ("msgq", "fan_in", {"senders": 3, "messages": 4, "iterations": 2, "work": 0}, {}))
    r = run_spec(cli, db, tmp_path, text)
    assert r.code == 0, r.err + r.out
    runs = {r["variant"]: r for r in stored(db)}
    assert runs["send_after"]["n_samples"] == 10
    assert runs["send_after"]["params"]["interval_ms"] == 2
    assert "missed_periods" in runs["send_after"]["trailer"]["counters"]
    assert runs["pmap"]["n_samples"] == 2
    assert runs["pmap"]["settings"]["message_queue_data"] == "off_heap"
    assert runs["fan_in"]["n_samples"] == 24
    assert runs["fan_in"]["trailer"]["counters"]["messages"] == 24


def test_a_vm_that_dies_stores_nothing(cli, db, tmp_path):
    need_beam()
    # A heap of 2^44 words is more than any machine has: the VM aborts while spawning the measuring process.
    r = run_spec(cli, db, tmp_path, spec(("exec", "nothing", {"iterations": 5, "pause_ms": 0},
                                          {"min_heap_size": 1 << 44})))
    assert r.code == 1, r.err + r.out
    assert "Cannot allocate" in r.err, r.err
    assert stored(db) == []
