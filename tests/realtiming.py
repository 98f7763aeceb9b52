"""The one rule for judging real timing on this VM (docs/testing.md, "Judging real timing").

The hypervisor stops this VM's vCPUs now and then (steal time: ~4 ms is common, tens of ms happen): whatever
ran then is stretched, and no event of the kernel's accounts for the time. A test that judges real timing (a
culprit named, a remedy measured better, a latency bound) must neither fail for that nor pass by hiding a real
fault. The rule, written here once and applied by tests/conftest.py to every test marked `timing`:

1. A sample mostly unexplained (more than half of its value with no traced event in it) is a stall of the VM,
   not evidence about the code under test: `stalled`; a judge leaves such samples out.
2. A test is judged on one measurement. When its judgement fails (an AssertionError in the test's call), it
   is measured once more only for a recorded reason: the host's steal counters (/proc/stat) rose while it
   measured, or the test recorded a stall it saw (`record_stall`: a guest's samples its kernel never saw run).
   The reason is printed in the session's summary. A second failure fails; a failure of any other kind, or
   with no stall recorded, fails at once.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from _pytest.runner import call_and_report

STAT = Path("/proc/stat")
STALLS = pytest.StashKey[list]()
MEASURED_AGAIN = pytest.StashKey[list]()


def stalled(sample: dict) -> bool:
    """An explained sample mostly unexplained: the hypervisor stopped this VM's vCPU (the kernel saw nothing
    run, so no culprit can be in it)."""
    return sample["unexplained_ns"] > sample["value_ns"] / 2


def host_steal_ticks() -> int:
    """The steal time all of this machine's CPUs have counted since boot (/proc/stat, USER_HZ ticks)."""
    first = STAT.read_text().split("\n", 1)[0].split()   # "cpu user nice system idle iowait irq softirq steal"
    return int(first[8]) if len(first) > 8 else 0


def reason_to_measure_again(item: pytest.Item, reports: list[pytest.TestReport], stolen_ticks: int) -> str | None:
    """Why a `timing` test that just ran may be measured once more, or None: its call failed on an assertion
    while a stall was recorded."""
    failed = [r for r in reports if r.when == "call" and r.failed]
    crash = getattr(failed[0].longrepr, "reprcrash", None) if failed else None
    if crash is None or not crash.message.startswith(("AssertionError", "assert ")):
        return None
    seen = item.stash.get(STALLS, [])
    if stolen_ticks > 0:
        seen = [f"the hypervisor stole {stolen_ticks} ticks (10 ms each) of this machine's CPUs", *seen]
    return "; ".join(seen) or None


@pytest.fixture
def record_stall(request):
    """record_stall("why"): a stall this test saw in its own measurement (rule 2 above)."""
    return lambda why: request.node.stash.setdefault(STALLS, []).append(why)


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_protocol(item, nextitem):
    """A test marked `timing` is judged by the rule above: measured once more only when its first
    judgement failed while a stall was recorded. Every other test runs as pytest runs it."""
    if not item.get_closest_marker("timing"):
        return None
    item.ihook.pytest_runtest_logstart(nodeid=item.nodeid, location=item.location)
    first_failure = ""
    for attempt in ("first", "again"):
        before = host_steal_ticks()
        reports = [call_and_report(item, "setup", log=False)]
        if reports[0].passed:
            reports.append(call_and_report(item, "call", log=False))
        why = reason_to_measure_again(item, reports, host_steal_ticks() - before)
        again = attempt == "first" and why is not None
        # measured again, only the test's own fixtures are torn down: its module's (a booted guest) stay, also when
        # it is its module's last test (torn down up to the next test, the guest went and was booted again: 46 s)
        last = item.parent if again and not (item.session.shouldfail or item.session.shouldstop) else nextitem
        try:
            reports.append(call_and_report(item, "teardown", log=False, nextitem=last))
        finally:
            item._request = False   # as pytest's runtestprotocol: the request and funcargs go with the teardown
            item.funcargs = None
        if not again:
            break
        item.config.stash.setdefault(MEASURED_AGAIN, []).append(f"{item.nodeid}: {why}")
        first_failure = next(str(r.longrepr) for r in reports if r.when == "call" and r.failed)
        item.stash[STALLS] = []
        item._initrequest()   # fresh function-scoped fixtures (a new tmp_path); module-scoped ones are kept
    for report in reports:
        if report.when == "call" and report.failed and first_failure:  # both measurements' failures shown
            report.sections.append(("realtiming: the first measurement failed too, before it was measured again",
                                    first_failure))
        item.ihook.pytest_runtest_logreport(report=report)
    item.ihook.pytest_runtest_logfinish(nodeid=item.nodeid, location=item.location)
    return True


def pytest_terminal_summary(terminalreporter, config):
    """Every test measured again, with its recorded reason (a CI log shows how often this VM's stalls bit)."""
    for line in config.stash.get(MEASURED_AGAIN, []):
        terminalreporter.write_line(f"realtiming: measured again: {line}")
