"""End to end through the CLI: demo, run, runs, show, export, sysinfo, import, and the bad inputs. As an
unprivileged user: tests/test_cli_foundation_root.py."""

import csv
import io
import json
import os

import pytest

from rtscope.store import Store

pytestmark = pytest.mark.fast

SPEC = """
name = "tiny"
[[workload]]
name = "exec"
variants = ["sum", "nothing"]
runtime = "native"
[workload.params]
iterations = 50
pause_ms = 0
"""


def write_spec(tmp_path, text=SPEC, name="spec.toml"):
    p = tmp_path / name
    p.write_text(text)
    return p


def test_run_show_export_json(cli, db, tmp_path, rtprobe):
    r = cli("run", write_spec(tmp_path), "--db", db)
    assert r.code == 0, r.err
    runs = sorted(json.loads(cli("runs", "--db", db, "--json").out), key=lambda x: x["variant"] != "sum")
    assert [(x["variant"], x["n_samples"]) for x in runs] == [("sum", 50), ("nothing", 50)]  # order is randomised

    shown = json.loads(cli("show", runs[0]["id"], "--db", db, "--json").out)
    assert set(shown) == {"run", "settings", "stats", "resolution", "threads", "worst_case"}
    assert shown["worst_case"]["max_ns"] == shown["stats"]["max"] and not shown["worst_case"]["claimed"]  # 50 samples
    assert shown["threads"] == [] and shown["resolution"] is None  # one thread, raw samples
    assert set(shown["stats"]) == {"n", "min", "mean", "max", "var", "stdev", "p50", "p90", "p99", "p999", "p9999"}
    assert shown["stats"]["n"] == 50 and 0 < shown["stats"]["min"] <= shown["stats"]["p50"] <= shown["stats"]["max"]
    assert shown["run"]["environment"]["kernel_release"] == os.uname().release
    assert shown["run"]["params"] == {"n": 4000, "iterations": 50, "pause_ms": 0}

    text = cli("show", runs[0]["id"], "--db", db).out
    for col in ("AVG", "MAX", "VAR", "STDEV", "p99.99"):
        assert col in text

    rows = list(csv.reader(io.StringIO(cli("export", runs[0]["id"], "--db", db).out)))
    assert rows[0] == ["index", "duration", "cpu"] and len(rows) == 51
    us = list(csv.reader(io.StringIO(cli("export", runs[0]["id"], "--units", "us", "--db", db).out)))
    assert us[0] == ["count", "time", "cpu"] and us[1][0] == "1"
    assert float(us[1][1]) == pytest.approx(int(rows[1][1]) / 1000)

    out = tmp_path / "x.json"
    assert cli("export", runs[1]["id"], "--format", "json", "-o", out, "--db", db).code == 0
    data = json.loads(out.read_text())
    assert len(data["samples"]["duration"]) == 50 and data["run"]["variant"] == "nothing"


def test_json_outputs_are_pure_json(cli, db):
    assert json.loads(cli("runs", "--db", db, "--json").out) == []
    snap = json.loads(cli("sysinfo", "--json").out)
    assert "governors" in snap and "preemption" in snap and isinstance(snap["warnings"], list)


@pytest.mark.parametrize("block, message", [
    ('name = "exce"\nvariants = ["sum"]', "unknown workload 'exce'.*valid workloads: exec"),
    ('name = "exec"\nvariants = ["summ"]', "unknown exec variant 'summ'.*valid variants: sum, fib, sleep, nothing"),
    ('name = "exec"\nvariants = ["sum"]\n[workload.params]\niterations = 0', "iterations.*must be >= 1"),
    ('name = "exec"\nvariants = ["sum"]\n[workload.params]\niterations = -5', "iterations.*must be >= 1"),
    ('name = "exec"\nvariants = ["sum"]\n[workload.settings]\ngovernr = "x"', "unknown setting.*'governr'.*valid"),
    ('name = "exec"\nvariants = ["sum"]\n[workload.settings]\nrt_priority = 100', "rt_priority.*must be <= 99"),
])
def test_bad_spec_is_refused_and_nothing_written(cli, tmp_path, block, message):
    db = tmp_path / "never.db"
    r = cli("run", write_spec(tmp_path, f"[[workload]]\n{block}\n"), "--db", db)
    assert r.code == 2
    import re
    assert re.search(message, " ".join(r.err.split())), r.err
    assert not db.exists()


def test_unwritable_store_path(cli, tmp_path, rtprobe):
    r = cli("run", write_spec(tmp_path), "--db", tmp_path / "no" / "such" / "dir.db")
    assert r.code == 2 and "does not exist" in r.err
    r = cli("runs", "--db", tmp_path)
    assert r.code == 2 and "is a directory" in r.err


def test_corrupt_and_truncated_files_are_not_imported(cli, db, make_samplefile, tmp_path):
    good = make_samplefile([1, 2, 3])
    bad = tmp_path / "bad.rts"
    bad.write_bytes(good.read_bytes()[:-5])
    r = cli("import", "rts", good, bad, "--db", db)
    assert r.code == 2 and "truncated" in r.err
    assert Store(db).runs() == []  # all or nothing: the good file was not stored either
    assert cli("import", "rts", good, "--db", db, "--set", "board=rpi3").code == 0
    assert Store(db).runs()[0]["settings"] == {"board": "rpi3"}
    r = cli("import", "cyclictestt", good, "--db", db)
    assert r.code == 2 and "valid kinds" in r.err


def test_nerves_csv_import(cli, db, tmp_path):
    f = tmp_path / "sum.csv"
    f.write_text("count,time,heap_size,minor_gcs\n1,4990,233,0\n2,5715,376,1\n")
    assert cli("import", "nerves-csv", f, "--db", db).code == 2  # no --variant
    r = cli("import", "nerves-csv", f, "--variant", "sum", "--db", db)
    assert r.code == 0, r.err
    run = Store(db).runs()[0]
    assert run["runtime"] == "beam" and run["n_samples"] == 2
    assert Store(db).samples(run.id)["duration"].tolist() == [4_990_000, 5_715_000]


def test_unknown_run_and_command(cli, db):
    r = cli("show", "99", "--db", db)
    assert r.code == 2 and "no run 99" in r.err
    assert cli("frobnicate").code == 2


def test_workload_rules_are_checked_before_running(cli, tmp_path):
    db = tmp_path / "never.db"
    spec = write_spec(tmp_path, '[[workload]]\nname = "exec"\nvariants = ["nothing"]\n[workload.params]\nn = 3\n')
    r = cli("run", spec, "--db", db)
    assert r.code == 2 and "parameter n does not apply to exec nothing" in " ".join(r.err.split())
    assert not db.exists()


def test_written_files_get_normal_permissions(cli, db, make_samplefile, tmp_path):
    """Temp-and-rename writes must not leave mkstemp's 0600 on files meant to be shared."""
    old = os.umask(0o022)
    try:
        sample = make_samplefile([1, 2, 3])
        assert cli("import", "rts", sample, "--db", db).code == 0
        out = tmp_path / "x.csv"
        assert cli("export", "1", "-o", out, "--db", db).code == 0
    finally:
        os.umask(old)
    assert oct(sample.stat().st_mode & 0o777) == oct(0o644)
    assert oct(out.stat().st_mode & 0o777) == oct(0o644)
    assert [p.name for p in tmp_path.iterdir() if p.name.startswith(".")] == []


@pytest.mark.parametrize("width", [80, 60])
def test_tables_never_cut_a_figure(width, clean_targets):
    """specs/kernels.toml's result table (its real cell names, made short as `rtscope run` makes them) and a
    run's full statistics at 80 and 60 columns: every figure and header word shows whole; labels fold."""
    from rich.console import Console

    from rtscope.analysis.results import DISPLAY, display_unit, fmt
    from rtscope.cli.run import DEMO_COLUMNS, short_labels
    from rtscope.cli.common import stats_table
    from rtscope.experiment.spec import load
    from rtscope.paths import repo_file

    cells = [c.key for c in load(repo_file("specs", "kernels.toml")).cells]
    labels, shared = short_labels(cells)
    st = {"n": 120000, "min": 1520, "mean": 281345.6, "max": 12345678, "var": 2.81e12, "stdev": 1676321.0,
          "p50": 250311.0, "p90": 900123.0, "p99": 9876543.0, "p999": 11000000.0, "p9999": 12000000.0}
    rows = [(labels[c] + " ×2", st) for c in cells]
    _, scale = display_unit("ns")
    for keys in (DEMO_COLUMNS, DISPLAY):
        out = io.StringIO()
        Console(file=out, width=width).print(stats_table(f"kernels: {shared}", rows, "ns", keys, width=width))
        text = out.getvalue()
        assert "…" not in text and max(len(line) for line in text.splitlines()) <= width
        for key, head in keys:
            assert fmt(key, st[key], scale) in text and head in text
