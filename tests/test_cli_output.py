"""What the commands print, as a new user sees it: on an 80-column terminal and piped (issue 31).

Every command that prints a table runs in a fresh process, once with stdout on a pseudo-terminal with
COLUMNS=80 and once piped (with COLUMNS=80 too): no value is ever cut (no "…"), every stored value the command
shows is there whole (compared with whitespace removed, since a terminal folds), no unit is missing from a
header. The runs are real: a spec without seed, baseline or target, run in the default store of its directory;
`run` and `demo` end with the experiment and the next commands, which are then pasted and run. The rule in code
(every table is one that never cuts): tests/test_cli_output_units.py."""

from __future__ import annotations

import functools
import json
import os
import re
import shlex
from dataclasses import dataclass, field
from pathlib import Path

import pytest

import culprit
from spec_texts import native_tune
from terminal import on_terminal, piped
from rtscope.cli.common import settings_text
from rtscope.paths import repo_file
from rtscope.store import Store

pytestmark = pytest.mark.real

CPUS = sorted(os.sched_getaffinity(0))
TRACING = culprit.tracing_unavailable()

# Two configurations of exec (a setting axis) and a timer block; no seed, baseline or target: the defaults.
SPEC = """name = "tables"

[[workload]]
name = "exec"
variants = ["sum"]
runtime = "native"
[workload.params]
iterations = 30
pause_ms = 0
[workload.settings]
mlock = [false, true]

[[workload]]
name = "timer"
variants = ["absolute"]
runtime = "native"
[workload.params]
loops = 200
interval_us = 1000
"""

ONE_CELL = """name = "one-cell"

[[workload]]
name = "exec"
variants = ["sum"]
runtime = "native"
[workload.params]
iterations = 20
pause_ms = 0
"""

TUNE = native_tune("tables-tune", "iterations = 20, pause_ms = 0", "seed = 7")

EXPLAIN = f"""name = "explained"

[[workload]]
name = "timer"
variants = ["absolute"]
runtime = "native"
[workload.params]
loops = 1000
interval_us = 1000
[workload.settings]
explain = 3
cpu = {CPUS[-1]}
rt_priority = 80
"""


RUNNERS = {"terminal": on_terminal, "piped": piped}


def squeezed(text: str) -> str:
    return re.sub(r"\s+", "", text)


def shown_whole(value: str, text: str) -> bool:
    """`value` in `text` as a terminal shows it: on one line, or folded or wrapped in a table's cell (its pieces
    on consecutive lines, each starting at the cell's column), or, whitespace removed, in the text."""
    if squeezed(value) in squeezed(text):
        return True
    lines = text.splitlines()

    @functools.cache
    def below(i: int, x: int, rest: str) -> bool:  # can `rest` be read from line i on, at column x?
        rest = rest.lstrip()
        if not rest:
            return True
        if i >= len(lines):
            return False
        line, k = lines[i], 0
        while x + k < len(line) and k < len(rest) and line[x + k] == rest[k]:
            k += 1
        return any(below(i + 1, x, rest[n:]) for n in range(k, 0, -1))

    return any(below(i, m.start(), value) for i, line in enumerate(lines)
               for m in re.finditer(re.escape(value[0]), line))


@dataclass
class Lab:
    cwd: Path
    experiment: int
    timer_run: int
    exec_run: int
    tune: int
    explained: int | None
    points: Path
    documents: dict = field(default_factory=dict)

    @property
    def store(self) -> Store:
        return Store(str(self.cwd / "rtscope.db"))


@pytest.fixture(scope="module")
def lab(tmp_path_factory) -> Lab:
    """A store made as a user makes one, in the default ./rtscope.db of a directory: a spec run, a tune, fio and
    tasks results imported, and (where the kernel can trace) a run explained, with a SCHED_FIFO 90 culprit."""
    from test_tasks_table import memory_file
    cwd = tmp_path_factory.mktemp("lab")
    (cwd / "tables.toml").write_text(SPEC)
    (cwd / "tune.toml").write_text(TUNE)
    (cwd / "explained.toml").write_text(EXPLAIN)
    r = piped(cwd, "run", "tables.toml")
    assert r.code == 0, r.err
    store = Store(str(cwd / "rtscope.db"))
    [(experiment, _)] = store.experiment_names()
    runs = store.runs(experiment_id=experiment)
    timer = next(x.id for x in runs if x.workload == "timer")
    exec_ = next(x.id for x in runs if x.workload == "exec" and x.settings.get("mlock"))
    r = piped(cwd, "tune", "tune.toml")
    assert r.code == 0, r.err
    tune = 1
    explained = None
    if TRACING is None:
        with culprit.culprit(CPUS[-1]):
            r = piped(cwd, "run", "explained.toml")
        assert r.code == 0, r.err
        explained = max(x.id for x in store.runs())
    tasks = [memory_file(cwd / f"tasks-{m}.rts", m, "native", per, fixed=4096)
             for m, per in (("pthread", 8192), ("cbtask", 256))]
    r = piped(cwd, "import", "rts", *tasks)
    assert r.code == 0, r.err
    r = piped(cwd, "import", "fio", repo_file("tests", "fixtures", "fio", "write_sync.json"))
    assert r.code == 0, r.err
    points = cwd / "points.csv"
    points.write_text("tasks,bytes\n1,12288\n10,86016\n100,823296\n1000,8196096\n")
    return Lab(cwd, experiment, timer, exec_, tune, explained, points)


def expected(lab: Lab, args: tuple) -> list[str]:
    """The stored values the command shows, each of which must appear whole."""
    cmd, store = args[0], lab.store

    def got(*a) -> dict | list:  # the command's --json, once for both ways of printing
        key = tuple(map(str, a))
        if key not in lab.documents:
            lab.documents[key] = json.loads(piped(lab.cwd, *a, "--json").out)
        return lab.documents[key]
    if cmd == "runs":
        return [v for r in store.runs() for v in (r.started_at, settings_text(r.settings), r.workload, r.variant)]
    if cmd == "show":
        run = store.get_run(int(args[1]))
        return [run.label, settings_text(run["settings"]), settings_text(run["params"]), "VAR (µs²)"]
    if cmd == "doctor":
        doc = got("doctor")
        return [p["path"] for p in doc["pieces"]] + [d["enables"] for d in doc["dependencies"]]
    if cmd == "specs":
        return [v for s in got("specs") for v in (s["name"], s["description"])] + [str(repo_file("specs"))]
    if cmd == "compare":
        doc = got(*args)
        return [c["label"] for c in doc["configurations"]]
    if cmd == "recommend":
        return [r["summary"] for r in got(*args)["recommendations"]]
    if cmd == "explain":
        doc = got(*args)
        return [c["priority"] for s in doc["samples"] for c in s["causes"] if c.get("priority")] + \
               [f"{c['name']}/{c['pid']}" for s in doc["samples"] for c in s["causes"] if c.get("pid") is not None]
    if cmd == "tune":
        doc = got(*args)
        return [r["verdict"] for r in doc["confirmation"]] + [f"{doc['runs_used']} runs"]
    if cmd == "histogram":
        return [f"run {i}" for i in args[1:]] + ["latency (µs)"]
    if cmd == "storage-table":
        return [c for t in got("storage-table") for c in t["columns"]]
    if cmd == "tasks-table":
        return [s["label"] for s in got("tasks-table")["memory"]]
    if cmd == "fit":
        doc = got(*args)
        return [f"{doc['slope']:,.2f}", "bytes per task"]
    raise AssertionError(cmd)


def tables(lab: Lab) -> list[tuple]:
    found = [("runs",), ("show", lab.exec_run), ("show", lab.timer_run), ("doctor",), ("specs",),
             ("compare", "--experiment", lab.experiment, "--baseline", "mlock=false"),
             ("recommend", "--experiment", lab.experiment, "--baseline", "mlock=false"),
             ("tune", "tune.toml", "--resume", lab.tune), ("histogram", lab.timer_run),
             ("storage-table",), ("tasks-table",), ("fit", lab.points)]
    return found + ([("explain", lab.explained)] if lab.explained is not None else [])


@pytest.mark.parametrize("how", RUNNERS)
def test_no_table_cuts_a_value(lab, how):
    """Every table at 80 columns, on a terminal and piped: no "…", every value whole, every unit in its header;
    piped, a value is never folded (each row on one line)."""
    problems = []
    for args in tables(lab):
        r = RUNNERS[how](lab.cwd, *args)
        what = f"rtscope {' '.join(map(str, args))} ({how})"
        if r.code != 0:
            problems.append(f"{what}: exit {r.code}: {r.err[-500:]}")
            continue
        if "…" in r.out:
            problems.append(f"{what}: cut: {[line for line in r.out.splitlines() if '…' in line][:3]}")
        if "(²)" in r.out or "()" in r.out:
            problems.append(f"{what}: a header without its unit")
        values = expected(lab, args)
        assert values, what  # the command shows something stored
        # a terminal folds a value in its cell; piped, every value is on one line, whole, but for compare's and
        # recommend's, laid out at $COLUMNS (issue 50: no line over 80 columns), wrapped between words
        wraps = how == "terminal" or args[0] in ("compare", "recommend")
        missing = [v for v in values if not (shown_whole(v, r.out) if wraps else v in r.out)]
        if missing:
            problems.append(f"{what}: not shown whole: {missing[:5]}")
        if how == "terminal":
            wide = [line for line in r.out.splitlines() if "│" in line and len(line) > 80]
            if wide:
                problems.append(f"{what}: table wider than the terminal: {wide[:2]}")
    assert not problems, "\n".join(problems)


def test_show_gives_the_variance_its_unit(lab):
    r = piped(lab.cwd, "show", lab.exec_run)
    assert r.code == 0, r.err
    [var] = [line for line in r.out.splitlines() if "VAR" in line]
    assert "VAR (µs²)" in var, var


def next_commands(out: str) -> list[str]:
    lines = out.splitlines()
    assert "next:" in lines, out
    return [line.strip() for line in lines[lines.index("next:") + 1:] if line.startswith("  rtscope ")]


@pytest.mark.parametrize("how", RUNNERS)
def test_run_ends_with_the_experiment_and_the_next_commands(lab, how):
    """`rtscope run` (no seed, no --db, no --target) names its experiment and prints show, compare with a
    baseline from the spec's own axis and report; pasted, each of them works."""
    r = RUNNERS[how](lab.cwd, "run", "tables.toml")
    assert r.code == 0, r.err
    exp_id = max(i for i, _ in lab.store.experiment_names())
    runs = lab.store.runs(experiment_id=exp_id)
    assert f"experiment {exp_id} (tables): {len(runs)} runs stored" in " ".join(r.out.split())
    commands = next_commands(r.out)
    first = min(x.id for x in runs)
    assert commands == [f"rtscope show {first}", f"rtscope compare --experiment {exp_id} --baseline mlock=false",
                        f"rtscope report --experiment {exp_id} -o report.html"], r.out
    for line in commands:
        done = piped(lab.cwd, *shlex.split(line)[1:])
        assert done.code == 0, (line, done.err)
    compared = json.loads(piped(lab.cwd, *shlex.split(commands[1])[1:], "--json").out)
    assert any(c["is_baseline"] for c in compared["configurations"])
    assert [(k["configuration"], k["baseline"]) for k in compared["comparisons"]] == [
        ("exec sum duration mlock=true", "exec sum duration mlock=false")]
    assert (lab.cwd / "report.html").stat().st_size > 0
    assert "can test nothing" in " ".join(r.out.split())     # one run a configuration: says so, and the fix


def test_one_configuration_gets_no_compare_line_and_db_is_kept(lab, tmp_path):
    (tmp_path / "one.toml").write_text(ONE_CELL)
    db = tmp_path / "other store.db"
    r = piped(tmp_path, "run", "one.toml", "--db", db)
    assert r.code == 0, r.err
    [(exp_id, _)] = Store(str(db)).experiment_names()
    commands = next_commands(r.out)
    on = f"--db {shlex.quote(str(db))}"
    assert commands == [f"rtscope show 1 {on}", f"rtscope report --experiment {exp_id} -o report.html {on}"], r.out
    for line in commands:
        assert piped(tmp_path, *shlex.split(line)[1:]).code == 0, line


@pytest.mark.parametrize("how", RUNNERS)
def test_demo_table_whole_and_the_next_commands(lab, how, tmp_path):
    """`rtscope demo` in a fresh directory: its table whole at 80 columns and piped, then the experiment and the
    next commands (show, compare --baseline runtime=native: the demo's axis, report), each of which works."""
    r = RUNNERS[how](tmp_path, "demo")
    assert r.code == 0, r.err
    assert "…" not in r.out and "(µs²)" in r.out and "(²)" not in r.out, r.out
    store = Store(str(tmp_path / "rtscope.db"))
    assert "rtscope demo (sqlite:///rtscope.db)" in r.out
    [(exp_id, name)] = store.experiment_names()
    assert f"experiment {exp_id} ({name}):" in r.out
    commands = next_commands(r.out)
    assert [c.split()[1] for c in commands] == ["show", "compare", "report"], r.out
    # the demo's axes: runtime (native and beam), else (no BEAM here: its runs skipped) the variant
    axis = "runtime=native" if len({x.runtime for x in store.runs()}) > 1 else "variant=sum"
    assert f"--experiment {exp_id} --baseline {axis}" in commands[1]
    for line in commands:
        assert piped(tmp_path, *shlex.split(line)[1:]).code == 0, line
    # one run a configuration: the note says compare tests nothing and how to get runs it can test
    assert "compare shows its values but can test nothing" in " ".join(r.out.split()), r.out
    for word in ("sum", "fib", "sleep", "AVG", "MAX", "VAR", "STDEV", "p99"):
        assert word in r.out
    runs = store.runs()
    assert {x["variant"] for x in runs} >= {"sum", "fib", "sleep"}
    sleep = next(x for x in runs if x["variant"] == "sleep" and x["runtime"] == "native")
    assert json.loads(piped(tmp_path, "show", str(sleep.id), "--json").out)["stats"]["min"] >= 5_000_000
    if how == "piped":  # the demo's report (once): plotly once, compressed, plots thinned, labels short, <= 1 MB
        assert piped(tmp_path, "report", "-o", "demo.html").code == 0
        page = (tmp_path / "demo.html").read_text()
        assert len(page.encode()) <= 1_000_000
        titles = [json.loads(m)["layout"]["title"]["text"] for m in
                  re.findall(r'<script type="application/json" id="plot-\d+-spec">(.*?)</script>', page, re.S)]
        assert titles and (axis == "variant=sum" or any("(beam)" in t for t in titles))
        # The BEAM's recorded defaults do not tell its configurations from the native ones: not in the labels.
        assert not any("elixir_version" in t or "fullsweep_after" in t for t in titles)
