"""cyclictest as a peer, without cyclictest: the importers on every output form (checked-in fixtures), the CLI
import all or nothing, and what the `cyclictest` runtime refuses before it runs. Real cyclictest output made
here, and the runtime's runs: tests/test_cyclictest.py."""

from __future__ import annotations

from pathlib import Path

import pytest

from rtscope import samplefile
from rtscope.errors import UsageError
from rtscope.importers import IMPORTERS
from rtscope.importers import cyclictest as ct
from rtscope.store import Store

pytestmark = pytest.mark.fast


FIXTURES = Path(__file__).parent / "fixtures" / "cyclictest"


def convert(name: str, path: Path, variant=None, settings=None) -> samplefile.SampleFile:
    [sf] = IMPORTERS[name].convert(path, variant, dict(settings or {}))
    # Whatever the importer builds must survive the file format: write, read back.
    blob = samplefile.serialize(sf.header, sf.data, sf.trailer)
    return samplefile.parse(blob, path)


# --- fixtures ---------------------------------------------------------------------------------------------

def test_study2_verbose_log_in_us():
    sf = convert("cyclictest", FIXTURES / "verbose_study2.txt")
    assert sf.header["cyclictest_form"] == "verbose"
    assert (sf.header["workload"], sf.header["variant"], sf.header["runtime"]) == ("timer", "absolute", "cyclictest")
    assert [c.name for c in sf.columns] == ["latency", "cycle", "thread"]
    lat = sf.data["latency"]
    assert len(lat) == 40 and lat.min() == 5_000 and lat.max() == 78_000 and lat.sum() == 560_000
    assert sf.data["cycle"].tolist() == list(range(40)) and set(sf.data["thread"]) == {0}
    assert any("whole µs" in n for n in sf.trailer["notes"])


def test_verbose_ns_detected_from_summary_line():
    sf = convert("cyclictest-verbose", FIXTURES / "verbose_ns.txt")
    lat = sf.data["latency"]
    # The summary line of the same run: C: 20 Min: 7454 Avg: 10323 Max: 34426 (ns, -N).
    assert len(lat) == 20 and lat.min() == 7454 and lat.max() == 34426 and int(lat.mean()) == 10323
    assert not any("whole µs" in n for n in sf.trailer["notes"])
    # An explicit unit wins over detection, and is not recorded as a setting.
    us = convert("cyclictest-verbose", FIXTURES / "verbose_ns.txt", settings={"unit": "us", "kernel": "rt"})
    assert us.data["latency"].min() == 7454 * 1000 and us.header["settings"] == {"kernel": "rt"}


def test_histogram_text_two_threads_with_overflows():
    sf = convert("cyclictest", FIXTURES / "hist_H.txt")
    assert sf.header["cyclictest_form"] == "histogram" and sf.n == 0
    h0, h1 = sf.trailer["histograms"]["thread0"], sf.trailer["histograms"]["thread1"]
    assert len(h0["counts"]) == 40 and h0["bucket_width"] == 1000 and h0["unit"] == "ns"
    assert h0["counts"][6:10] == [3, 79, 132, 153]
    assert (sum(h0["counts"]), h0["overflow"], h0["n"]) == (496, 4, 500)
    assert (sum(h1["counts"]), h1["overflow"], h1["n"]) == (494, 6, 500)
    assert h0["overflow_cycles"] == [49, 60, 215, 245] and h0["overflow_cycles_dropped"] == 0
    assert h1["overflow_cycles"] == [61, 63, 95, 120, 205, 224]
    assert (h0["min"], h0["max"], h1["min"], h1["max"]) == (6000, 153000, 7000, 159000)
    # Overflowed values are not in the buckets: the sum is what the buckets hold plus each overflow at the
    # range's end, a bound above the text's truncated average (9 µs × 500); not exact.
    assert sum(i * c for i, c in enumerate(h0["counts"])) == 4542
    assert h0["sum"] == (4542 + 4 * 40) * 1000 > 9 * 500 * 1000 and h0["sum_exact"] is False
    assert sf.trailer["counters"]["overflows"] == 10


def test_json_quirks_and_agreement_with_text():
    sf = convert("cyclictest", FIXTURES / "hist.json")
    h = sf.header
    assert h["cyclictest_form"] == "json" and h["tool_version"] == "2.40"
    assert h["cyclictest_cmdline"].startswith("cyclictest -p 90 -m -i 200 -l 500 -H 40")  # key "cmdline:"
    assert h["settings"] == {"rt_priority": 90, "mlock": True}
    assert h["params"] == {"interval_us": 200, "loops": 500, "histogram_us": 40, "threads": 2}  # -t 2 ran 2
    assert h["started_at"] == "2026-11-22T10:58:42.000Z"
    assert h["environment"]["kernel_release"] and h["environment"]["preemption"] == "PREEMPT_DYNAMIC"
    text = convert("cyclictest", FIXTURES / "hist_H.txt")
    for name in ("thread0", "thread1"):
        j, t = sf.trailer["histograms"][name], text.trailer["histograms"][name]
        # Same run: same buckets; overflows derived in JSON (cycles - sum) equal the text's count.
        assert j["counts"] == t["counts"] and j["overflow"] == t["overflow"] and j["n"] == t["n"] == 500
        assert j["overflow_cycles"] == []  # only the text form has them
    assert sf.trailer["histograms"]["thread0"]["sum"] == round(9.79 * 500 * 1000)
    assert sf.trailer["histograms"]["thread1"]["cpu"] == 1


@pytest.mark.parametrize("name, fixture, problem", [
    ("cyclictest", "nohist.json", "no histogram"),
    ("cyclictest", "hist_truncated.txt", "no '# Total"),
    ("cyclictest", "not_cyclictest.txt", "not a cyclictest log"),
    ("cyclictest", "verbose_garbled.txt", "line 11"),
    ("cyclictest-json", "hist_H.txt", "not valid JSON"),
    ("cyclictest-histogram", "verbose_study2.txt", "no '# Histogram' line"),
    ("cyclictest-verbose", "hist.json", "expected 'thread: cycle: value'"),
])
def test_bad_logs_are_refused(name, fixture, problem):
    with pytest.raises(UsageError, match=problem):
        IMPORTERS[name].convert(FIXTURES / fixture, None, {})


def test_import_cli_stores_all_or_nothing(cli, db):
    r = cli("import", "cyclictest", FIXTURES / "verbose_study2.txt", FIXTURES / "hist_H.txt",
            "--set", "kernel=normal", "--db", db)
    assert r.code == 0, r.err
    runs = Store(db).runs()
    assert [(x["n_samples"], x["settings"].get("kernel")) for x in runs] == [(40, "normal"), (0, "normal")]
    # One bad file among good ones: exit 2, nothing more stored.
    r = cli("import", "cyclictest", FIXTURES / "verbose_ns.txt", FIXTURES / "nohist.json", "--db", db)
    assert r.code == 2 and "no histogram" in r.err
    assert len(Store(db).runs()) == 2
    r = cli("import", "cyclictest", FIXTURES / "verbose_ns.txt", "--variant", "posix", "--db", db)
    assert r.code == 2 and "valid variants: absolute, relative" in r.err
    r = cli("import", "cyclictest", FIXTURES / "verbose_ns.txt", "--set", "unit=ms", "--db", db)
    assert r.code == 2 and "valid units" in r.err


def test_detect_and_cmdline_options():
    assert ct.detect("  {\"thread\": {}}") == "json"
    assert ct.detect("# /dev/cpu_dma_latency set to 0us\n# Histogram\n000000 000001\n") == "histogram"
    assert ct.detect("       0:       0:      12\n") == "verbose"
    with pytest.raises(UsageError, match="not a cyclictest log"):
        ct.detect("hello\n")
    settings, params, variant = ct.options_from_cmdline(
        "cyclictest -p90 -m -r -t 2 -a 0-1 -i 200 --loops=5000 -h 400 -q")
    assert settings == {"rt_priority": 90, "mlock": True}
    # -t 2 is the thread count, -a 0-1 where they ran (issue: threads was taken from the affinity)
    assert params == {"interval_us": 200, "loops": 5000, "histogram_us": 400, "threads": 2, "affinity": "0-1"}
    assert variant == "relative"
    settings, params, variant = ct.options_from_cmdline("cyclictest -mq -a 1 -D 2m")
    assert settings == {"mlock": True, "cpu": 1} and params == {"interval_us": 1000, "duration_s": 120}


# --- the runtime -------------------------------------------------------------------------------------------

def spec(tmp_path, params: str, settings: str = "", runtime: str = "cyclictest") -> Path:
    p = tmp_path / "spec.toml"
    p.write_text(f'name = "ct"\n[[workload]]\nname = "timer"\nvariants = ["absolute"]\nruntime = "{runtime}"\n'
                 f"[workload.params]\n{params}\n[workload.settings]\n{settings}\n")
    return p


def test_runtime_refuses_what_cyclictest_cannot_take(cli, db, tmp_path):
    r = cli("run", spec(tmp_path, "interval_us = 200.5\nloops = 10"), "--db", db)
    assert r.code == 2 and "whole µs" in r.err
    r = cli("run", spec(tmp_path, "interval_us = 200\nduration_s = 1.5"), "--db", db)
    assert r.code == 2 and "whole seconds" in r.err
    r = cli("run", spec(tmp_path, 'loops = 10\nthreads = "0,1023"'), "--db", db)
    assert r.code == 2 and "CPU 1023 does not exist" in r.err
    assert Store(db).runs() == []
