"""Xenomai: its latency tool's output imported (RTD/RTS lines, -h histograms, negative latencies kept), and the
`xenomai` runtime saying what it lacks.

No Xenomai kernel can run here (Debian ships none), so the fixtures are latency output in the format its
testsuite prints. The runtime on an SSH target given a stand-in `latency` that prints such output:
tests/test_xenomai_ssh.py."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from rtscope.errors import UsageError
from rtscope.importers import xenomai
from rtscope.experiment.spec import build_request
from rtscope.store import Store

pytestmark = pytest.mark.fast

FIXTURES = Path(__file__).parent / "fixtures" / "xenomai"


def test_import_per_second_lines_keeps_negative_latencies(cli, db):
    """Without -h the log has no distribution: the headline is its RTS summary, n its seconds × samples per
    second, the percentiles not available; the RTD lines stay as the per-second series."""
    r = cli("import", "xenomai", FIXTURES / "latency-plain.txt", "--db", db)
    assert r.code == 0, r.err
    assert "40,000 samples summarised by the tool (no samples kept)" in r.out
    store = Store(db)
    [run] = store.runs()
    assert run["runtime"] == "xenomai" and run["workload"] == "timer" and run["n_samples"] == 0
    assert run["settings"] == {"rt_priority": 99, "xenomai_mode": "user"} and run["params"]["interval_us"] == 100
    per_second = run["trailer"]["per_second"]
    assert per_second["max"] == [3184, 7910, 2871, 12460] and per_second["min"] == [-352, -298, 12, -140]
    assert run["trailer"]["counters"]["overruns"] == 1
    assert any("negative latencies (minimum -0.352 µs) are real" in n for n in run["trailer"]["notes"])
    # RTS|     -0.352|      0.623|     12.460|       1|     0|    00:00:04/00:00:04
    stats = json.loads(cli("show", str(run.id), "--db", db, "--json").out)["stats"]
    assert (stats["n"], stats["min"], stats["mean"], stats["max"]) == (40_000, -352, 623, 12460)
    assert stats["p50"] is stats["p99"] is stats["stdev"] is None
    shown = cli("show", str(run.id), "--db", db)
    assert shown.code == 0, shown.err
    assert "not available" in shown.out and "own figures" in " ".join(shown.out.split())


def test_import_histogram_with_exact_extremes(cli, db):
    assert cli("import", "xenomai", FIXTURES / "latency-histogram.txt", "--db", db).code == 0
    r = cli("show", "1", "--db", db, "--json")
    assert r.code == 0, r.err
    stats = json.loads(r.out)["stats"]
    # RTS|     -1.020|      1.505|     14.117|  ...  HSS|    avg|      2000|      1.403|      0.942
    assert (stats["n"], stats["min"], stats["mean"], stats["max"], stats["stdev"]) == (2000, -1020, 1505, 14117, 942)
    assert stats["p50"] == 2000 and stats["p99"] == 4000  # from the histogram: upper edges of 1 µs buckets
    [run] = Store(db).runs()
    h = run["trailer"]["histograms"]["thread0"]
    assert h["bucket_width"] == 1000 and h["counts"][:4] == [402, 1203, 371, 18] and h["counts"][14] == 1
    assert sum(h["counts"]) == 2000 and h["overflow"] == 0
    assert run["trailer"]["per_second"]["max"] == [9204, 14117]


@pytest.mark.parametrize("text, message", [
    ("hello\n", "no RTD or RTS line"),
    ("RTD|      0.620|      1.029|      4.520|       0|     0|      0.620|      4.520\n",
     "no RTS summary line: the run did not end"),
    ("RTD|      zero|      1.029|      4.520|       0|     0|      0.620|      4.520\n", "line 1: cannot read"),
])
def test_bad_logs(tmp_path, text, message):
    f = tmp_path / "bad.txt"
    f.write_text(text)
    with pytest.raises(UsageError, match=message):
        xenomai.convert(f, None, {})


def test_runtime_unavailable_says_what_is_missing():
    from rtscope.runtimes import RUNTIMES
    assert "Xenomai's latency tool is not on target local" in RUNTIMES["xenomai"].unavailable()
    with pytest.raises(UsageError, match="whole µs"):
        RUNTIMES["xenomai"].prepare(build_request("timer", "absolute", "xenomai", {"interval_us": 100.5}))
