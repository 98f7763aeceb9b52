"""Runtime native's interleaved arms (runtimes/native.py): which cells can be arms, the `rtprobe interleave`
argv built for them, and that the probe takes it (a run of a few dozen samples). The real experiment, stored and
compared: tests/test_paired_native.py; the probe's own tests: probes/tests/test_interleave.sh."""

from __future__ import annotations

import subprocess

import pytest

from rtscope.errors import UsageError
from rtscope.experiment import design
from rtscope.experiment.spec.parse import analyse
from rtscope.runtimes import RUNTIMES
from rtscope.runtimes.base import RunRequest, Site
from rtscope.targets import LocalTarget

pytestmark = pytest.mark.fast

NATIVE = RUNTIMES["native"]


def req(variant="sum", workload="exec", **params_and_settings):
    settings = {k: params_and_settings.pop(k) for k in ("rt_priority", "cpu", "mlock") if k in params_and_settings}
    params = {"iterations": 4, "pause_ms": 0, "n": 4000, **params_and_settings}
    return RunRequest(workload, variant, "native", params, settings)


def test_arms_are_exec_variants_of_one_call_per_sample():
    for v in ("sum", "fib", "sleep", "nothing"):
        assert NATIVE.arm_unavailable(req(v)) is None
    for w, v in (("exec", "touch"), ("exec", "lock"), ("timer", "absolute"), ("storage", "write")):
        why = NATIVE.arm_unavailable(req(v, w))
        assert why and f"{w} {v} on runtime native" in why and "exec sum, fib, sleep, nothing" in why
    assert NATIVE.arm_settings == ("rt_priority", "cpu") and NATIVE.arm_params == ("n",)


def test_interleaved_command_is_each_arms_exec_argv():
    reqs = [req(), req(n=4120, rt_priority=10, cpu=1, mlock=True)]
    argv = NATIVE.interleaved_command(reqs, ["/w/arm0.rts", "/w/arm1.rts"], Site(LocalTarget()), 2, [1, 0, 0, 1])
    assert argv[0].endswith("rtprobe")
    assert argv[1:] == [
        "interleave", "--block", "2", "--order", "1,0,0,1",
        "--arm", "exec", "sum", "--iterations", "4", "--pause-ms", "0", "--n", "4000", "--output", "/w/arm0.rts",
        "--arm", "exec", "sum", "--iterations", "4", "--pause-ms", "0", "--n", "4120",
        "--priority", "10", "--cpu", "1", "--mlock", "--output", "/w/arm1.rts"]
    # the same arm as one run of its own: the argv of `rtprobe exec`
    one = NATIVE.command(reqs[1], "/w/arm1.rts", Site(LocalTarget()))
    assert one[1:] == argv[argv.index("/w/arm0.rts") + 2:]


def test_the_probe_takes_the_argv(tmp_path):
    """The argv runs: each arm's file as rtprobe exec writes it, with the pairing of its blocks."""
    from rtscope import samplefile
    reqs = [req(n=1000), req("fib", n=8)]
    outs = [str(tmp_path / "a0.rts"), str(tmp_path / "a1.rts")]
    argv = NATIVE.interleaved_command(reqs, outs, Site(LocalTarget()), 2, [0, 1, 1, 0])
    subprocess.run(argv, check=True, capture_output=True, timeout=30)
    for i, (r, out) in enumerate(zip(reqs, outs)):
        sf = samplefile.read(out)
        assert (sf.header["variant"], sf.header["params"]["n"], sf.n) == (r.variant, r.params["n"], 4)
        assert sf.header["pairing"] == {"arm": i, "arms": 2, "block_samples": 2, "blocks": [[0, 3], [1, 2]][i]}


SPEC = """name = "native-arms"
design = "{design}"
[[workload]]
name = "exec"
variants = ["sum", "fib"]
runtime = "native"
[workload.params]
iterations = 100
pause_ms = 0
n = [10, 20]
[workload.settings]
rt_priority = [10, 20]
mlock = [true, false]
[[workload]]
name = "exec"
variants = ["touch", "sum"]
runtime = "native"
[workload.params]
iterations = 100
"""


def test_auto_groups_cells_that_differ_in_variant_n_and_priority():
    spec = analyse(SPEC.format(design="auto"), "native-arms.toml")
    lay = design.layout(spec)
    assert len(lay.groups) == 2                   # mlock is the process's: one group per value
    for g in lay.groups:
        assert len(g.cells) == 8 and g.block == 5
        assert len({c.request.settings["mlock"] for c in g.cells}) == 1
        assert {(c.request.variant, c.request.params["n"], c.request.settings["rt_priority"])
                for c in g.cells} == {(v, n, p) for v in ("sum", "fib") for n in (10, 20) for p in (10, 20)}
    assert sorted(c.request.variant for c in lay.alone) == ["sum", "touch"]
    assert any("exec touch on runtime native is not one timed call per sample" in n for n in lay.notes())
    assert any("no other configuration of its block can share its process" in n for n in lay.notes())
    with pytest.raises(UsageError, match="exec touch on runtime native"):
        design.layout(analyse(SPEC.format(design="interleaved"), "native-arms.toml"))
