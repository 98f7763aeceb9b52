"""A run's deadline (experiment/bounds.py) from its parameters and earlier runs, and the bounds' options and target
keys refused with a clear message (the real faults: tests/test_board_faults.py)."""

from __future__ import annotations

import pytest

from rtscope import targets
from rtscope.errors import UsageError
from rtscope.experiment.bounds import (MARGIN_FACTOR, MARGIN_S, PER_CALL_S, SLOW_WRITE_BPS, UNKNOWN_S, Bounds,
                                       expected_s)
from rtscope.runtimes.base import RunRequest

pytestmark = pytest.mark.fast


def req(workload: str = "exec", **params) -> RunRequest:
    return RunRequest(workload, "sum", "native", params, {}, ())


@pytest.mark.parametrize("params, expected", [
    ({"iterations": 1000, "pause_ms": 5}, 1000 * (0.005 + PER_CALL_S)),
    ({"iterations": 10}, 10 * PER_CALL_S),
    ({"loops": 10000, "interval_us": 1000}, 10.0),
    ({"loops": 10000, "interval_us": 1000, "duration_s": 3}, 3.0),      # the first limit wins
    ({"loops": 1000, "interval_us": 1000, "duration_s": 30}, 1.0),
    ({"duration_s": 3600}, 3600.0),
    ({"size": "1G", "repetitions": 2}, 2 * (1 << 30) / SLOW_WRITE_BPS),
    ({"size": "16M"}, (16 << 20) / SLOW_WRITE_BPS),
    ({"iterations": 2, "senders": 10, "messages": 100, "send_interval_ms": 1}, 2 * (0.1 + PER_CALL_S)),
    ({"counts": [1, 10]}, None),
])
def test_expected_duration_from_parameters(params, expected):
    got = expected_s(req(**params))
    assert got == pytest.approx(expected) if expected is not None else got is None


def test_deadline_estimate_then_earlier_runs_then_overrides():
    b = Bounds()
    r = req(iterations=1000, pause_ms=5)
    first = b.deadline("c", r, None)
    assert first == pytest.approx(MARGIN_FACTOR * 1000 * (0.005 + PER_CALL_S) + MARGIN_S)
    b.took("c", 6.0)
    b.took("c", 4.0)                                   # the longest counts
    assert b.deadline("c", r, None) == MARGIN_FACTOR * 6.0 + MARGIN_S
    assert b.deadline("other", req(counts=[1]), None) == UNKNOWN_S
    assert Bounds(run_timeout=7).deadline("c", r, None) == 7
    assert Bounds(run_timeout=7).deadline("c", r, 9) == 9  # the spec's timeout_s wins


def test_a_resumed_experiment_learns_its_cells_from_the_stored_runs():
    b = Bounds()
    b.learn([{"cell": "a", "started_at": "2026-11-29T04:00:00Z", "finished_at": "2026-11-29T04:00:12Z"},
             {"cell": "a", "started_at": "2026-11-29T04:01:00Z", "finished_at": "2026-11-29T04:01:05Z"},
             {"cell": None, "started_at": "2026-11-29T04:00:00Z", "finished_at": "2026-11-29T04:09:00Z"},
             {"cell": "b", "started_at": "2026-11-29T04:00:00Z", "finished_at": None}])
    assert b.longest == {"a": 12.0}


@pytest.mark.parametrize("key, value", [("keepalive_s", 0), ("silent_after_s", -3), ("silent_after_s", "30"),
                                        ("keepalive_s", True)])
def test_bad_bound_keys_of_a_target(key, value, clean_targets):
    with pytest.raises(UsageError, match=rf"{key} must be a number of seconds > 0, got"):
        targets.define("b", {"url": "ssh://root@127.0.0.1:22", key: value}, replace=True)


def test_bound_keys_reach_the_ssh_target(clean_targets):
    d = targets.define("b", {"url": "ssh://root@127.0.0.1:22", "keepalive_s": 2, "silent_after_s": 7.5},
                       replace=True)
    t = targets.make(d)
    assert (t.keepalive_s, t.silent_after_s) == (2, 7.5)


@pytest.mark.parametrize("option, value, message", [
    ("--run-timeout", "0", "--run-timeout must be a number of seconds > 0, not 0"),
    ("--reconnect-for", "-1", "--reconnect-for must be a number of seconds >= 0 (0: fail at once), not -1"),
])
def test_bad_bound_options(cli, tmp_path, option, value, message):
    r = cli("run", "demo", option, value, "--db", str(tmp_path / "s.db"))
    assert r.code == 2 and message in " ".join(r.err.split()), r.err
