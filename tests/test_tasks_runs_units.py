"""Workload `tasks`'s registry checks, before anything runs: each runtime's models, the counts, a setting model for
another workload, the CLI naming a missing model. Small runs on every runtime available here:
tests/test_tasks_runs.py."""

import pytest

from rtscope.errors import UsageError
from rtscope.experiment.spec import build_request
from rtscope.runtimes import RUNTIMES

pytestmark = pytest.mark.fast


@pytest.mark.parametrize("runtime, variant, settings, params, message", [
    ("native", "memory", {}, {}, "needs setting model; valid models: cbtask, cbtask_receive, pthread, std_thread"),
    ("native", "switch", {"model": "pthread"}, {},
     "has no model 'pthread' for tasks switch; valid models: cbtask, pthread_pipe, pthread_futex, std_thread"),
    ("native", "memory", {"model": "erlang_process"}, {}, "valid models: cbtask, cbtask_receive, pthread, std_thread"),
    ("native", "memory", {"model": "cbtask"}, {"iterations": 5}, "parameter iterations does not apply to tasks memory"),
])
def test_native_refuses_what_it_cannot_run(runtime, variant, settings, params, message):
    req = build_request("tasks", variant, runtime, params, settings)
    with pytest.raises(UsageError, match=message):
        RUNTIMES[runtime].prepare(req)


@pytest.mark.parametrize("params, settings, message", [
    ({"counts": "1,x"}, {"model": "cbtask"}, "task count 'x' is not an integer"),
    ({"counts": "10,10"}, {"model": "cbtask"}, "appears twice"),
    ({"counts": "0"}, {"model": "cbtask"}, "must be >= 1"),
    ({}, {"model": "green_thread"}, "valid: one of cbtask, cbtask_receive, pthread, pthread_pipe"),
])
def test_registry_checks_values(params, settings, message):
    with pytest.raises(UsageError, match=message):
        build_request("tasks", "memory", "native", params, settings)


def test_counts_are_normalised():
    req = build_request("tasks", "memory", "native", {"counts": " 1, 10,100 "}, {"model": "cbtask"})
    assert req.params == {"counts": "1,10,100"}
    assert build_request("tasks", "switch", "native", {}, {"model": "cbtask"}).params == {"iterations": 100}


def test_model_is_refused_for_other_workloads():
    req = build_request("exec", "sum", "native", {}, {"model": "cbtask"})
    with pytest.raises(UsageError, match="setting model applies to workload tasks only"):
        RUNTIMES["native"].prepare(req)


def test_cli_names_the_missing_model(cli, db, tmp_path):
    path = tmp_path / "bad.toml"
    path.write_text('name = "bad"\n[[workload]]\nname = "tasks"\nvariants = "memory"\nruntime = "native"\n'
                    '[workload.settings]\nmodel = "fibers"\n')
    r = cli("run", path, "--db", db)
    assert r.code == 2 and "fibers" in r.err and "cbtask" in r.err
