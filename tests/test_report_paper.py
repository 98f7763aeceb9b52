"""The paper's view in `rtscope report` of a study's experiment (report/paper_view.py): the study's own table with the
published figures beside the measured ones, then its claims with their verdicts; a report of runs of no study
unchanged. Synthetic stores: a shipped spec's experiment recorded as `rtscope run` records it, its cells' runs
written as sample files (no probes)."""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pytest

from report_fixtures import ENV, add_run
from rtscope import samplefile
from rtscope.experiment import execute
from rtscope.experiment.spec import load, parse
from rtscope.paths import repo_file
from rtscope.samplefile import Column
from rtscope.store import Store

pytestmark = pytest.mark.fast


def study_store(tmp: Path, study: str, pick, columns, reps: int = 4) -> str:
    """An experiment of specs/STUDY.toml (quick scale) whose picked cells each have `reps` runs; pick(request)
    -> None (not run) or a function rep -> {column: values}."""
    db = str(tmp / f"{study}.db")
    store = Store(db)
    path = repo_file("specs", f"{study}.toml")
    spec = load(path, "quick")
    exp = execute.start(store, spec, execute.plan(spec, 1), 1, str(path))
    for cell in spec.cells:
        make = pick(cell.request)
        if make is None:
            continue
        req = cell.request
        for rep in range(reps):
            data = make(rep)
            header = samplefile.make_header(req.workload, req.variant, req.runtime, "test", "0",
                                            "2026-01-01T00:00:00Z", columns, dict(req.settings), dict(req.params))
            f = tmp / f"{cell.key.replace('/', '_')}-{rep}.rts"
            samplefile.write(f, header, data, {"finished_at": "2026-01-01T00:00:01Z"})
            store.add_run(samplefile.read(f), ENV, experiment_id=exp.id, cell=cell.key, repetition=rep)
    return db


def nerves(req):
    """exec sum and fib on the BEAM: fullsweep_after 0 raises sum's mean by 10 %; the rest as the default."""
    s = req.settings
    if req.runtime != "beam" or req.variant not in ("sum", "fib") or "governor" in s:
        return None
    mean = 4.99e6 * (1.10 if s.get("fullsweep_after") == 0 and req.variant == "sum" else 1.0)
    seed = abs(hash((req.variant, tuple(sorted(s.items())))))

    def make(rep):
        rng = np.random.default_rng([seed % 2**32, rep])
        return {"time": (mean * (1 + rng.normal(0, 0.005)) + rng.normal(0, 50_000, 300)).astype(np.int64)}
    return make


def tasks(req):
    """tasks memory: cbtask 200 B and std_thread 8 KiB per task (native), Erlang processes 2,800 B and callback
    threads 1,400 B (BEAM)."""
    if req.variant != "memory":
        return None
    per = {"cbtask": 200, "pthread": 8192, "std_thread": 8192, "erlang_process": 2800, "callback_thread": 1400}
    slope = per[req.settings["model"]]
    counts = np.array([1, 10, 100, 1000, 2000, 5000])

    def make(rep):
        rng = np.random.default_rng([slope, rep])
        return {"bytes": (1_000_000 + slope * counts + rng.normal(0, 2000, len(counts))).astype(np.int64),
                "tasks": counts}
    return make


@pytest.fixture(scope="module")
def nerves_db(tmp_path_factory):
    return study_store(tmp_path_factory.mktemp("nerves"), "nerves-rt", nerves, [Column("time", "ns", "i64")])


@pytest.fixture(scope="module")
def tasks_db(tmp_path_factory):
    return study_store(tmp_path_factory.mktemp("tasks"), "tasks", tasks,
                       [Column("bytes", "bytes", "i64"), Column("tasks", "count", "i64")], reps=3)


def paper_part(html: str) -> str:
    start = html.index('<h2 id="paper">')
    return html[start:html.index('<h2 id="machines">')]


def report(cli, db, tmp_path, *args) -> str:
    out = tmp_path / "r.html"
    r = cli("report", "--db", db, "-o", str(out), *args)
    assert r.code == 0, r.err
    return out.read_text()


def test_nerves_rt_opens_with_its_stats_table_and_claims(cli, nerves_db, tmp_path):
    html = report(cli, nerves_db, tmp_path, "--experiment", "nerves-rt")
    assert html.index('<h2 id="paper">') < html.index('<h2 id="machines">')    # the report opens with it
    part = paper_part(html)
    assert "The study's view: nerves-rt" in part and "000 Tables 2, 4, 5, 6 and 7" in part
    for head in ("AVG (µs)", "MAX (µs)", "VAR (µs²)", "STDEV (µs)"):
        assert head in part
    # sum at fullsweep_after 0: measured ≈ 5,489 µs beside the paper's 5,205; its VAR beside 3,760 µs²
    row = re.search(r"<tr><td class=\"l\">sum fullsweep_after=0 .*?</tr>", part, re.S)
    assert row, part[:3000]
    assert '<span class="pub">(5,205)</span>' in row.group(0) and '<span class="pub">(3,760)</span>' in row.group(0)
    measured = float(re.search(r"<td>([\d,]+) <span class=\"pub\">\(5,205\)", row.group(0)).group(1).replace(",", ""))
    assert 5400 < measured < 5600
    # the claims: every claim of the spec, with its verdict; sum's mean raised by 10 % over 4 runs a side holds
    claims = part[part.index('<h3 id="claims">'):]
    for claim in load(repo_file("specs", "nerves-rt.toml")).claims:
        assert f"<b>{claim.id}</b>" in claims
    mean_row = re.search(r"<b>fullsweep-sum-mean</b>.*?</tr>", claims, re.S).group(0)
    assert "4990 → 5205 us" in mean_row and ">holds" in mean_row
    same_row = re.search(r"<b>fullsweep-fib-same</b>.*?</tr>", claims, re.S).group(0)
    assert "holds" in same_row or "undecided" in same_row
    assert "not measurable here" in re.search(r"<b>governor-sum-mean</b>.*?</tr>", claims, re.S).group(0) or \
        "no run of the" in claims


def test_tasks_opens_with_memory_per_task_and_fit(cli, tasks_db, tmp_path):
    part = paper_part(report(cli, tasks_db, tmp_path))
    assert "memory per task (B/task)" in part and "r²" in part
    row = re.search(r"<tr><td class=\"l\">[^<]*cbtask.*?</tr>", part, re.S).group(0)
    assert '<span class="pub">(204)</span>' in row and '<span class="pub">(0.8396)</span>' in row
    assert re.search(r"<td>(19\d|20\d)(\.\d+)? <span class=\"pub\">\(204\)", row), row
    claims = part[part.index('<h3 id="claims">'):]
    z = re.search(r"<b>zackernel-vs-thread</b>.*?</tr>", claims, re.S).group(0)
    assert ">holds" in z and "546000 → 204 B" in z
    half = re.search(r"<b>callback-thread-half-of-process</b>.*?</tr>", claims, re.S).group(0)
    assert ">holds" in half and "×0." in half


def test_a_report_of_no_study_is_unchanged(cli, tmp_path):
    db = str(tmp_path / "plain.db")
    store = Store(db)
    rng = np.random.default_rng(3)
    for fs in (0, 65535):
        for _ in range(2):
            add_run(store, tmp_path, (5e6 + rng.normal(0, 5e4, 200)).astype(np.int64), runtime="beam",
                    settings={"fullsweep_after": fs})
    html = report(cli, db, tmp_path)
    assert 'id="paper"' not in html and 'id="claims"' not in html and "published" not in html.lower()


def test_bad_paper_tables_are_errors_with_their_line(tmp_path):
    text = repo_file("specs", "tasks.toml").read_text()
    for extra, message in (
            ('\n[[paper.published]]\nwhere = { variant = "memory", model = "cbtask" }\nslope = 3\n', "unknown key 'slope'"),
            ('\n[[paper.published]]\nwhere = { variant = "memory" }\nr = 0.9\n', "matches 5 configurations"),
            ('\n[[paper.published]]\nwhere = { variant = "memory", model = "cbtask" }\nmean = 3\nunit = "furlong"\n',
             "unknown unit 'furlong'")):
        spec = parse_problems(text + extra)
        assert any(message in p.message and p.line for p in spec), (message, spec)
    bad_layout = text.replace('layout = "tasks"', 'layout = "pie"')
    assert any("unknown layout 'pie'" in p.message and "benchee" in p.message for p in parse_problems(bad_layout))


def parse_problems(text: str):
    from rtscope.experiment.spec import analyse
    return analyse(text, "t.toml", "quick").problems


def test_every_shipped_study_has_its_layout():
    layouts = {s: load(repo_file("specs", f"{s}.toml")).paper.layout
               for s in ("nerves-rt", "kernels", "kernel-latency", "msgq", "storage", "tasks")}
    assert layouts == {"nerves-rt": "stats", "kernels": "latency", "kernel-latency": "latency", "msgq": "benchee",
                       "storage": "storage", "tasks": "tasks"}
    assert parse is not None
