"""tests/realtiming.py's rule through pytest itself (pytester): a `timing` test is measured once more only when
its judgement failed on an assertion while a stall was recorded; the tiers are enforced at collection."""

from __future__ import annotations

from pathlib import Path

import pytest

import realtiming

pytestmark = pytest.mark.fast
pytest_plugins = ["pytester"]

TESTS = Path(__file__).parent
CONFTEST = f"""
import sys
sys.path.insert(0, {str(TESTS)!r})
from realtiming import pytest_runtest_protocol, pytest_terminal_summary, record_stall
from tiers import refuse_wrong_tiers


def pytest_collection_modifyitems(items):
    refuse_wrong_tiers(items)
"""
INI = """[pytest]
addopts = --strict-markers -p no:cacheprovider -p no:labgrid
markers =
    fast: f
    real: r
    timing: t
    alone: a
"""


@pytest.fixture
def inner(pytester, monkeypatch):
    pytester.makeconftest(CONFTEST)
    pytester.makeini(INI)
    return pytester


def test_a_stall_recorded_by_the_test_gives_one_more_measurement(inner, monkeypatch):
    monkeypatch.setattr(realtiming, "host_steal_ticks", lambda: 0)   # the host stole nothing
    inner.makepyfile(test_inner="""
import pytest
pytestmark = [pytest.mark.real, pytest.mark.alone, pytest.mark.timing]
TRIES = []

def test_stalls_once(record_stall, tmp_path):
    TRIES.append(tmp_path)
    if len(TRIES) == 1:
        record_stall("4 of 10 samples unseen by the guest")
        assert False, "culprit not named"
    assert TRIES[0] != TRIES[1]           # a fresh tmp_path for the second measurement

def test_fails_without_a_stall():
    assert 1 == 2

def test_an_error_is_not_measured_again(record_stall):
    record_stall("a stall")
    raise RuntimeError("a bug, not timing")
""")
    r = inner.runpytest_inprocess()
    r.assert_outcomes(passed=1, failed=2)
    r.stdout.fnmatch_lines(["realtiming: measured again: test_inner.py::test_stalls_once: 4 of 10 samples unseen*"])
    assert "measured again: test_inner.py::test_fails_without" not in r.stdout.str()
    assert "measured again: test_inner.py::test_an_error" not in r.stdout.str()


def test_a_modules_fixtures_stay_for_the_second_measurement_of_its_last_test(inner, monkeypatch):
    """A booted guest (a module's fixture) is kept when its module's last test is measured again, and torn down
    before the next module's tests, as pytest does it."""
    monkeypatch.setattr(realtiming, "host_steal_ticks", lambda: 0)
    inner.makepyfile(test_a="""
import pytest
pytestmark = [pytest.mark.real, pytest.mark.alone, pytest.mark.timing]
EVENTS = []

@pytest.fixture(scope="module")
def guest():
    EVENTS.append("boot")
    yield
    EVENTS.append("shut down")

def test_first(guest):
    pass

def test_last_stalls_once(guest, record_stall):
    EVENTS.append("measured")
    if EVENTS.count("measured") == 1:
        record_stall("a stall")
        assert False, "culprit not named"
""", test_b="""
import pytest
import test_a
pytestmark = pytest.mark.fast

def test_after():
    assert test_a.EVENTS == ["boot", "measured", "measured", "shut down"]
""")
    r = inner.runpytest_inprocess("-p", "no:randomly", "test_a.py", "test_b.py")
    r.assert_outcomes(passed=3)
    r.stdout.fnmatch_lines(["realtiming: measured again: test_a.py::test_last_stalls_once: a stall"])


def test_the_hosts_steal_is_a_recorded_reason_and_a_second_failure_fails(inner, monkeypatch):
    ticks = iter(range(0, 100, 3))   # every reading 3 ticks on: steal rose during every measurement
    monkeypatch.setattr(realtiming, "host_steal_ticks", lambda: next(ticks))
    inner.makepyfile(test_inner="""
import pytest
pytestmark = [pytest.mark.real, pytest.mark.alone, pytest.mark.timing]
TRIES = []

def test_always_late():
    TRIES.append(1)
    assert len(TRIES) > 5, f"try {len(TRIES)}"
""")
    r = inner.runpytest_inprocess()
    r.assert_outcomes(failed=1)
    r.stdout.fnmatch_lines(["*realtiming: measured again: *test_always_late: the hypervisor stole 3 ticks*",
                            "*AssertionError: try 2*"])
    out = r.stdout.str()   # the first measurement's failure is shown beside the second's
    assert "the first measurement failed too" in out and "AssertionError: try 1" in out


def test_a_test_in_no_tier_a_fast_timing_test_or_one_not_alone_is_refused(inner):
    inner.makepyfile(test_untiered="def test_x():\n    pass\n")
    r = inner.runpytest_inprocess()
    assert r.ret == pytest.ExitCode.USAGE_ERROR
    r.stderr.fnmatch_lines(["*must set `pytestmark = pytest.mark.fast` or `pytest.mark.real`*",
                            "*test_untiered.py::test_x: no tier*"])
    inner.makepyfile(test_untiered="import pytest\npytestmark = [pytest.mark.fast, pytest.mark.timing]\n"
                                   "def test_x():\n    pass\n")
    r = inner.runpytest_inprocess()
    assert r.ret == pytest.ExitCode.USAGE_ERROR
    r.stderr.fnmatch_lines(["*judges real timing belongs to the real tier: test_untiered.py::test_x*"])
    inner.makepyfile(test_untiered="import pytest\npytestmark = [pytest.mark.real, pytest.mark.timing]\n"
                                   "def test_x():\n    pass\n")
    r = inner.runpytest_inprocess()
    assert r.ret == pytest.ExitCode.USAGE_ERROR
    r.stderr.fnmatch_lines(["*judges real timing must run alone*test_untiered.py::test_x*"])


def test_stalled_and_the_steal_counter():
    assert realtiming.stalled({"value_ns": 10, "unexplained_ns": 6}) and \
        not realtiming.stalled({"value_ns": 10, "unexplained_ns": 5})
    assert realtiming.host_steal_ticks() >= 0
