"""What ran is what is shown, on the real Erlang VM: the BEAM clamps spawn options study 1 asks for
(fullsweep_after 131071 runs as 65535, min_heap_size 34 as 233), the harness records what the process got, and
rtscope's labels, JSON and check say so. The same on the synthetic runtime, command by command:
tests/test_in_force.py."""

from __future__ import annotations

import json
import subprocess

import pytest

import rtscope.runtimes.beam  # noqa: F401
from rtscope.runtimes import RUNTIMES
from rtscope.settings.registry import beam_fullsweep_after, beam_heap_sizes, beam_min_heap_size
from rtscope.store import Store
from test_beam_cli_units import run_spec, spec

pytestmark = pytest.mark.real


def need_beam():
    why = RUNTIMES["beam"].unavailable()
    if why:
        pytest.skip(why)


def test_the_vms_limits_are_the_ones_check_knows():
    """check's rules (settings/registry.py) against what this VM's spawn_opt/2 and process_info/2 give."""
    need_beam()
    sweeps, heaps = [0, 65535, 65536, 100000, 131071], [0, 34, 233, 234, 377, 6765, 46368, 196418]
    probe = ("T = fun(O) -> P = spawn_opt(fun() -> receive {F} -> F ! {self(), process_info(self(), "
             "[min_heap_size, garbage_collection])} end end, O), P ! {self()}, receive {P, I} -> I end end, "
             f"S = [proplists:get_value(fullsweep_after, proplists:get_value(garbage_collection, "
             f"T([{{fullsweep_after, V}}]))) || V <- {sweeps}], "
             f"H = [proplists:get_value(min_heap_size, T([{{min_heap_size, V}}])) || V <- {heaps}], "
             "io:format(\"~w~n~w~n~w~n\", [S, H, lists:sublist(erlang:system_info(heap_sizes), 30)]), halt().")
    out = subprocess.run(["erl", "-noshell", "-eval", probe], capture_output=True, text=True, timeout=60,
                         check=True).stdout.split()
    got_sweeps, got_heaps, table = (json.loads(line) for line in out[:3])
    assert got_sweeps == [beam_fullsweep_after(v) for v in sweeps]
    assert got_heaps == [beam_min_heap_size(v) for v in heaps]
    assert table == beam_heap_sizes()[:30]


def test_a_study_run_on_the_beam_is_labelled_with_what_was_in_force(cli, db, tmp_path, monkeypatch):
    need_beam()
    params = {"iterations": 20, "pause_ms": 0}
    text = spec(("exec", "sum", params, {"fullsweep_after": [65535, 131071]}),
                ("exec", "sum", params, {"min_heap_size": 34}))
    r = run_spec(cli, db, tmp_path, text)
    assert r.code == 0, r.err + r.out
    err = " ".join(r.err.split())
    assert "fullsweep_after 131071 is beyond the runtime's limits: its runs will have 65535 in force" in err
    runs = {(x.settings["fullsweep_after"], x.settings["min_heap_size"]): x for x in Store(db).runs()}
    assert runs[131071, 233].header["process"]["fullsweep_after"] == 65535
    assert runs[65535, 34].header["process"]["min_heap_size"] == 233
    out = " ".join(r.out.split())
    assert "fullsweep_after=131071 (in force: 65535)" in out and "min_heap_size=34 (in force: 233)" in out
    monkeypatch.setenv("COLUMNS", "80")
    c = cli("compare", "--baseline", "fullsweep_after=65535", "--where", "min_heap_size=233", "--db", db, "--json")
    assert c.code == 0, c.err
    doc = json.loads(c.out)
    by_label = {x["label"]: x["configuration"]["not_in_force"] for x in doc["configurations"]}
    assert by_label == {"fullsweep_after=65535": [],
                        "fullsweep_after=131071 (in force: 65535)": [
                            {"setting": "fullsweep_after", "requested": 131071, "in_force": 65535}]}
    [k] = doc["comparisons"]
    assert any("an A/A comparison" in n for n in k["notes"])
