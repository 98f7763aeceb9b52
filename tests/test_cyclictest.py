"""cyclictest as a peer, with the real cyclictest (rt-tests): its output made here in every form read back, and
the `cyclictest` runtime's runs (every sample at SCHED_FIFO 80, pinned and locked; a histogram of every CPU).
The importers on checked-in fixtures and the refusals: tests/test_cyclictest_units.py."""

from __future__ import annotations

import os
import shutil
import subprocess

import numpy as np
import pytest

from rtscope.store import Store
from test_cyclictest_units import convert, spec

pytestmark = pytest.mark.real

needs_cyclictest = pytest.mark.skipif(shutil.which("cyclictest") is None,
                                      reason="cyclictest not installed (apt-get install rt-tests)")


# --- real cyclictest output, made here ----------------------------------------------------------------------

@needs_cyclictest
def test_real_output_in_every_form(tmp_path):
    js = tmp_path / "run.json"
    hist = subprocess.run(["cyclictest", "-i", "100", "-l", "300", "-h", "30", "-q", f"--json={js}"],
                          capture_output=True, text=True, timeout=60)
    assert hist.returncode == 0, hist.stderr
    (tmp_path / "hist.txt").write_text(hist.stdout)
    t = convert("cyclictest", tmp_path / "hist.txt").trailer["histograms"]["thread0"]
    j = convert("cyclictest", js).trailer["histograms"]["thread0"]
    assert t["n"] == j["n"] == 300 and t["counts"] == j["counts"] and t["overflow"] == j["overflow"]
    assert t["min"] == j["min"] and t["max"] == j["max"]
    assert len(t["overflow_cycles"]) + t["overflow_cycles_dropped"] == t["overflow"]

    verbose = subprocess.run(["cyclictest", "-i", "100", "-l", "300", "-v", "-N"], capture_output=True, text=True,
                             timeout=60)
    assert verbose.returncode == 0, verbose.stderr
    (tmp_path / "v.txt").write_text(verbose.stdout)
    sf = convert("cyclictest", tmp_path / "v.txt", settings={"unit": "ns"})
    assert sf.n == 300 and sf.data["cycle"].tolist() == list(range(300)) and np.all(sf.data["latency"] > 0)


@needs_cyclictest
def test_runtime_every_sample_and_histogram(cli, db, tmp_path):
    cpu = max(os.sched_getaffinity(0))
    r = cli("run", spec(tmp_path, "interval_us = 200\nloops = 500", f"rt_priority = 80\nmlock = true\ncpu = {cpu}"),
            "--db", db)
    assert r.code == 0, r.err
    r = cli("run", spec(tmp_path, 'interval_us = 100\nloops = 400\nhistogram_us = 50\nthreads = "all"'), "--db", db)
    assert r.code == 0, r.err
    store = Store(db)
    samples, hist = store.runs()
    assert samples["runtime"] == "cyclictest" and samples["n_samples"] == 500
    assert samples["settings"]["rt_priority"] == 80 and samples["settings"]["mlock"] is True
    assert samples["settings"]["cpu"] == cpu and samples["tool_version"] not in ("", "unknown")
    data = store.samples(samples.id)
    assert data["cycle"].tolist() == list(range(500)) and set(data["cpu"].tolist()) == {cpu}
    assert np.all(data["latency"] > 0) and samples["header"]["cyclictest_cmdline"].startswith("cyclictest")
    ncpu = len(os.sched_getaffinity(0))
    assert hist["n_samples"] == 0 and len(hist["trailer"]["histograms"]) == ncpu
    # cyclictest ends every thread when the first one has run its loops (a note names the others' counts).
    ns = [h["n"] for h in hist["trailer"]["histograms"].values()]
    assert max(ns) == 400 and all(len(h["counts"]) == 50 for h in hist["trailer"]["histograms"].values())
    assert all(n == 400 for n in ns) or any("stopped every thread" in n for n in hist["trailer"]["notes"])
