"""Runtime beam through the CLI, without the VM: bad values refused before any VM starts, VM flags normalised as
the harness does. Tiny runs stored and a VM that dies: tests/test_beam_cli.py."""

import json

import pytest

import rtscope.runtimes.beam  # noqa: F401  (registers runtime beam; kept for when runtimes/__init__ omits it)
from rtscope.targets import LocalTarget
from rtscope.settings.vm_flags import parse_vm_flags

pytestmark = pytest.mark.fast


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


def test_vm_flags_are_normalised_like_the_harness_does():
    assert parse_vm_flags(" +sbwt none   +hmqd off_heap ") == "+sbwt none +hmqd off_heap"
    assert parse_vm_flags("") == ""
    assert parse_vm_flags("+S 2:2") == "+S 2:2"
    with pytest.raises(ValueError, match="VM flag \\+sbt given twice"):
        parse_vm_flags("+sbt db +sbt u")
    with pytest.raises(ValueError, match="invalid value '0' for VM flag \\+S"):
        parse_vm_flags("+S 0")
