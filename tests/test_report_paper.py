"""The paper's view in `rtscope report` of a study's experiment (report/paper_view.py): the study's own table with the
published figures beside the measured ones, then its claims with their verdicts, in each study's layout; `report
--tables` writes both as files; a report of runs of no study unchanged. Synthetic stores: a shipped spec's
experiment recorded as `rtscope run` records it, its cells' runs written as sample files (no probes) from a known
truth that the tests recompute the shown figures from."""

from __future__ import annotations

import csv
import re
import zlib
from pathlib import Path

import numpy as np
import pytest

from registries import definitions_forgotten
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
    -> None (not run) or a function rep -> {column: values} (or ({column: values}, trailer)); columns: the
    sample file's columns, or a function request -> them."""
    db = str(tmp / f"{study}.db")
    store = Store(db)
    path = repo_file("specs", f"{study}.toml")
    spec = quick_spec(study)
    exp = execute.start(store, spec, execute.plan(spec, 1), 1, str(path))
    for cell, rep, data, trailer in written(study, pick, reps):
        req = cell.request
        header = samplefile.make_header(req.workload, req.variant, req.runtime, "test", "0", "2026-01-01T00:00:00Z",
                                        columns(req) if callable(columns) else columns, dict(req.settings),
                                        dict(req.params))
        f = tmp / f"{cell.key.replace('/', '_').replace(' ', '_')}-{rep}.rts"
        samplefile.write(f, header, data, {"finished_at": "2026-01-01T00:00:01Z", **trailer})
        store.add_run(samplefile.read(f), ENV, experiment_id=exp.id, cell=cell.key, repetition=rep)
    return db


def quick_spec(study: str):
    """specs/STUDY.toml at its quick scale; its targets and environments are not left defined (a module's store
    is made before its tests: they would stay for every later test of the process)."""
    with definitions_forgotten():
        return load(repo_file("specs", f"{study}.toml"), "quick")


def written(study: str, pick, reps: int):
    """(spec cell, repetition, {column: values}, trailer) of every run study_store writes."""
    for cell in quick_spec(study).cells:
        make = pick(cell.request)
        for rep in range(reps if make else 0):
            made = make(rep)
            yield (cell, rep, *(made if isinstance(made, tuple) else (made, {})))


def values_of(study: str, pick, reps: int, match) -> list[np.ndarray]:
    """The primary values of each run study_store writes for the cells whose request `match` accepts."""
    return [next(iter(data.values())) for cell, _, data, _ in written(study, pick, reps) if match(cell.request)]


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


KERNEL_TRUTH = {"pi3-stock": (12_000, 3_000, 78_000), "pi3-rt": (12_500, 1_500, 36_000)}   # ns: mean, stdev, max


def kernels(req):
    """timer under load on the virtual Pi 3s: the stock kernel's latency 12 ± 3 µs with one sample of ~78 µs a run,
    PREEMPT_RT's 12.5 ± 1.5 µs with ~36 µs; rtscope's probe as cyclictest but 1 µs lower; idle and x86 not run."""
    s = req.settings
    if s["load"] != "cpu" or s["target"] not in KERNEL_TRUTH:
        return None
    mean, sd, top = KERNEL_TRUTH[s["target"]]
    mean -= 1000 if req.runtime == "native" else 0
    n = req.params["loops"]

    def make(rep):
        rng = np.random.default_rng([top, req.runtime == "native", rep])
        v = rng.normal(mean, sd, n).clip(5000)
        v[rng.integers(n)] = top + rng.normal(0, 1000)
        return {"latency": v.astype(np.int64)}
    return make


# ns per pmap call: off_heap 3 % faster (Small), 1.5 % slower (Medium), as published (Bigger); +hmqd as on_heap
MSGQ_TRUTH = {(1000, "on_heap"): 4.24e6, (1000, "off_heap"): 4.11e6, (10000, "on_heap"): 41.93e6,
              (10000, "off_heap"): 42.56e6, (100000, "on_heap"): 432.39e6, (100000, "off_heap"): 421.29e6,
              (100000, "+hmqd off_heap"): 432.39e6}


def msgq(req):
    """pmap calls at MSGQ_TRUTH's means: 0.2 % between runs, 1 % between calls; fan_in not run."""
    key = (req.params.get("elements"), req.settings.get("message_queue_data", req.settings.get("vm_flags")))
    if req.variant != "pmap" or key not in MSGQ_TRUTH:
        return None
    return _passes(MSGQ_TRUTH[key], 0.002, 0.01, req.params["iterations"], "duration", str(key))


# ns per pass over the 4 KB file: the container 5 % slower than the host for write+fsync; the VM slower for
# writes and faster for reads
STORAGE_TRUTH = {("write_sync", "local"): 2.0e6, ("write_sync", "pod"): 2.1e6, ("write_sync", "vm"): 8.0e6,
                 ("write", "local"): 13_000, ("write", "pod"): 15_000, ("write", "vm"): 25_000,
                 ("read", "local"): 1_600, ("read", "pod"): 4_800, ("read", "vm"): 1_400}
FIO_PASS = 2.05e6          # fio's write+fsync on the host: its job runtime / passes


def storage(req):
    """rtscope's passes over the 4 KB file in every environment (1 % between runs, 5 % between passes), and
    reads of the 16 MB file on the host (4,096 × the 4 KB pass); fio's 4 KB write+fsync on the host, its
    per-I/O latencies and the job's runtime and passes."""
    s, size = req.settings, req.params["size"]
    where = s.get("target", s.get("env"))
    key = (req.variant, where)
    if req.runtime == "fio":
        if key != ("write_sync", "local") or size != 4096:
            return None
        passes = req.params["repetitions"]

        def make(rep):
            rng = np.random.default_rng([passes, rep])
            data = {"latency": rng.normal(FIO_PASS, FIO_PASS * 0.05, passes).astype(np.int64)}
            return data, {"counters": {"passes": passes, "runtime_ns": int(FIO_PASS * passes)}}
        return make
    if size != 4096 and key != ("read", "local"):
        return None
    mean = STORAGE_TRUTH[key] * size / 4096
    return _passes(mean, 0.01, 0.05, req.params["repetitions"], "duration", f"{key}{size}")


def storage_columns(req):
    return [Column("latency" if req.runtime == "fio" else "duration", "ns", "i64")]


def _passes(mean: float, between: float, within: float, n: int, column: str, name: str):
    """rep -> n values of `column` about `mean` (relative spread `between` runs and `within` one), seeded by name."""
    def make(rep):
        rng = np.random.default_rng([zlib.crc32(name.encode()), rep])
        run_mean = mean * (1 + rng.normal(0, between))
        return {column: (run_mean * (1 + rng.normal(0, within, n))).astype(np.int64)}
    return make


KERNEL_COLUMNS = [Column("latency", "ns", "i64")]
MSGQ_COLUMNS = [Column("duration", "ns", "i64")]


@pytest.fixture(scope="module")
def nerves_db(tmp_path_factory):
    return study_store(tmp_path_factory.mktemp("nerves"), "nerves-rt", nerves, [Column("time", "ns", "i64")])


@pytest.fixture(scope="module")
def tasks_db(tmp_path_factory):
    return study_store(tmp_path_factory.mktemp("tasks"), "tasks", tasks,
                       [Column("bytes", "bytes", "i64"), Column("tasks", "count", "i64")], reps=3)


@pytest.fixture(scope="module")
def kernels_db(tmp_path_factory):
    return study_store(tmp_path_factory.mktemp("kernels"), "kernels", kernels, KERNEL_COLUMNS)


@pytest.fixture(scope="module")
def msgq_db(tmp_path_factory):
    return study_store(tmp_path_factory.mktemp("msgq"), "msgq", msgq, MSGQ_COLUMNS)


@pytest.fixture(scope="module")
def storage_db(tmp_path_factory):
    return study_store(tmp_path_factory.mktemp("storage"), "storage", storage, storage_columns, reps=3)


def paper_part(html: str) -> str:
    start = html.index('<h2 id="paper">')
    return html[start:html.index('<h2 id="machines">')]


def report(cli, db, tmp_path, *args) -> str:
    out = tmp_path / "r.html"
    r = cli("report", "--db", db, "-o", str(out), *args)
    assert r.code == 0, r.err
    return out.read_text()


def row_cells(part: str, label: str) -> list[tuple[str, str]]:
    """(measured, published) of each figure column of the paper table's row `label` ("" where none)."""
    row = re.search(rf'<tr><td class="l">{re.escape(label)}</td>.*?</tr>', part, re.S)
    assert row, (label, part[:3000])
    return re.findall(r'<td>([^<]*?)(?: <span class="pub">\(([^)]*)\)</span>)?</td>', row.group(0))


def shows(text: str, value: float) -> bool:
    """Whether `text` (4.24, 2.00 ms, ±1.01%, 4,096) is `value` rounded to its last shown digit."""
    number = text.split()[0].strip("±%").replace(",", "")
    return abs(float(number) - value) <= 0.5 * 10 ** -len(number.partition(".")[2]) * (1 + 1e-9)


def claim_verdicts(part: str) -> dict[str, str]:
    """Claim id -> its verdict, from the claims table."""
    claims = part[part.index('<h3 id="claims">'):]
    return dict(re.findall(r'<b>([\w-]+)</b>.*?<td class="l [\w-]+">([^<]+)', claims, re.S))


def claim_row(part: str, claim: str) -> str:
    return re.search(rf"<b>{claim}</b>.*?</tr>", part[part.index('<h3 id="claims">'):], re.S).group(0)


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
    assert "4990 → 5205 µs" in mean_row and ">holds" in mean_row
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


def test_kernels_opens_with_min_avg_max_above_the_histograms(cli, kernels_db, tmp_path):
    part = paper_part(report(cli, kernels_db, tmp_path, "--experiment", "kernels"))
    assert "The study's view: kernels" in part and "Linux 4.4.13 / 4.4.15-rt, cyclictest -p 90" in part
    table = part[:part.index('<h3 id="claims">')]
    assert "<th>min (µs)</th><th>avg (µs)</th><th>max (µs)</th>" in table
    # the study's rows (cyclictest under load on the virtual Pi 3s) first, each figure pooled over its 4 runs
    # beside the spec's [[paper.published]] figure; rtscope's probe's rows without published figures
    assert re.findall(r'<tr><td class="l">([^<]*)</td>', table) == [
        "(cyclictest) target=pi3-stock", "(cyclictest) target=pi3-rt", "(native) target=pi3-stock",
        "(native) target=pi3-rt"]
    published = {"pi3-stock": ["5", "12", "78"], "pi3-rt": ["7", "13", "36"]}
    for runtime in ("cyclictest", "native"):
        for target in KERNEL_TRUTH:
            v = np.concatenate(values_of("kernels", kernels, 4, lambda r, rt=runtime, t=target:
                                         r.runtime == rt and r.settings["target"] == t)) / 1000
            cells = row_cells(table, f"({runtime}) target={target}")
            assert [p for _, p in cells] == (published[target] if runtime == "cyclictest" else ["", "", ""])
            assert all(shows(m, x) for (m, _), x in zip(cells, (v.min(), v.mean(), v.max()))), (cells, v.mean())
    assert table.count('<div class="plot"') == 1 and "Overlaid latency histograms" in table   # below the table
    # the claims on that truth: max 78 -> 36 µs a run (ratio 0.46), means 4 % apart, stdev halved; no Xenomai
    assert claim_verdicts(part) == {"rt-max-half": "holds", "rt-mean-same": "holds", "rt-narrower": "holds",
                                    "xenomai-max-lowest": "not measurable here",
                                    "xenomai-mean-lowest": "not measurable here"}
    row = claim_row(part, "rt-max-half")
    base, cell = re.findall(r"<td>([\d.]+) → ([\d.]+) µs</td>", row)[-1]   # the measured: after the published
    for text, target in ((base, "pi3-stock"), (cell, "pi3-rt")):
        runs = values_of("kernels", kernels, 4, lambda r, t=target: r.runtime == "cyclictest" and
                         r.settings["target"] == t)
        assert shows(text, np.mean([r.max() for r in runs]) / 1000), (text, target)
    assert "78 → 36 µs" in row and "×0.4" in row
    assert "no Xenomai kernel here" in claim_row(part, "xenomai-max-lowest")


BENCHEE = ("ips", "mean", "deviation", "median", "p99")


def test_msgq_opens_with_benchees_table_and_claims(cli, msgq_db, tmp_path):
    part = paper_part(report(cli, msgq_db, tmp_path))
    table = part[:part.index('<h3 id="claims">')]
    assert "<th>ips</th><th>average (ms)</th><th>deviation</th><th>median (ms)</th><th>99th % (ms)</th>" in table
    spec = load(repo_file("specs", "msgq.toml"), "quick")
    for elements in (1000, 10000, 100000):
        for mode in ("on_heap", "off_heap"):
            v = np.concatenate(values_of("msgq", msgq, 4, lambda r, e=elements, m=mode: r.variant == "pmap" and
                                         r.params["elements"] == e and r.settings.get("message_queue_data") == m))
            measured = (1e9 / v.mean(), v.mean() / 1e6, 100 * v.std(ddof=1) / v.mean(), np.median(v) / 1e6,
                        np.percentile(v, 99) / 1e6)
            pub = {p.figure: p.value for p in spec.paper.published
                   if dict(p.items) == {"variant": "pmap", "elements": str(elements), "message_queue_data": mode}}
            cells = row_cells(table, f"message_queue_data={mode} elements={elements}")
            assert len(cells) == 5 and all(shows(m, x) for (m, _), x in zip(cells, measured)), (cells, measured)
            assert all(shows(p, pub[f]) for (_, p), f in zip(cells, BENCHEE)), (cells, pub)
    assert cells[2][1] == "±1.84%" and cells[0][1] == "2.37"           # Bigger off_heap's deviation and ips
    # the VM-wide switch: measured only, labelled by its setting (not "defaults"), below the study's rows
    last = re.findall(r'<tr><td class="l">([^<]*)</td>', table)[-1]
    assert last == "vm_flags=+hmqd off_heap elements=100000"
    assert all(p == "" for _, p in row_cells(table, last))
    # off_heap 3 % faster (Small) and as published (Bigger) hold the 1.01x-1.05x claim, 1.5 % slower (Medium)
    # contradicts it; +hmqd as fast as on_heap contradicts "lower": its effect is within the default smallest
    # effect of interest (5 %, no published figures)
    assert claim_verdicts(part) == {"off-heap-faster-small": "holds", "off-heap-faster-medium": "contradicted",
                                    "off-heap-faster-bigger": "holds", "vm-wide-off-heap-faster": "contradicted"}
    row = claim_row(part, "off-heap-faster-bigger")
    assert "432.39 → 421.29 ms" in row
    base, cell = re.findall(r"<td>([\d.]+) → ([\d.]+) ms</td>", row)[-1]       # measured, after published
    for text, mode in ((base, "on_heap"), (cell, "off_heap")):
        runs = values_of("msgq", msgq, 4, lambda r, m=mode: r.variant == "pmap" and r.params["elements"] == 100000
                         and r.settings.get("message_queue_data") == m)
        assert shows(text, np.mean([r.mean() for r in runs]) / 1e6), (text, mode)
    absent = claim_row(part, "vm-wide-off-heap-faster")
    assert "the effect here is at most" in absent and "smallest effect of interest" in absent


STORAGE_PUBLISHED = {"write_sync": ("2.35 ms", "2.61 ms", "10.86 ms"), "write": ("13.58 µs", "15.68 µs", "26.31 µs"),
                     "read": ("1.61 µs", "4.77 µs", "3.15 µs")}      # specs/storage.toml, 4 KB: local, pod, vm
NS = {"s": 1e9, "ms": 1e6, "µs": 1e3, "ns": 1.0}


def test_storage_opens_with_modes_by_environments_and_claims(cli, storage_db, tmp_path):
    tabs = tmp_path / "tabs"
    part = paper_part(report(cli, storage_db, tmp_path, "--experiment", "storage", "--tables", str(tabs)))
    table = part[:part.index('<h3 id="claims">')]
    small = table[table.index("<caption>mean time per pass, 4,096 B file</caption>"):table.index("16,777,216 B")]
    assert '<th class="l">mode</th><th class="l">runs</th><th>local</th><th>local (fio)</th><th>pod</th>' \
           '<th>vm</th></tr>' in small
    for variant, label in (("write_sync", "write(sync)"), ("write", "write"), ("read", "read")):
        cells = row_cells(small, label)
        # rtscope's columns beside the study's figure; fio's measured only (its job runtime / passes)
        assert [p for _, p in cells] == [STORAGE_PUBLISHED[variant][0], "", *STORAGE_PUBLISHED[variant][1:]]
        assert cells[1][0] == ("2.05 ms" if variant == "write_sync" else "")
        for (m, _), where in zip(cells[:1] + cells[2:], ("local", "pod", "vm")):
            v = np.concatenate(values_of("storage", storage, 3, lambda r, w=where, x=variant: r.variant == x and
                                         r.runtime == "native" and r.params["size"] == 4096 and
                                         r.settings.get("target", r.settings.get("env")) == w))
            assert shows(m, v.mean() / NS[m.split()[1]]), (label, where, m, v.mean())
    # the 16 MB file quick passes: measured only; the study's 1 GB rows exist at scale full only
    large = row_cells(table[table.index("16,777,216 B"):], "read")
    v = np.concatenate(values_of("storage", storage, 3, lambda r: r.params["size"] == 16 << 20))
    assert len(large) == 1 and large[0][1] == "" and shows(large[0][0], v.mean() / 1e6)
    assert "1,073,741,824" not in part and "36.05 s" not in table
    assert claim_verdicts(part) == {
        "docker-write-sync-same": "holds", "qemu-write-sync-slower": "holds", "qemu-write-slower": "holds",
        "qemu-read-slower": "contradicted", "qemu-read-1g-slower": "undecided",
        "solo5-write-sync-slowest": "not measurable here", "solo5-write-sync-1g": "not measurable here",
        "xen-write-sync-slower": "not measurable here"}
    assert "2.35 → 2.61 ms" in claim_row(part, "docker-write-sync-same")
    full = claim_row(part, "qemu-read-1g-slower")      # the command at the claim's scale, not this one's too
    assert "claimed at scale full" in full and "storage.toml --scale full`" in full and "--scale quick" not in full
    # --tables: one paper file per table (numbered), the claims beside them; CSV in ns, full precision
    names = {p.name for p in tabs.iterdir()}
    assert {f"{n}.{e}" for n in ("paper-storage-1", "paper-storage-2", "claims-storage")
            for e in ("md", "tex", "csv")} <= names
    rows = {r["mode"]: r for r in csv.DictReader((tabs / "paper-storage-1.csv").open())}
    assert float(rows["write(sync)"]["vm (ns) published"]) == 10.86e6 and rows["write"]["local (fio) (ns)"] == ""
    v = np.concatenate(values_of("storage", storage, 3, lambda r: r.variant == "read" and r.runtime == "native" and
                                 r.params["size"] == 4096 and r.settings.get("env") == "local"))
    assert float(rows["read"]["local (ns)"]) == pytest.approx(v.mean(), rel=1e-12)
    verdicts = {r["claim"]: r["verdict"] for r in csv.DictReader((tabs / "claims-storage.csv").open())}
    assert verdicts == claim_verdicts(part)


def test_tables_write_the_papers_table_and_its_claims(cli, msgq_db, tmp_path):
    tabs = tmp_path / "tabs"
    report(cli, msgq_db, tmp_path, "--tables", str(tabs))
    files = {p.name for p in tabs.iterdir()}
    # comparisons: against the configuration at the VM's defaults (message_queue_data=on_heap, no vm_flags)
    assert {f"{n}.{e}" for n in ("paper-msgq", "claims-msgq", "statistics-microseconds", "comparisons")
            for e in ("md", "tex", "csv")} == files
    small = values_of("msgq", msgq, 4, lambda r: r.variant == "pmap" and r.params["elements"] == 1000 and
                      r.settings.get("message_queue_data") == "on_heap")
    v = np.concatenate(small)
    # Markdown and LaTeX: measured (published), as the report shows them; CSV: the numbers, published beside
    md = (tabs / "paper-msgq.md").read_text()
    assert "| configuration | runs | ips | average (ms) | deviation | median (ms) | 99th % (ms) |" in md
    assert "measured on Raspberry Pi 3 Model B" in md and "published figures in brackets (measured on Apple M1" in md
    row = next(line for line in md.splitlines() if line.startswith("| message_queue_data=on_heap elements=1000 |"))
    cells = [c.strip() for c in row.strip("|").split("|")][2:]
    assert [c.split(" (")[1].rstrip(")") for c in cells] == ["235.61", "4.24", "±7.01%", "4.26", "5.08"]
    assert shows(cells[0], 1e9 / v.mean()) and shows(cells[1], v.mean() / 1e6)
    tex = (tabs / "paper-msgq.tex").read_text()
    assert r"\caption{msgq, the study's table (002, benchee output)" in tex and r"(±7.01\%)" in tex
    rows = {r["configuration"]: r for r in csv.DictReader((tabs / "paper-msgq.csv").open())}
    on = rows["message_queue_data=on_heap elements=1000"]
    assert float(on["average (ms)"]) == pytest.approx(v.mean() / 1e6, rel=1e-12)
    assert float(on["deviation (%)"]) == pytest.approx(100 * v.std(ddof=1) / v.mean(), rel=1e-9)
    assert (on["ips (1/s) published"], on["average (ms) published"], on["deviation (%) published"]) == \
        ("235.61", "4.24", "7.01")
    assert rows["vm_flags=+hmqd off_heap elements=100000"]["99th % (ms) published"] == ""
    # the claims: every one with its verdict, its published and measured figures
    claims = {r["claim"]: r for r in csv.DictReader((tabs / "claims-msgq.csv").open())}
    assert {k: r["verdict"] for k, r in claims.items()} == {
        "off-heap-faster-small": "holds", "off-heap-faster-medium": "contradicted",
        "off-heap-faster-bigger": "holds", "vm-wide-off-heap-faster": "contradicted"}
    small_claim = claims["off-heap-faster-small"]
    assert (small_claim["published baseline"], small_claim["published cell"], small_claim["measured unit"]) == \
        ("4.24", "4.03", "ms")
    assert float(small_claim["measured baseline"]) == pytest.approx(np.mean([r.mean() for r in small]) / 1e6)
    assert "the effect here is at most" in claims["vm-wide-off-heap-faster"]["why"]
    md = (tabs / "claims-msgq.md").read_text()
    assert re.search(r"\| off-heap-faster-medium: .*\| 41.93 → 41.7 ms \| [\d.]+ → [\d.]+ ms \| 4 vs 4 \| .*"
                     r"\| contradicted \|", md), md
    assert "contradicted" in (tabs / "claims-msgq.tex").read_text()


def test_a_report_of_no_study_is_unchanged(cli, tmp_path):
    db = str(tmp_path / "plain.db")
    store = Store(db)
    rng = np.random.default_rng(3)
    for fs in (0, 65535):
        for _ in range(2):
            add_run(store, tmp_path, (5e6 + rng.normal(0, 5e4, 200)).astype(np.int64), runtime="beam",
                    settings={"fullsweep_after": fs})
    tabs = tmp_path / "tabs"
    html = report(cli, db, tmp_path, "--tables", str(tabs))
    assert 'id="paper"' not in html and 'id="claims"' not in html and "published" not in html.lower()
    # no paper's tables; the comparison against the VM's default fullsweep_after=65535 (--baseline defaults)
    assert sorted(p.name for p in tabs.iterdir()) == [f"{n}.{e}" for n in ("comparisons", "statistics-microseconds")
                                                      for e in ("csv", "md", "tex")]


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
