"""An imported run's headline is the tool's own: for every importer, real output made here (cyclictest json, -h,
-v; fio json+) or the tool's format (nerves_rt_perf's CSV; Xenomai in tests/test_xenomai.py, which cannot run
here), the run's n, min, mean and max as `show`, `compare` and the `run` table print them equal what the tool
itself printed in that output, to the tool's printed precision.
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess

import numpy as np
import pytest

from rtscope.store import Store

pytestmark = pytest.mark.fast

needs = {tool: pytest.mark.skipif(shutil.which(tool) is None, reason=f"{tool} not installed")
         for tool in ("cyclictest", "fio")}


def imported_stats(cli, db, kind: str, path, *extra: str) -> dict:
    r = cli("import", kind, path, *extra, "--db", db)
    assert r.code == 0, r.err
    run = Store(db).runs()[-1]
    shown = json.loads(cli("show", str(run.id), "--db", db, "--json").out)["stats"]
    compared = json.loads(cli("compare", "--run", str(run.id), "--baseline", "defaults", "--db", db, "--json").out)
    [config] = compared["configurations"]
    for key in ("n", "min", "mean", "max"):
        assert config["stats"][key] == pytest.approx(shown[key]), key  # one number everywhere
    return shown


def cyclictest_summary(text: str) -> dict:
    """The -h output's own summary lines (thread 0), in µs: '# Total' counts the values inside the histogram,
    '# Histogram Overflows' those beyond it."""
    def line(name):
        return int(re.search(rf"^# {name}[^:]*:\s*(-?\d+)", text, re.M).group(1))
    return {"n": line("Total") + line("Histogram Overflows"), "min": line("Min Latenc"), "mean": line("Avg Latenc"),
            "max": line("Max Latenc")}


@needs["cyclictest"]
def test_cyclictest_every_form_keeps_its_own_headline(cli, tmp_path):
    js = tmp_path / "run.json"
    hist = subprocess.run(["cyclictest", "-i", "200", "-l", "500", "-h", "400", "-q", f"--json={js}"],
                          capture_output=True, text=True, timeout=60)
    assert hist.returncode == 0, hist.stderr
    (tmp_path / "hist.txt").write_text(hist.stdout)
    printed = cyclictest_summary(hist.stdout)
    st = imported_stats(cli, str(tmp_path / "h.db"), "cyclictest", tmp_path / "hist.txt")
    assert st["n"] == printed["n"] == 500
    assert (st["min"], st["max"]) == (printed["min"] * 1000, printed["max"] * 1000)
    assert int(st["mean"] // 1000) == printed["mean"]  # cyclictest truncates its average to whole µs

    thread = json.loads(js.read_text())["thread"]["0"]
    st = imported_stats(cli, str(tmp_path / "j.db"), "cyclictest", js)
    assert st["n"] == thread["cycles"] and (st["min"], st["max"]) == (thread["min"] * 1000, thread["max"] * 1000)
    assert st["mean"] / 1000 == pytest.approx(thread["avg"], abs=0.005)  # the JSON prints two decimals

    verbose = subprocess.run(["cyclictest", "-i", "200", "-l", "500", "-v", "-N"], capture_output=True, text=True,
                             timeout=60)
    assert verbose.returncode == 0, verbose.stderr
    (tmp_path / "v.txt").write_text(verbose.stdout)
    # -v prints no summary: its lines (thread: cycle: latency) are every sample, and the run holds them all.
    values = [int(m.group(1)) for m in re.finditer(r"^\s*0:\s*\d+:\s*(\d+)\s*$", verbose.stdout, re.M)]
    st = imported_stats(cli, str(tmp_path / "v.db"), "cyclictest", tmp_path / "v.txt", "--set", "unit=ns")
    assert len(values) == 500 and (st["n"], st["min"], st["max"]) == (500, min(values), max(values))
    assert st["mean"] == pytest.approx(sum(values) / len(values))


@needs["fio"]
def test_fio_json_plus_keeps_fios_own_figures(cli, tmp_path):
    out = tmp_path / "fio.json"
    job = subprocess.run(["fio", "--name=w", f"--directory={tmp_path}", "--rw=write", "--bs=4k", "--size=2m",
                          "--fdatasync=1", "--ioengine=psync", "--output-format=json+", f"--output={out}"],
                         capture_output=True, text=True, timeout=120)
    assert job.returncode == 0, job.stderr
    write = json.loads(out.read_text())["jobs"][0]["write"]
    lat = write["lat_ns"] if write["lat_ns"].get("bins") else write["clat_ns"]  # the latency the importer keeps
    db = str(tmp_path / "f.db")
    st = imported_stats(cli, db, "fio", out)
    assert (st["n"], st["min"], st["max"]) == (lat["N"], lat["min"], lat["max"])
    assert st["mean"] == pytest.approx(lat["mean"]) and st["stdev"] == pytest.approx(lat["stddev"])
    # The bins' values alone would give other figures: the headline is not computed from them.
    samples = Store(db).samples(Store(db).runs()[-1].id)["latency"]
    assert samples.size == lat["N"] and (samples.min(), samples.max()) != (lat["min"], lat["max"])


def test_nerves_csv_headline_is_the_csv_itself(cli, tmp_path):
    """nerves_rt_perf prints no summary: its CSV's own rows are the run (µs, stored in ns)."""
    rng = np.random.default_rng(7)
    times = rng.integers(4000, 9000, size=1000)
    f = tmp_path / "sum.csv"
    f.write_text("count,time,heap_size,minor_gcs\n" + "".join(f"{i},{t},233,0\n" for i, t in enumerate(times, 1)))
    st = imported_stats(cli, str(tmp_path / "n.db"), "nerves-csv", f, "--variant", "sum")
    assert (st["n"], st["min"], st["max"]) == (1000, int(times.min()) * 1000, int(times.max()) * 1000)
    assert st["mean"] == pytest.approx(times.mean() * 1000)


def test_histogram_import_counts_its_samples(cli, tmp_path):
    from pathlib import Path
    fixture = Path(__file__).parent / "fixtures" / "cyclictest" / "two_threads_h.txt"
    r = cli("import", "cyclictest", fixture, "--db", str(tmp_path / "t.db"))
    assert r.code == 0, r.err
    [run] = Store(str(tmp_path / "t.db")).runs()
    n = sum(h["n"] for h in run["trailer"]["histograms"].values())
    assert n > 0 and f"{n:,} samples in 2 histograms" in " ".join(r.out.split())
