"""Workload `tasks` end to end through the CLI: a small run on every runtime available here (native: the cbtask
library and taskmem; beam: the Erlang VM), its table and fits. The registry checks: tests/test_tasks_runs_units.py."""

import json

import pytest

from rtscope import paths
from rtscope.errors import RtscopeError
from rtscope.runtimes import RUNTIMES

pytestmark = pytest.mark.real

NATIVE_MODELS = {"memory": ["cbtask", "cbtask_receive", "pthread", "std_thread"],
                 "switch": ["cbtask", "pthread_pipe", "pthread_futex", "std_thread"]}
BEAM_MODELS = {"memory": ["erlang_process", "callback_thread"], "switch": ["erlang_process", "callback_thread"]}


def spec(runtime: str, models: dict) -> str:
    return f"""
name = "tasks-{runtime}"
[[workload]]
name = "tasks"
variants = "memory"
runtime = "{runtime}"
[workload.params]
counts = "1,10,100,1000"
[workload.settings]
model = {json.dumps(models["memory"])}

[[workload]]
name = "tasks"
variants = "switch"
runtime = "{runtime}"
[workload.params]
iterations = 3
[workload.settings]
model = {json.dumps(models["switch"])}
"""


def unavailable(runtime: str) -> str | None:
    if runtime not in RUNTIMES:
        return f"runtime {runtime} is not registered yet"
    if "tasks" not in RUNTIMES[runtime].workloads:
        return f"runtime {runtime} does not run workload tasks yet"
    missing = RUNTIMES[runtime].unavailable()
    if missing:
        return missing
    if runtime == "native":
        try:
            paths.taskmem()
        except RtscopeError as e:
            return str(e)
    return None


def run_and_table(cli, db, tmp_path, runtime, models):
    why = unavailable(runtime)
    if why:
        pytest.skip(why)
    path = tmp_path / "tasks.toml"
    path.write_text(spec(runtime, models))
    r = cli("run", path, "--db", db)
    assert r.code == 0, r.err + r.out
    r = cli("tasks-table", "--db", db, "--json")
    assert r.code == 0, r.err
    return json.loads(r.out)


def check_table(got, runtime, models):
    memory = {s["label"]: s for s in got["memory"]}
    assert set(memory) == {f"{m} ({runtime})" for m in models["memory"]}
    for label, s in memory.items():
        assert sorted(int(c) for c in s["by_count"]) == [1, 10, 100, 1000], label
        assert s["fit"] is not None and s["fit"]["n"] == 4, label
        assert s["fit"]["slope"] > 0, f"{label}: {s['fit']}"
    switch = {s["label"]: s for s in got["switch"]}
    assert set(switch) == {f"{m} ({runtime})" for m in models["switch"]}
    for label, s in switch.items():
        assert s["n"] == 3 and 0 < s["p50"] <= s["p99"] < 1e7, f"{label}: {s}"
    return memory, switch


def test_native_tasks_run(cli, db, tmp_path):
    got = run_and_table(cli, db, tmp_path, "native", NATIVE_MODELS)
    memory, _ = check_table(got, "native", NATIVE_MODELS)
    # A thread has a stack; a callback task does not.
    assert memory["cbtask (native)"]["fit"]["slope"] < memory["pthread (native)"]["fit"]["slope"] / 10


def test_beam_tasks_run(cli, db, tmp_path):
    got = run_and_table(cli, db, tmp_path, "beam", BEAM_MODELS)
    memory, _ = check_table(got, "beam", BEAM_MODELS)
    assert memory["callback_thread (beam)"]["fit"]["slope"] < memory["erlang_process (beam)"]["fit"]["slope"]
