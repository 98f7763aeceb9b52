"""The BEAM's waits as causes (docs/explain.md, the cause table): `dirty_hop`, a call that waited for a dirty
scheduler, and `port`, a call suspended on a busy port. The harness makes each: `exec dirty` (a dirty CPU call
while hog processes hold every dirty CPU scheduler 20 ms at a time) and `exec port` (64 KiB written to a port
whose program stops reading 20 ms at a time). explain names the wait from the BEAM's trace (a switch-in on
scheduler 0, a dirty one; a switch-out inside port_command), with the kernel side's causes carved out of it,
and says that no setting takes it away."""

from __future__ import annotations

import json

import pytest

import culprit

pytestmark = [pytest.mark.real, pytest.mark.alone]

HOLD_MS = 20   # above this VM's own noise (~4 ms)


@pytest.mark.timing
@pytest.mark.parametrize("variant, kind, name, why", [
    ("dirty", "dirty_hop", "onto dirty", "dirty scheduler"),
    ("port", "port", "port_command", "busy port"),
])
def test_the_wait_is_named_with_its_delay(cli, db, tmp_path, variant, kind, name, why):
    """At least 90 % of the explained calls delayed by more than half a hold name the wait, their largest
    cause, within 20 % of the delay it added; --suggest offers no remedy for it and says why."""
    from rtscope.runtimes import RUNTIMES
    if RUNTIMES["beam"].unavailable():
        pytest.skip(RUNTIMES["beam"].unavailable())
    spec = tmp_path / "wait.toml"
    spec.write_text(f'name = "{variant}"\n[[workload]]\nname = "exec"\nvariants = ["{variant}"]\nruntime = "beam"\n'
                    f"[workload.params]\nn = {HOLD_MS}\niterations = 1500\npause_ms = 1\n"
                    "[workload.settings]\nexplain = 10\n")
    r = cli("run", spec, "--db", db)
    assert r.code == 0, r.err
    run_id, median, samples, big = culprit.late_samples(cli, db, "duration", HOLD_MS * 1e6 / 2)

    detail = [(s["value_ns"], s["causes"][:2], s["self_ns"], s["unexplained_ns"]) for s in samples]
    assert len(big) >= 5, detail   # about 5 holds a second for 1.5 s or more, each delaying one call
    assert sum(culprit.leads(s, median, kind, name) for s in big) >= 0.9 * len(big), detail
    doc = json.loads(cli("explain", run_id, "--db", db, "--suggest", "--json").out)
    assert not [r for r in doc["remedies"] if r["for"]["kind"] == kind], doc["remedies"]
    [wait] = [u for u in doc["unremedied"] if u["for"]["name"] == name]
    assert wait["for"]["kind"] == kind and wait["share"] > 0.5 and why in wait["why"]
    text = cli("explain", run_id, "--db", db, "--suggest").out
    assert f"{kind} {name}" in text and f"no setting takes away {kind} {name}" in text


@pytest.mark.parametrize("variant", ["dirty", "port"])
def test_the_beam_s_waits_are_the_beam_s_only(cli, tmp_path, variant):
    spec = tmp_path / "native.toml"
    spec.write_text(f'name = "x"\n[[workload]]\nname = "exec"\nvariants = ["{variant}"]\nruntime = "native"\n')
    r = cli("check", spec)
    assert r.code == 2 and f"runtime 'native' cannot run exec {variant}; runtimes that can: beam" in r.err, r.err
