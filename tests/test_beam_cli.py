"""Runtime beam end to end through the CLI: tiny runs stored, bad values refused before any VM starts,
a VM that dies stores nothing."""

import json

import pytest

import rtscope.runtimes.beam  # noqa: F401  (registers runtime beam; kept for when runtimes/__init__ omits it)
from rtscope.targets import LocalTarget
from rtscope.runtimes import RUNTIMES
from rtscope.settings.vm_flags import parse_vm_flags
from rtscope.store import Store

pytestmark = pytest.mark.real


def toml_value(v) -> str:
    return json.dumps(v)


def spec(*blocks: tuple[str, str, dict, dict]) -> str:
    """blocks: (workload, variant, params, settings) -> spec text, runtime beam."""
    out = ['name = "beam-test"']
    for workload, variant, params, settings in blocks:
        out += ["[[workload]]", f'name = "{workload}"', f'variants = "{variant}"', 'runtime = "beam"']
        if params:
            out += ["[workload.params]", *(f"{k} = {toml_value(v)}" for k, v in params.items())]
        if settings:
            out += ["[workload.settings]", *(f"{k} = {toml_value(v)}" for k, v in settings.items())]
    return "\n".join(out) + "\n"


def need_beam():
    why = RUNTIMES["beam"].unavailable()
    if why:
        pytest.skip(why)


@pytest.fixture
def no_vm(monkeypatch):
    """Fail the test if any probe process (a VM) is started."""
    started = []

    def run(self, argv, **kw):
        started.append(argv)
        raise AssertionError(f"a VM was started: {argv}")

    monkeypatch.setattr(LocalTarget, "run", run)
    return started


def run_spec(cli, db, tmp_path, text):
    path = tmp_path / "beam.toml"
    path.write_text(text)
    return cli("run", path, "--db", db)


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


@pytest.mark.parametrize("workload, variant, params, settings, message", [
    ("exec", "sum", {}, {"priority": "urgent"}, "valid: one of low, normal, high, max"),
    ("exec", "sum", {}, {"min_heap_size": -1}, "must be >= 0"),
    ("exec", "sum", {}, {"message_queue_data": "heap"}, "on_heap or off_heap"),
    ("exec", "sum", {}, {"vm_flags": "+zzz 1"}, "unknown VM flag '+zzz'; valid flags: +sbwt"),
    ("exec", "sum", {}, {"vm_flags": "+sbwt sometimes"}, "invalid value 'sometimes' for VM flag +sbwt"),
    ("exec", "sum", {}, {"vm_flags": "+sbwt"}, "VM flag +sbwt needs a value"),
    ("exec", "sum", {}, {"mlock": True}, "setting 'mlock' is not understood by runtime beam"),
    ("exec", "sum", {}, {"rt_priority": 100}, "an integer 1..99"),
    ("exec", "sum", {"pause_ms": 0.5}, {}, "runtime beam takes whole numbers for pause_ms"),
    ("timer", "send_after", {"interval_us": 1500}, {}, "interval_us in whole ms"),
    ("timer", "send_after", {"threads": "0"}, {}, "parameter threads is not supported by runtime beam"),
    ("msgq", "pmap", {"senders": 3}, {}, "parameter senders does not apply to msgq pmap"),
])
def test_bad_values_are_refused_before_any_vm_starts(cli, db, tmp_path, no_vm, workload, variant, params,
                                                      settings, message):
    r = run_spec(cli, db, tmp_path, spec((workload, variant, params, settings)))
    assert r.code == 2, r.err + r.out
    assert message in " ".join(r.err.split()), r.err
    assert no_vm == []


def test_a_vm_that_dies_stores_nothing(cli, db, tmp_path):
    need_beam()
    # A heap of 2^44 words is more than any machine has: the VM aborts while spawning the measuring process.
    r = run_spec(cli, db, tmp_path, spec(("exec", "nothing", {"iterations": 5, "pause_ms": 0},
                                          {"min_heap_size": 1 << 44})))
    assert r.code == 1, r.err + r.out
    assert "Cannot allocate" in r.err, r.err
    assert stored(db) == []


def test_vm_flags_are_normalised_like_the_harness_does():
    assert parse_vm_flags(" +sbwt none   +hmqd off_heap ") == "+sbwt none +hmqd off_heap"
    assert parse_vm_flags("") == ""
    assert parse_vm_flags("+S 2:2") == "+S 2:2"
    with pytest.raises(ValueError, match="VM flag \\+sbt given twice"):
        parse_vm_flags("+sbt db +sbt u")
    with pytest.raises(ValueError, match="invalid value '0' for VM flag \\+S"):
        parse_vm_flags("+S 0")
