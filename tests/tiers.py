"""The test tiers (docs/testing.md): every test file sets `pytestmark = pytest.mark.fast` (`make check`: Python
and the built probes only, no real timing) or `pytest.mark.real` (the real components, real timing); a test in
neither or both, or judging real timing in the fast tier, is refused when the suite is collected.

`make test` runs the tests two at a time (pytest-xdist, one file per process), then the `alone` ones one after
the other with nothing beside them: a test that judges real timing must be `alone` (its file's pytestmark, so
that the file's expensive fixtures, a booted guest, are made once, in the phase that runs them)."""

from __future__ import annotations

import pytest


TIERS = ("fast", "real")


def refuse_wrong_tiers(items) -> None:
    """Refuse a test that is in no tier or in both (`make check` would silently skip it, or run a real one),
    and one judging real timing in the fast tier."""
    wrong = [f"{item.nodeid}: {', '.join(tiers) or 'no tier'}" for item in items
             if len(tiers := [t for t in TIERS if item.get_closest_marker(t)]) != 1]
    if wrong:
        raise pytest.UsageError("each test file must set `pytestmark = pytest.mark.fast` or `pytest.mark.real` "
                                "(docs/testing.md); wrong:\n  " + "\n  ".join(wrong[:20]))
    fast_timing = [item.nodeid for item in items
                   if item.get_closest_marker("timing") and item.get_closest_marker("fast")]
    if fast_timing:
        raise pytest.UsageError("a test that judges real timing belongs to the real tier: " + ", ".join(fast_timing))
    timing_beside = [item.nodeid for item in items
                     if item.get_closest_marker("timing") and not item.get_closest_marker("alone")]
    if timing_beside:
        raise pytest.UsageError("a test that judges real timing must run alone (its file's pytestmark gets "
                                "pytest.mark.alone, docs/testing.md): " + ", ".join(timing_beside[:20]))
