"""What rtscope's output says and how (issue 50, "no stray output", "one unit vocabulary", "imports said as
imports"), at the CLI on the real tools' outputs in tests/fixtures: no Python warning reaches a user, one unit
and one word per verdict everywhere, counts in the right number, an imported histogram said as an import, the
progress display ended cleanly by Ctrl-C.

The CLI fixture makes any Python warning of show, tail, report, runs and import an error (conftest.py), so every
call here also checks that none reaches the user."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
import warnings
from datetime import datetime, timezone
from pathlib import Path

import numpy as np
import pytest

from rtscope import samplefile
from rtscope.analysis import tail_bound, tail_fit
from rtscope.store import Store
from terminal import on_terminal

pytestmark = pytest.mark.fast

FIXTURES = Path(__file__).parent / "fixtures"
CYCLICTEST_H = FIXTURES / "cyclictest" / "two_threads_h.txt"   # real -h output, 16,000 samples: the tail is fitted
# A unit as a word of its own: ` us`, `(us)`, `us)`; not `µs`, `bus`, `--set unit=us` in a command echoed.
US = re.compile(r"(?<![\w=µ])us\b")


def imported(cli, db: str, kind: str, path: Path) -> int:
    r = cli("import", kind, path, "--db", db)
    assert r.code == 0, r.err
    return Store(db).runs()[-1].id


# --- no Python warning ---------------------------------------------------------------------------------------

def test_histogram_imports_show_tail_and_report_without_a_python_warning(cli, tmp_path):
    """show, show --json, tail and report of real cyclictest and rtla histograms: no warning (the fixture makes
    one an error); the tail fit that printed scipy's `invalid value encountered in subtract` runs and gives a
    bounded interval."""
    db = str(tmp_path / "s.db")
    ids = [imported(cli, db, kind, FIXTURES / f) for kind, f in (
        ("cyclictest", "cyclictest/two_threads_h.txt"), ("cyclictest", "cyclictest/hist_H.txt"),
        ("cyclictest", "cyclictest/two_threads.json"), ("rtla", "rtla/timerlat_hist_us.txt"),
        ("rtla", "rtla/timerlat_hist_ns.txt"))]
    for run in ids:
        for args in (("show", run), ("show", run, "--json")):
            r = cli(*args, "--db", db)
            assert r.code == 0 and "Warning" not in r.out + r.err and ".py:" not in r.err, r.err
    r = cli("tail", ids[0], "--db", db, "--json")
    assert r.code == 0, r.err
    levels = json.loads(r.out)["levels"]
    assert levels and all(lv["ci95_ns"][1] is not None for lv in levels), levels   # was `38..unbounded`
    assert cli("tail", ids[0], "--db", db).code == 0
    r = cli("report", "--db", db, "-o", tmp_path / "r.html")
    assert r.code == 0 and "Warning" not in r.out + r.err, r.err


def test_a_bucket_holding_only_the_maximum_leaves_the_fit_possible():
    """The cause: cyclictest's maximum at the lower edge of its bucket makes the last bucket empty of censored
    values ([max, max]); 0 × log 0 made the likelihood impossible everywhere, and the optimiser subtracted inf."""
    text = CYCLICTEST_H.read_text()
    counts = [int(line.split()[1]) for line in text.splitlines() if re.match(r"^\d{6} ", line)]
    mx = int(re.search(r"^# Max Latencies: (\d+)", text, re.M).group(1))
    hist = {"counts": counts, "bucket_width": 1000, "min_value": 0, "overflow": 0, "n": sum(counts),
            "max": mx * 1000}
    ex = tail_fit.excesses_histogram(hist, 1600)
    assert ex.hi[-1] == ex.lo[-1] and ex.censored[-1] == 0            # the maximum's own bucket
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        fit = tail_fit.fit_gpd(ex, 0.9)
    assert np.isfinite(ex.loglik(fit.shape, fit.scale)[0]) and fit.scale > 0


@pytest.mark.parametrize("seed", range(6))
def test_a_fit_starts_inside_the_support(seed):
    """A tail whose moments suggest a bounded shape ending below the maximum (a mixture: a bulk and a far
    cluster) starts the optimiser where the likelihood is finite: no warning, a model or a refusal in words."""
    rng = np.random.default_rng(seed)
    n = 60_000
    x = np.concatenate([rng.normal(20, 2, n), rng.normal(80, 5, n // 50)]) * 1000
    width = 1000.0 * (1 + seed % 3)
    counts = np.bincount((x // width).astype(int).clip(0))
    hist = {"counts": counts.tolist(), "bucket_width": width, "min_value": 0, "overflow": 0, "n": int(x.size),
            "max": float(x.max())}
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        tail = tail_bound.analyse_histogram(hist, {"run": 1})
    assert tail.claimed or any(c.passed is False and c.why for c in tail.checks)


def test_a_warning_that_gets_through_is_said_in_rtscopes_words(monkeypatch, capsys, tmp_path):
    """The last resort: a warning no fix foresaw is one line of rtscope's (what, from which package), not a
    library's file and source line."""
    from rtscope.cli import main, show
    db = str(tmp_path / "s.db")
    path = tmp_path / "r.rts"
    samplefile.write(path, samplefile.make_header("exec", "sum", "native", "t", "0", "2026-01-01T00:00:00Z",
                                                  [samplefile.Column("duration", "ns", "i64")]),
                     {"duration": np.arange(1, 101) * 1000}, {})
    run = Store(db).add_run(samplefile.read(path), {"kernel_release": "6.1"})

    def odd(env):
        np.array([np.inf]) - np.array([np.inf])     # numpy: invalid value encountered in subtract
        return "machine"
    monkeypatch.setattr(show, "machine_text", odd)
    monkeypatch.setattr(sys, "argv", ["rtscope", "show", str(run), "--db", db])
    with pytest.raises(SystemExit) as done:
        main()
    assert done.value.code == 0
    err = capsys.readouterr().err
    assert "rtscope: warning: invalid value encountered in subtract (from test_words: rtscope did not " \
           "expect it" in " ".join(err.split()), err
    assert ".py:" not in err and "np.array" not in err and "RuntimeWarning" not in err


# --- one unit vocabulary ------------------------------------------------------------------------------------

def test_one_unit_and_one_word_in_every_output(cli, tmp_path):
    """A study with published figures in `us` (kernels: `unit = "us"` in the spec) judged and reported, and a
    histogram import's tail: µs everywhere, files named after what they hold, `not tested` the one spelling of
    that verdict, a count of one said in the singular."""
    from test_report_paper import KERNEL_COLUMNS, kernels, study_store
    db = study_store(tmp_path, "kernels", kernels, KERNEL_COLUMNS)
    one = imported(cli, db, "cyclictest", CYCLICTEST_H)
    junit, tables = tmp_path / "claims.xml", tmp_path / "tables"
    outputs = {
        "reproduce": cli("reproduce", "kernels", "--experiment", "kernels", "--db", db, "--junit", junit),
        "reproduce --json": cli("reproduce", "kernels", "--experiment", "kernels", "--db", db, "--json"),
        "compare": cli("compare", "--experiment", "kernels", "--baseline", "target=pi3-stock", "--db", db),
        "report": cli("report", "--experiment", "kernels", "--db", db, "-o", tmp_path / "r.html", "--tables",
                      tables),
        "report of one run": cli("report", "--run", one, "--db", db, "-o", tmp_path / "one.html"),
        "tail": cli("tail", one, "--db", db),
        "show": cli("show", one, "--db", db),
    }
    texts = {k: r.out + r.err for k, r in outputs.items()}
    texts |= {"junit": junit.read_text(), **{f.name: f.read_text() for f in tables.iterdir()}}
    html = (tmp_path / "r.html").read_text()
    texts["report's page"] = re.sub(r"<[^>]+>", " ", re.sub(r"<(script|style)\b.*?</\1>", "", html, flags=re.S))
    assert not re.search(r"\d us\b", html)                   # nor in its figures' data (the plots' script)
    for name, text in texts.items():
        assert not US.search(text), (name, text[max(0, US.search(text).start() - 200):][:400])
        assert "untested" not in text and not re.search(r"\b1 (runs|cells|claims|configurations)\b", text), name
        assert "n.s." not in text and "no significant change" not in text, name   # the verdict's one spelling
    assert "78 → 36 µs" in texts["reproduce"]                              # the published figures, in µs
    published = [c["published"] for c in json.loads(outputs["reproduce --json"].out)["claims"] if c["published"]]
    assert published and all(p.get("unit") != "us" for p in published)
    assert sorted(f.name for f in tables.iterdir() if f.name.startswith("statistics-")) == [
        f"statistics-microseconds.{e}" for e in ("csv", "md", "tex")]
    assert "(1 µs)" in texts["tail"] and "1000 ns" not in texts["tail"]    # the bucket of the histogram-only fit
    assert re.search(r"MB, 1 run\)", texts["report of one run"])
    # how the claims were tested: one text in reproduce, the report's page and its claims table
    from rtscope.analysis.claims import evidence_text
    for name in ("reproduce", "report's page", "claims-kernels.md"):
        text = " ".join(texts[name].split())
        assert evidence_text([]) in text and "Welch's" not in text, (name, text[:600])
    said = " ".join(texts["report of one run"].split())
    assert "run(s)" not in said and "histogram-only run: values from the histogram" in said, said


# --- imports said as imports --------------------------------------------------------------------------------

def test_an_imported_histogram_is_said_as_an_import(cli, tmp_path):
    """show at 80 columns: the tool's version not recorded, no warning about a board's state its file does not
    record, the start marked as the file's time, cyclictest's own figures named, every line within 80."""
    db = str(tmp_path / "s.db")
    hist = imported(cli, db, "cyclictest", FIXTURES / "cyclictest" / "hist_H.txt")
    shown = on_terminal(tmp_path, "show", hist, "--db", db)
    assert shown.code == 0, shown.err
    lines = shown.out.splitlines()
    assert lines[0] == f"run {hist}: timer absolute (cyclictest)  tool cyclictest, version not recorded"
    assert "unknown" not in shown.out and "isolated" not in shown.out
    mtime = datetime.fromtimestamp((FIXTURES / "cyclictest" / "hist_H.txt").stat().st_mtime, timezone.utc)
    started = mtime.isoformat(timespec="milliseconds").replace("+00:00", "Z")
    text = " ".join(shown.out.split())
    assert f"started {started} (the file's modification time: the tool records no start)" in text
    assert "cyclictest's own figures: n, MIN and MAX" in text and "AVG 9, 13 µs per thread" in text
    assert "latency in µs; percentiles:" in shown.out          # the title on a line of its own, not folded
    assert max(map(len, lines)) <= 80, max(lines, key=len)

    # cyclictest's JSON records its start and its kernel: no mark, the preemption warning (its own record)
    js = imported(cli, db, "cyclictest", FIXTURES / "cyclictest" / "two_threads.json")
    r = cli("show", js, "--db", db)
    assert "tool cyclictest 2.40" in r.out and "modification time" not in r.out
    assert "preemption model is PREEMPT_DYNAMIC" in r.out and "isolated" not in r.out

    document = json.loads(cli("show", hist, "--db", db, "--json").out)["run"]
    assert document["tool_version"] is None and document["tool_version_source"] == "not recorded"
    document = json.loads(cli("show", js, "--db", db, "--json").out)["run"]
    assert document["tool_version"] == "2.40" and document["tool_version_source"] is None

    rtla = imported(cli, db, "rtla", FIXTURES / "rtla" / "timerlat_hist_us.txt")
    said = cli("show", rtla, "--db", db).out     # what rtla's output says of itself: notes, not warnings
    assert "note: primary: timerlat's thread latency" in said and "note: rtla irq latency" in said
    assert "warning: rtla" not in said and "warning: primary" not in said
    rows = {row["id"]: row for row in json.loads(cli("runs", "--db", db, "--json").out)}
    assert rows[rtla]["started_at_source"] == "file modified" and not rows[rtla]["started_at"].startswith("1970")
    assert rows[js]["started_at_source"] is None and rows[js]["started_at"] == "2026-11-25T00:37:37.000Z"
    listed = cli("runs", "--db", db).out
    assert f"started of runs {hist}, {rtla}: the file's modification time" in " ".join(listed.split())


def test_a_start_never_recorded_is_null_not_1970(cli, tmp_path):
    """A run stored by an earlier rtscope with the epoch as its start (rtla, Xenomai imports): null in
    `runs --json`, said as not recorded."""
    db = str(tmp_path / "s.db")
    path = tmp_path / "r.rts"
    header = samplefile.make_header("timer", "absolute", "rtla", "rtla-timerlat", "unknown",
                                    "1970-01-01T00:00:00Z", [samplefile.Column("latency", "ns", "i64")])
    samplefile.write(path, header, {"latency": np.arange(1, 11) * 1000}, {})
    run = Store(db).add_run(samplefile.read(path), {})
    [row] = json.loads(cli("runs", "--db", db, "--json").out)
    assert row["started_at"] is None and row["started_at_source"] == "not recorded"
    assert f"started of run {run}: not recorded" in cli("runs", "--db", db).out


# --- the progress display and Ctrl-C ------------------------------------------------------------------------

def exec_spec(name: str, repetitions: int, iterations: int, pause_ms: int, more: str = "") -> str:
    """A spec of native exec sum: `repetitions` runs of `iterations` calls, and `more` parameters."""
    return (f'name = "{name}"\nrepetitions = {repetitions}\n[[workload]]\nname = "exec"\nvariants = ["sum"]\n'
            f'runtime = ["native"]\n[workload.params]\niterations = {iterations}\npause_ms = {pause_ms}\n{more}')


SPEC = exec_spec("interrupted", 30, 60, 5)


def test_ctrl_c_ends_the_progress_display_on_a_whole_line(tmp_path, rtprobe):
    """SIGINT while runs execute (stderr piped, 80 columns): the progress display's last state is one whole
    line, `stopped: N of 30 runs done`, no bar cut with `…`; the last line says how to resume."""
    spec = tmp_path / "s.toml"
    spec.write_text(SPEC)
    env = {**os.environ, "COLUMNS": "80"}
    env.pop("RTSCOPE_DB", None)
    proc = subprocess.Popen([str(Path(sys.executable).with_name("rtscope")), "run", spec, "--db", tmp_path / "s.db"],
                            cwd=tmp_path, env=env, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    try:
        err = []
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:                 # the first run stored: the display is running
            line = proc.stderr.readline()
            err.append(line)
            if line.startswith("run ") or not line:
                break
        proc.send_signal(signal.SIGINT)
        out, rest = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    lines = [x for x in ("".join(err) + rest).splitlines() if x.strip()]
    assert proc.returncode == 130, lines
    assert lines[-1].startswith("rtscope: error: interrupted: experiment 1 marked interrupted"), lines
    assert re.fullmatch(r"stopped: \d+ of 30 runs done", lines[-2]), lines
    assert not any("ETA" in x or "…" in x for x in lines), lines


# --- a parameter that reads like a sample count -------------------------------------------------------------

SIZES = exec_spec("sizes", 1, 30, 0, "n = [1000, 2000]\n")


def test_exec_size_is_never_a_bare_n_beside_the_sample_count(tmp_path, rtprobe):
    """exec's problem size `n` beside the column `n` (the sample count): `run`'s result table, `compare` and
    `report` name it `size n=` as every label does (issue 50, item 7); run's advice after one repetition is
    compare's (item 9)."""
    from terminal import piped
    (tmp_path / "sizes.toml").write_text(SIZES)
    db = str(tmp_path / "s.db")
    said = {"run": piped(tmp_path, "run", "sizes.toml", "--db", db)}
    assert said["run"].code == 0, said["run"].err
    said["compare"] = piped(tmp_path, "compare", "--experiment", "sizes", "--baseline", "n=1000", "--db", db)
    said["report"] = piped(tmp_path, "report", "--experiment", "sizes", "--db", db, "-o", tmp_path / "r.html",
                           "--tables", tmp_path / "tables")
    from rtscope.analysis.defaults import REPEAT_ADVICE     # one advice on repetitions: run's and compare's
    assert all(REPEAT_ADVICE in " ".join(said[k].out.split()) for k in ("run", "compare")), said["run"].out
    assert "repetitions = 5" not in said["run"].out
    rows = [x for x in said["run"].out.splitlines() if "=2000" in x]
    assert rows and all("size n=2000" in x for x in rows), said["run"].out
    html = (tmp_path / "r.html").read_text() + "".join(f.read_text() for f in (tmp_path / "tables").iterdir())
    assert said["report"].code == 0, said["report"].err
    for name, text in (("run", said["run"].out), ("compare", said["compare"].out), ("report", html)):
        assert not re.search(r"\bsize\n", text), (name, text)   # compare's prose wrapped at 80 keeps it whole
        assert "size n=2000" in text, (name, text)
        assert not re.search(r"(?<!size )\bn=2000", text), (name, re.search(r".{60}(?<!size )\bn=2000.{20}", text))
