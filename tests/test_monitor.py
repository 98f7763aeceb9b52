"""rtscope monitor's input: bad arguments refused with what is valid, durations parsed. Under a real load:
tests/test_monitor_load.py; killed mid-monitoring and resumed: tests/test_monitor_crash.py."""

from __future__ import annotations

import pytest

from rtscope.experiment import monitor as mon
from rtscope.errors import UsageError

pytestmark = pytest.mark.fast


@pytest.mark.parametrize("args, message", [
    (["--duration", "6x"], "invalid duration '6x': write e.g. 6h, 5m, 90s or 1h30m"),
    (["--duration", "10s", "--interval", "1m"], "interval 1m is longer than the duration 10s"),
    (["--runtime", "beam"], "unknown runtime 'beam' for monitor; valid: native, cyclictest"),
    (["--resume"], "no unfinished monitoring of target local"),
])
def test_bad_input(cli, db, args, message):
    r = cli("monitor", *args, "--db", db)
    assert r.code == 2 and message in " ".join(r.err.split())


def test_durations():
    assert mon.parse_duration("1h30m", "d") == 5400 and mon.parse_duration("90", "d") == 90
    with pytest.raises(UsageError):
        mon.parse_duration("0s", "d")
