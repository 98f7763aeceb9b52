"""`rtscope tasks-table`: the study's table, fits and figure from stored tasks runs (made here as sample files)."""

import json

import numpy as np
import pytest

from rtscope import samplefile

pytestmark = pytest.mark.fast

COUNTS = [1, 10, 100, 1000, 2000, 5000]


def memory_file(path, model, runtime, per_task, fixed=0, counts=COUNTS, noise=None, primary="bytes"):
    other = "rss_bytes" if primary == "bytes" else "bytes"
    cols = [samplefile.Column(primary, "bytes", "i64"), samplefile.Column("tasks", "count", "i64"),
            samplefile.Column(other, "bytes", "i64")]
    header = samplefile.make_header("tasks", "memory", runtime, "test", "0", "2026-01-01T00:00:00Z", cols,
                                    {"model": model}, {"counts": ",".join(map(str, counts))})
    tasks = np.array(counts)
    exact = fixed + per_task * tasks
    values = exact + (noise if noise is not None else 0)
    samplefile.write(path, header, {primary: values, "tasks": tasks, other: (tasks // 1000) * 4096}, {})
    return path


def switch_file(path, model, runtime, ns):
    cols = [samplefile.Column("ns_per_switch", "ns", "f64"), samplefile.Column("switches", "count", "i64")]
    header = samplefile.make_header("tasks", "switch", runtime, "test", "0", "2026-01-01T00:00:00Z", cols,
                                    {"model": model}, {"iterations": len(ns)})
    samplefile.write(path, header, {"ns_per_switch": np.asarray(ns, float), "switches": np.full(len(ns), 2000)}, {})
    return path


@pytest.fixture
def stored(cli, db, tmp_path):
    files = [
        memory_file(tmp_path / "a.rts", "cbtask", "native", 56, fixed=4096),
        memory_file(tmp_path / "b.rts", "pthread", "native", 10_000),
        memory_file(tmp_path / "c.rts", "callback_thread", "beam", 130, noise=np.array([0, 50, -50, 500, -500, 0])),
        memory_file(tmp_path / "d.rts", "callback_thread", "beam", 130, noise=np.array([0, -50, 50, -500, 500, 0])),
        switch_file(tmp_path / "e.rts", "erlang_process", "beam", np.arange(1, 101) * 10.0),
    ]
    r = cli("import", "rts", *files, "--db", db)
    assert r.code == 0, r.err
    return db


def test_json_table_and_fits(cli, stored):
    r = cli("tasks-table", "--db", stored, "--json")
    assert r.code == 0, r.err
    got = json.loads(r.out)
    assert got["column"] == "bytes" and got["unit"] == "bytes"
    by_label = {s["label"]: s for s in got["memory"]}
    assert set(by_label) == {"cbtask (native)", "pthread (native)", "callback_thread (beam)"}
    cb = by_label["cbtask (native)"]
    assert cb["fit"]["slope"] == pytest.approx(56) and cb["fit"]["intercept"] == pytest.approx(4096)
    assert cb["fit"]["r2"] == pytest.approx(1) and cb["by_count"]["1000"] == 4096 + 56_000
    # Two runs of one model: one series, every point in the fit, the table shows the median.
    two = by_label["callback_thread (beam)"]
    assert two["runs"] == [3, 4] and len(two["points"]) == 12 and two["fit"]["n"] == 12
    assert two["by_count"]["1000"] == 130_000 and two["fit"]["slope"] == pytest.approx(130)
    assert 0.99 < two["fit"]["r2"] < 1
    [sw] = got["switch"]
    assert sw["label"] == "erlang_process (beam)" and sw["n"] == 100
    assert sw["p50"] == pytest.approx(505) and sw["p99"] == pytest.approx(990.1)


def test_text_output_has_the_study_table(cli, stored):
    r = cli("tasks-table", "--db", stored)
    assert r.code == 0, r.err
    out = r.out
    for text in ("tasks", "cbtask (native)", "callback_thread", "5,000", "60,096", "slope", "r²", "56.0",
                 "switch cost", "erlang_process (beam)"):
        assert text in out, text


def test_other_column_and_run_selection(cli, stored):
    got = json.loads(cli("tasks-table", "1", "2", "--column", "rss_bytes", "--db", stored, "--json").out)
    assert [s["label"] for s in got["memory"]] == ["cbtask (native)", "pthread (native)"]
    assert got["column"] == "rss_bytes" and got["switch"] == []
    assert got["memory"][0]["by_count"]["5000"] == 5 * 4096


def test_figure_png_and_svg(cli, stored, tmp_path):
    for name in ("tasks.png", "tasks.svg"):
        out = tmp_path / name
        r = cli("tasks-table", "--db", stored, "--figure", out)
        assert r.code == 0, r.err
        assert out.stat().st_size > 1000
    assert (tmp_path / "tasks.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    svg = (tmp_path / "tasks.svg").read_text()
    assert "<svg" in svg and "cbtask (native): 56 bytes/task" in svg
    log = tmp_path / "log.png"
    assert cli("tasks-table", "--db", stored, "--figure", log, "--log").code == 0 and log.exists()


@pytest.mark.parametrize("args, message", [
    (["--figure", "x.gif"], "unknown file type '.gif'; valid: .png, .svg, .pdf"),
    (["--figure", "/nonexistent/dir/x.png"], "does not exist"),
    (["--column", "heap"], "has no column 'heap'; its columns: bytes, tasks, rss_bytes"),
    (["99"], "no run 99"),
    (["--experiment", "nope"], "no experiment 'nope'"),
])
def test_bad_input_exits_2(cli, stored, args, message):
    r = cli("tasks-table", "--db", stored, *args)
    assert r.code == 2
    assert message in r.err.replace("\n", "")


def test_runs_of_other_workloads_are_refused(cli, db, make_samplefile):
    assert cli("import", "rts", make_samplefile([1, 2, 3]), "--db", db).code == 0
    r = cli("tasks-table", "1", "--db", db)
    assert r.code == 2 and "tasks" in r.err


def test_a_single_count_has_no_fit_but_still_a_row(cli, db, tmp_path):
    f = memory_file(tmp_path / "one.rts", "cbtask", "native", 56, counts=[100])
    assert cli("import", "rts", f, "--db", db).code == 0
    got = json.loads(cli("tasks-table", "--db", db, "--json").out)
    [s] = got["memory"]
    assert s["fit"] is None and "at least 2 points" in s["fit_problem"] and s["by_count"] == {"100": 5600}
    r = cli("tasks-table", "--db", db)
    assert r.code == 0 and "no fit for cbtask (native)" in r.out.replace("\n", " ")


def test_runs_with_different_primary_columns(cli, db, tmp_path):
    """taskmem's primary column is rss_bytes, the BEAM harness's bytes: each series keeps its own."""
    files = [memory_file(tmp_path / "n.rts", "pthread", "native", 8192, primary="rss_bytes"),
             memory_file(tmp_path / "b.rts", "erlang_process", "beam", 2600)]
    assert cli("import", "rts", *files, "--db", db).code == 0
    got = json.loads(cli("tasks-table", "--db", db, "--json").out)
    assert got["column"] is None
    assert [(s["label"], s["column"], round(s["fit"]["slope"])) for s in got["memory"]] == [
        ("pthread (native)", "rss_bytes", 8192), ("erlang_process (beam)", "bytes", 2600)]
    text = cli("tasks-table", "--db", db).out.replace("\n", " ")
    assert "each run's primary column" in text and "pthread (native) rss_bytes" in text
    # One column for all: both runs have rss_bytes.
    got = json.loads(cli("tasks-table", "--db", db, "--column", "rss_bytes", "--json").out)
    assert got["column"] == "rss_bytes" and {s["column"] for s in got["memory"]} == {"rss_bytes"}
