"""`rtscope serve`'s /metrics with the real Prometheus tools (Debian's `prometheus` and `promtool`): the
per-board series and their states, `promtool check metrics` on the exposition, `promtool check rules` and
`promtool test rules` on the shipped alerting rules (each alert fired by a synthetic series), and a real
Prometheus on 127.0.0.1 scraping a real `rtscope serve` every second while a real `rtscope monitor` stores
intervals: its query API returns every board's series, its rules load, and the shipped Grafana dashboard's
queries run against it.
"""

from __future__ import annotations

import gzip
import json
import shutil
import signal
import subprocess
import sys
import time
import urllib.parse
import urllib.request
from datetime import datetime, timedelta, timezone
from pathlib import Path

import numpy as np
import pytest

from conftest import RTPROBE
from report_fixtures import ENV
from rtscope import samplefile, targets
from rtscope.experiment import execute as exp_mod, monitor
from rtscope.samplefile import Column
from rtscope.serve import boards, metrics, shipped
from rtscope.store import Store, runs
from served import Served
from sshd import free_port

pytestmark = pytest.mark.real

FIXTURES = Path(__file__).parent / "fixtures" / "prometheus"
PROMETHEUS, PROMTOOL = shutil.which("prometheus"), shutil.which("promtool")
needs_promtool = pytest.mark.skipif(PROMTOOL is None, reason="promtool not installed: apt-get install -y prometheus")
LABELS = {"target", "cpu", "kernel", "preemption", "workload", "le", "controller", "state", "reason"}  # never ids or times
PI3 = {**ENV, "kernel_release": "6.6.20-rt25-v8+", "preemption": "PREEMPT_RT"}
BBB = {**ENV, "hostname": "bbb", "kernel_release": "6.1.0-21-armmp", "preemption": "PREEMPT_DYNAMIC",
       "board": "BeagleBone Black", "cpu_count": 1}


def add_monitoring(store: Store, tmp: Path, target: str, env: dict, maxima_us: list[list[int]], *,
                   interval_s: int = 60, status: str = exp_mod.RUNNING, age_s: float = 0.0) -> list[int]:
    """A monitoring of `target` as `rtscope monitor` records it (its experiment made by monitor.start), with
    one stored interval per item of `maxima_us` (each CPU's samples in 1 µs buckets up to its maximum), the
    last stored `age_s` ago."""
    targets.define(target, {"url": f"ssh://root@{target}.lab:22", "description": env["board"]}, replace=True)
    plan = monitor.make_plan(target, f"{interval_s * len(maxima_us)}s", f"{interval_s}s", 200, "native", None, None)
    exp = monitor.start(store, plan, f"monitor:{target}")
    _, planned = monitor.planned_runs(plan)
    rng = np.random.default_rng(len(target))
    ids = []
    for i, per_cpu in enumerate(maxima_us):
        hists = {}
        for cpu, top in enumerate(per_cpu):
            values = np.append(rng.integers(2_000, 9_000, 5_000), top * 1000)
            counts = np.bincount(values // 1000, minlength=monitor.HISTOGRAM_US)
            hists[f"thread{cpu}"] = {"unit": "ns", "bucket_width": 1000, "min_value": 0, "cpu": cpu,
                                     "counts": counts[:monitor.HISTOGRAM_US].tolist(), "overflow": 0,
                                     "n": len(values), "min": int(values.min()), "max": int(values.max()),
                                     "sum": int(values.sum())}
        req = planned[i].request
        header = samplefile.make_header("timer", "absolute", "native", "rtprobe", "0.1.0", "2026-01-01T00:00:00Z",
                                        [Column("latency", "ns", "i64")], {"target": target, **req.settings},
                                        dict(req.params))
        path = tmp / f"{target}-{i}.rts"
        samplefile.write(path, header, {"latency": np.empty(0, dtype=np.int64)},
                         {"finished_at": "2026-01-01T00:01:00Z", "histograms": hists})
        ids.append(store.add_run(samplefile.read(path), env, tags=["monitor", f"interval-{i + 1}"],
                                 experiment_id=exp.id, plan_index=i, cell=planned[i].cell))
    when = (datetime.now(timezone.utc) - timedelta(seconds=age_s)).isoformat(timespec="seconds")
    with store.transaction() as c:
        c.execute(runs.update().where(runs.c.id == ids[-1]).values(stored_at=when))
    if status != exp_mod.RUNNING:
        exp_mod.set_status(store, exp.id, status)
    return ids


def synthetic_lab(tmp: Path) -> tuple[str, dict]:
    """pi3 watched but silent for an hour (down), bbb's monitoring finished a day ago (unwatched), x86 watched
    and its newest interval just stored (up)."""
    db = str(tmp / "lab.db")
    store = Store(db)
    ids = {"pi3": add_monitoring(store, tmp, "pi3", PI3, [[20, 25, 30, 35], [22, 180, 31, 33]], age_s=3600),
           "bbb": add_monitoring(store, tmp, "bbb", BBB, [[70]], status=exp_mod.FINISHED, age_s=86400),
           "x86": add_monitoring(store, tmp, "x86", ENV, [[12, 14]] * 3)}
    return db, ids


@pytest.fixture(autouse=True)
def forget_targets(clean_targets):
    """The boards the synthetic monitorings define are forgotten after each test."""


def exposed(text: str) -> dict:
    """name -> list of (labels, value) of an exposition."""
    from prometheus_client.parser import text_string_to_metric_families
    out: dict = {}
    for family in text_string_to_metric_families(text):
        for s in family.samples:
            out.setdefault(s.name, []).append((s.labels, s.value))
    return out


def test_the_lab_shows_the_bound_its_controller_recorded(tmp_path):
    """A board's bound is the one its controller recorded after its newest interval (running_bounds), read
    without a fit; a newer interval's is awaited (the board keeps its previous bound) until RECORD_GRACE_S;
    a monitoring whose controller records none is fitted by the server."""
    db, ids = synthetic_lab(tmp_path)
    store = Store(db)
    wc, _ = monitor.worst_case_so_far(store, store.get_run(ids["x86"][-1]))          # x86's controller records
    recorded = store.running_bounds([ids["x86"][-1]])[ids["x86"][-1]]
    assert recorded["value_ns"] == (wc.level.value if wc.level else None) and recorded["intervals"] == 3
    fits: list[int] = []
    lab = boards.Lab(Store(db, read_only=True))
    lab._fit = lambda target, run_id: fits.append(run_id)      # noqa: SLF001 - which fits the server starts
    now = time.time()
    rows = {r["target"]: r for r in boards.page_rows(lab, now)}
    shown = rows["x86"]["bound_us"], rows["x86"]["bound_reason"]
    want = (None if recorded["value_ns"] is None else recorded["value_ns"] / 1000,
            None if recorded["value_ns"] is not None else recorded["reason"])
    assert shown == want
    lab._fitter.shutdown(wait=True)                             # noqa: SLF001
    assert sorted(fits) == sorted([ids["pi3"][-1], ids["bbb"][-1]])   # their controllers recorded nothing
    # x86's next interval: its bound awaited from its controller, the previous one shown meanwhile
    newer = add_monitoring(store, tmp_path, "x86", ENV, [[12, 14]])[-1]
    store.update_experiment(store.get_run(newer).experiment_id, status=exp_mod.FINISHED)
    with store.transaction() as c:   # the new interval belongs to x86's first monitoring, as its next one
        c.execute(runs.update().where(runs.c.id == newer).values(experiment_id=store.get_run(ids["x86"][-1])
                                                                  .experiment_id, plan_index=3))
    fits.clear()
    lab._fitter = boards.ThreadPoolExecutor(1)                  # noqa: SLF001
    rows = {r["target"]: r for r in boards.page_rows(lab, time.time())}
    assert rows["x86"]["run"] == newer and (rows["x86"]["bound_us"], rows["x86"]["bound_reason"]) == want
    assert newer not in fits
    rows = {r["target"]: r for r in boards.page_rows(lab, time.time() + boards.RECORD_GRACE_S + 1)}
    lab._fitter.shutdown(wait=True)                             # noqa: SLF001
    assert newer in fits                                        # never recorded: the server fits it


# --- the series, in this process ----------------------------------------------------------------------------

def test_board_series_and_states(tmp_path):
    """Each board's labels (target, kernel, preemption; cpu), its state now, and its newest interval's figures
    as `rtscope monitor` computes them; no label holds a run id or a time."""
    db, ids = synthetic_lab(tmp_path)
    store = Store(db, read_only=True)
    snap = metrics.read(boards.Lab(store))
    now = time.time()
    assert {b.target: b.state(now) for b in snap.boards} == {"pi3": "down", "bbb": "unwatched", "x86": "up"}
    # the clock alone moves x86 from up to down: after two intervals of 60 s and the 10 s grace
    x86 = next(b for b in snap.boards if b.target == "x86")
    assert x86.up(x86.stored_at + 129) and not x86.up(x86.stored_at + 131)
    series = exposed(metrics.exposition(snap, now)[0].decode())
    board = lambda t, env: {"target": t, "kernel": env["kernel_release"], "preemption": env["preemption"]}  # noqa: E731
    assert sorted((tuple(sorted(lb.items())), v) for lb, v in series["rtscope_board_up"]) == sorted(
        (tuple(sorted(board(t, e).items())), v) for t, e, v in (("pi3", PI3, 0), ("bbb", BBB, 0), ("x86", ENV, 1)))
    assert {lb["target"]: v for lb, v in series["rtscope_board_watched"]} == {"pi3": 1, "bbb": 0, "x86": 1}
    assert {lb["target"]: v for lb, v in series["rtscope_board_intervals_stored_total"]} == \
        {"pi3": 2, "bbb": 1, "x86": 3}
    assert {lb["target"]: v for lb, v in series["rtscope_board_interval_run_id"]} == \
        {t: i[-1] for t, i in ids.items()}
    assert "rtscope_board_controller_info" not in series      # the store records no controller: not shown
    newest = store.get_run(ids["pi3"][-1])
    want = {str(r["cpu"]): r for r in monitor.per_cpu(newest)}
    pi3 = lambda name: {lb["cpu"]: v for lb, v in series[name] if lb["target"] == "pi3"}  # noqa: E731
    assert pi3("rtscope_board_interval_latency_max_seconds") == {c: r["max_us"] / 1e6 for c, r in want.items()}
    assert pi3("rtscope_board_interval_latency_max_seconds")["1"] == pytest.approx(180e-6)
    assert pi3("rtscope_board_interval_latency_p9999_seconds") == {c: r["p9999_us"] / 1e6 for c, r in want.items()}
    assert pi3("rtscope_board_interval_samples") == {c: r["n"] for c, r in want.items()} == {
        str(c): 5001 for c in range(4)}
    buckets = {lb["le"]: v for lb, v in series["rtscope_board_interval_latency_seconds_bucket"]
               if lb["target"] == "pi3" and lb["cpu"] == "1"}
    assert buckets["0.0001"] == 5000 and buckets["0.0002"] == buckets["+Inf"] == 5001
    names = {k for lb, _ in sum(series.values(), []) for k in lb}
    assert names <= LABELS, names - LABELS


def test_leases_name_the_controller(tmp_path):
    """Boards leased by fleet controllers (the lease table `rtscope monitor --target FLEET` keeps): the
    controller is a label of its own series, and the controller's word decides up, down and watched."""
    db, _ = synthetic_lab(tmp_path)

    store = Store(db)             # two controllers of a fleet hold pi3 and bbb; bbb stopped answering
    store.leases.ensure(["pi3", "bbb"])
    assert store.leases.claim("pi3", "ctl-a", 60) and store.leases.claim("bbb", "ctl-b", 60)
    assert store.leases.update("bbb", "ctl-b", 60, state="down", reason="ssh: connection refused")
    assert store.leases.held()[0] == {"target": "bbb", "controller": "ctl-b", "state": "down",
                                      "reason": "ssh: connection refused"}
    snap = metrics.read(boards.Lab(store))
    series = exposed(metrics.exposition(snap)[0].decode())
    assert {(lb["target"], lb["controller"]) for lb, v in series["rtscope_board_controller_info"] if v == 1} == \
        {("pi3", "ctl-a"), ("bbb", "ctl-b")}
    assert {lb["target"]: v for lb, v in series["rtscope_board_up"]} == {"pi3": 1, "bbb": 0, "x86": 1}
    assert {lb["target"]: v for lb, v in series["rtscope_board_watched"]} == {"pi3": 1, "bbb": 1, "x86": 1}


@needs_promtool
def test_promtool_checks_the_exposition(tmp_path):
    """`promtool check metrics`: Prometheus' own lint of names, units, counters and help texts."""
    db, _ = synthetic_lab(tmp_path)
    store = Store(db, read_only=True)
    body, _ = metrics.exposition(metrics.read(boards.Lab(store)))
    proc = subprocess.run([PROMTOOL, "check", "metrics"], input=body, capture_output=True, timeout=60)
    assert proc.returncode == 0 and not proc.stdout.strip() and not proc.stderr.strip(), \
        (proc.stdout + proc.stderr).decode()


def test_the_text_is_prometheus_clients(tmp_path):
    """/metrics' text, written by rtscope, parsed by prometheus_client and written again by it: the same bytes
    (names, label order and escaping, numbers as Go writes them, HELP and TYPE)."""
    from prometheus_client import CollectorRegistry, generate_latest
    from prometheus_client.parser import text_string_to_metric_families
    db, _ = synthetic_lab(tmp_path)
    store = Store(db)
    store.leases.ensure(["pi3"])
    assert store.leases.claim("pi3", 'ctl "a"\\b', 60)     # a controller's name with a quote and a backslash
    text = metrics.exposition(metrics.read(boards.Lab(store)))[0].decode()

    class Parsed:
        def collect(self):
            yield from text_string_to_metric_families(text)
    registry = CollectorRegistry(auto_describe=False)
    registry.register(Parsed())
    assert generate_latest(registry).decode() == text
    assert 'controller="ctl \\"a\\"\\\\b"' in text


def test_a_snapshots_text_is_made_once_while_a_newer_one_is_read(tmp_path, monkeypatch):
    """While the server reads the store's newest state (its text made as it is read), scrapes are answered from
    the state before: its text, plain and gzipped, is the one made before, not made again; a board's state
    moved by the clock makes a new text."""
    db, _ = synthetic_lab(tmp_path)
    lab = boards.Lab(Store(db, read_only=True))
    exposition = metrics.Exposition()
    made = []
    real = exposition._made
    monkeypatch.setattr(exposition, "_made", lambda snap, ups: made.append(snap) or real(snap, ups))
    older, newer = metrics.read(lab), metrics.read(lab)
    now = time.time()
    first = exposition.text(older, now, gzipped=True)[0]
    exposition.text(newer, now, gzipped=True)            # the newer state read
    assert exposition.text(older, now, gzipped=True)[0] is first    # a scrape given the state before
    assert gzip.decompress(first) == exposition.text(older, now)[0]
    assert made == [older, newer]
    x86 = next(b for b in older.boards if b.target == "x86")
    assert exposition.text(older, x86.stored_at + 131)[0] != exposition.text(older, now)[0]   # x86 now down
    assert made == [older, newer, older]


# --- the shipped rules ----------------------------------------------------------------------------------------

def printed(what: str) -> str:
    proc = subprocess.run([sys.executable, "-m", "rtscope", "serve", what], capture_output=True, text=True,
                          timeout=60)
    assert proc.returncode == 0, proc.stderr
    return proc.stdout


@needs_promtool
def test_alert_rules_pass_promtool(tmp_path):
    """The printed rules are the shipped file; promtool checks them and fires each alert on its synthetic
    series (and not on its look-alikes) in tests/fixtures/prometheus/*.test.yml."""
    text = printed("--print-alert-rules")
    assert text == shipped.text(shipped.ALERT_RULES)
    (tmp_path / "rtscope-alerts.yml").write_text(text)
    check = subprocess.run([PROMTOOL, "check", "rules", "rtscope-alerts.yml"], cwd=tmp_path, capture_output=True,
                           text=True, timeout=60)
    assert check.returncode == 0 and "SUCCESS: 6 rules found" in check.stdout, check.stdout + check.stderr
    tests = sorted(FIXTURES.glob("*.test.yml"))
    for t in tests:
        shutil.copy(t, tmp_path)
    alerts = {line.split(":", 1)[1].strip() for line in text.splitlines() if line.strip().startswith("- alert:")}
    assert alerts == {"RtscopeBoardDown", "RtscopeLatencyAboveThreshold", "RtscopeP9999Regression",
                      "RtscopeServeDown"}
    tested = {a for a in alerts if any(f"alertname: {a}\n        exp_alerts:\n          - exp_labels" in t.read_text()
                                       for t in tests)}
    assert tested == alerts      # each alert fires in some test
    proc = subprocess.run([PROMTOOL, "test", "rules", *[t.name for t in tests]], cwd=tmp_path, capture_output=True,
                          text=True, timeout=120)
    assert proc.returncode == 0 and proc.stdout.count("SUCCESS") == len(tests), proc.stdout + proc.stderr
    # and a rule that would not fire where the test expects it makes promtool fail: the tests can fail
    (tmp_path / "rtscope-alerts.yml").write_text(text.replace("> 100e-6", "> 300e-6"))
    broken = subprocess.run([PROMTOOL, "test", "rules", "rtscope-alerts.test.yml"], cwd=tmp_path,
                            capture_output=True, text=True, timeout=120)
    assert broken.returncode != 0 and "RtscopeLatencyAboveThreshold" in broken.stdout + broken.stderr


def test_print_flags_and_dashboard():
    """--print-grafana-dashboard prints the shipped JSON: every panel queries only series /metrics exposes
    (or the shipped rules record); both flags at once is an error naming them."""
    dash = json.loads(printed("--print-grafana-dashboard"))
    assert dash["uid"] == "rtscope-lab" and [v["name"] for v in dash["templating"]["list"]] == ["datasource", "target"]
    exprs = [t["expr"] for p in dash["panels"] for t in p["targets"]]
    assert len(exprs) >= 8 and all('target=~"$target"' in e for e in exprs)
    rules = shipped.text(shipped.ALERT_RULES)
    known = {name for name, _, _ in [*metrics.BOARD_FAMILIES, metrics.RUNS, metrics.LAST]}
    for e in exprs:
        for name in {w for w in __import__("re").findall(r"rtscope[:_][a-z0-9_:]+", e)}:
            base = name.removesuffix("_total").removesuffix("_bucket")
            assert base in known or f"record: {name}" in rules, name
    proc = subprocess.run([sys.executable, "-m", "rtscope", "serve", "--print-alert-rules",
                           "--print-grafana-dashboard"], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 2 and "--print-alert-rules" in proc.stderr and not proc.stdout


# --- a real Prometheus scraping a real rtscope serve ---------------------------------------------------------

class Prometheus:
    """Debian's prometheus on 127.0.0.1, its data in a temporary directory, scraping `target` every second."""

    def __init__(self, tmp: Path, target: str, rules: Path):
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        (tmp / "prometheus.yml").write_text(
            "global: {scrape_interval: 1s, evaluation_interval: 1s}\n"
            f"rule_files: [{rules}]\n"
            "scrape_configs:\n"
            f"  - job_name: rtscope\n    static_configs: [{{targets: ['{target}']}}]\n")
        self.log = open(tmp / "prometheus.log", "w")
        self.proc = subprocess.Popen([PROMETHEUS, f"--config.file={tmp / 'prometheus.yml'}",
                                      f"--storage.tsdb.path={tmp / 'data'}", f"--web.listen-address=127.0.0.1:{self.port}"],
                                     stdout=self.log, stderr=subprocess.STDOUT)

    def api(self, path: str, **params) -> dict:
        url = f"{self.url}/api/v1/{path}" + (f"?{urllib.parse.urlencode(params)}" if params else "")
        with urllib.request.urlopen(url, timeout=10) as r:
            doc = json.loads(r.read())
        assert doc["status"] == "success", doc
        return doc["data"]

    def query(self, expr: str) -> dict[tuple, float]:
        """An instant query: {(target, cpu or ''): value}."""
        return {(r["metric"].get("target"), r["metric"].get("cpu", "")): float(r["value"][1])
                for r in self.api("query", query=expr)["result"]}

    def until(self, expr: str, check, timeout: float = 30.0) -> dict:
        deadline = time.monotonic() + timeout
        while True:
            try:
                found = self.query(expr)
                if check(found):
                    return found
            except OSError:
                found = "not answering"
            if time.monotonic() > deadline:
                raise AssertionError(f"{expr}: {found} after {timeout} s\n{(self.log.name and open(self.log.name).read())[-3000:]}")
            time.sleep(0.2)

    def stop(self) -> None:
        self.proc.terminate()
        try:
            self.proc.wait(timeout=15)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        self.log.close()


@pytest.mark.skipif(PROMETHEUS is None, reason="prometheus not installed: apt-get install -y prometheus")
def test_prometheus_scrapes_serve(tmp_path):
    """A real Prometheus scrapes a real `rtscope serve` every second while a real `rtscope monitor` of this
    machine stores an interval a second: the query API returns every board's series with its labels and
    state, the new intervals as they are stored, the monitoring's end (unwatched), the shipped rules loaded
    and evaluated (pi3's down alert pending) and the dashboard's queries answered."""
    if not RTPROBE.exists():
        pytest.skip("no rtprobe: make probes")
    db, ids = synthetic_lab(tmp_path)
    mon = subprocess.Popen([sys.executable, "-m", "rtscope", "monitor", "--db", db, "--duration", "60s",
                            "--interval", "1s", "--interval-us", "1000"], stdout=subprocess.PIPE,
                           stderr=subprocess.PIPE, text=True)
    store = Store(db, read_only=True)
    served = prom = None
    try:
        served = Served(db, log=tmp_path / "serve.log")
        rules = tmp_path / "rtscope-alerts.yml"
        rules.write_text(printed("--print-alert-rules"))
        prom = Prometheus(tmp_path, served.url.removeprefix("http://"), rules)
        up = prom.until("rtscope_board_up", lambda f: {t for t, _ in f} == {"pi3", "bbb", "x86", "local"})
        assert up == {("pi3", ""): 0, ("bbb", ""): 0, ("x86", ""): 1, ("local", ""): 1}
        assert prom.query("rtscope_board_watched") == {("pi3", ""): 1, ("bbb", ""): 0, ("x86", ""): 1,
                                                       ("local", ""): 1}
        labels = {r["metric"]["target"]: (r["metric"]["kernel"], r["metric"]["preemption"])
                  for r in prom.api("query", query="rtscope_board_up")["result"]}
        local = store.runs(ids=[max(r.id for r in store.runs() if r.settings.get("target") == "local")])[0].machine
        assert labels == {"pi3": (PI3["kernel_release"], "PREEMPT_RT"), "bbb": (BBB["kernel_release"], "PREEMPT_DYNAMIC"),
                          "x86": (ENV["kernel_release"], ENV["preemption"]),
                          "local": (local["kernel_release"], local["preemption"])}
        maxima = prom.query('rtscope_board_interval_latency_max_seconds{target="pi3"}')
        assert maxima == pytest.approx({("pi3", str(c)): m / 1e6 for c, m in enumerate([22, 180, 31, 33])})
        cpus = {c for (t, c) in prom.query("rtscope_board_interval_samples") if t == "local"}
        assert len(cpus) >= 1 and all(c.isdigit() for c in cpus)

        # each interval the monitor stores reaches Prometheus: the counter follows the store
        first = prom.query('rtscope_board_intervals_stored_total{target="local"}')[("local", "")]
        later = prom.until('rtscope_board_intervals_stored_total{target="local"}',
                           lambda f: f.get(("local", ""), 0) >= first + 2, timeout=20)
        stored = sum(1 for r in store.runs() if "monitor" in r.tags and r.settings.get("target") == "local")
        assert first + 2 <= later[("local", "")] <= stored

        # the shipped rules loaded and evaluate without error; pi3's down alert is on its way (for: 1m)
        groups = prom.api("rules")["groups"]
        assert sorted(r["name"] for g in groups for r in g["rules"]) == sorted(
            ["rtscope:board_interval_latency_p9999_seconds:median_1h",
             "rtscope:board_interval_latency_p9999_seconds:median_7d", "RtscopeBoardDown",
             "RtscopeLatencyAboveThreshold", "RtscopeP9999Regression", "RtscopeServeDown"])
        deadline = time.monotonic() + 20
        while True:
            alerts = prom.api("alerts")["alerts"]
            down = {a["labels"]["target"] for a in alerts if a["labels"]["alertname"] == "RtscopeBoardDown"}
            if down or time.monotonic() > deadline:
                break
            time.sleep(0.3)
        assert down == {"pi3"}
        assert all(r["health"] == "ok" for g in prom.api("rules")["groups"] for r in g["rules"]), groups
        above = {a["labels"]["target"] for a in alerts if a["labels"]["alertname"] == "RtscopeLatencyAboveThreshold"}
        assert "pi3" in above and not above & {"x86", "bbb"}

        # every query of the shipped dashboard runs; those over /metrics' own series return every board
        dash = json.loads(printed("--print-grafana-dashboard"))
        for panel in dash["panels"]:
            for t in panel["targets"]:
                result = prom.api("query", query=t["expr"].replace("$target", ".*"))["result"]
                if "median_7d" not in t["expr"] and "increase(" not in t["expr"] and "controller" not in t["expr"]:
                    assert result, (panel["title"], t["expr"])

        # the monitoring ends (SIGTERM: interrupted): the board is no longer watched
        mon.send_signal(signal.SIGTERM)
        mon.communicate(timeout=60)
        prom.until('rtscope_board_watched{target="local"}', lambda f: f.get(("local", "")) == 0, timeout=20)
    finally:
        if mon.poll() is None:
            mon.kill()
            mon.communicate()
        if prom is not None:
            prom.stop()
        if served is not None:
            served.stop()


def test_lab_page_lists_every_board_sortable(tmp_path, browser):
    """serve's lab page: one table of every board — kernel, preemption, state and why it is down, the newest
    interval's worst max and p99.99, intervals, who watches it — whose headings sort it in a real browser."""
    from served import expected_bounds, fitted_bounds, new_page, open_page, wait_until
    db, ids = synthetic_lab(tmp_path)
    store = Store(db)
    store.leases.ensure(["pi3"])
    assert store.leases.claim("pi3", "ctl-a", 600)
    assert store.leases.update("pi3", "ctl-a", 600, state="down", reason="ssh: connection refused")
    served = Served(db, log=tmp_path / "serve.log")
    try:
        page = new_page(browser)
        open_page(page, served.url + "/")
        rows = page.eval_on_selector_all("#boards-table tbody tr",
                                         "rows => rows.map(r => Array.from(r.cells, c => c.textContent.trim()))")
        by_board = {r[0]: r for r in rows}
        assert set(by_board) == {"pi3", "bbb", "x86"}
        assert by_board["pi3"][1:4] == [PI3["kernel_release"], PI3["preemption"], "down: ssh: connection refused"]
        want = max(r["p9999_us"] for r in monitor.per_cpu(store.get_run(ids["pi3"][-1])))
        assert by_board["pi3"][4:6] == ["180.0", f"{want:.1f}"], by_board["pi3"]       # its newest interval's
        assert by_board["pi3"][9] == "ctl-a" and by_board["bbb"][3] == "unwatched" and by_board["x86"][3] == "up"
        assert [by_board[b][8] for b in ("pi3", "bbb", "x86")] == ["2", "1", "3"]
        assert fitted_bounds(page, served.url + "/") == expected_bounds(db)   # the bound column
        max_column = 4
        page.click(f"#boards-table thead th:nth-child({max_column + 1})")
        wait_until(page, "document.querySelector('#boards-table tbody tr td').textContent.trim() === 'x86'", 5)
        order = page.eval_on_selector_all("#boards-table tbody tr", "rows => rows.map(r => r.cells[0].textContent.trim())")
        assert order == ["x86", "bbb", "pi3"]                 # max 14, 70, 180 µs
        page.click(f"#boards-table thead th:nth-child({max_column + 1})")
        order = page.eval_on_selector_all("#boards-table tbody tr", "rows => rows.map(r => r.cells[0].textContent.trim())")
        assert order == ["pi3", "bbb", "x86"]
        assert page.problems == []
    finally:
        served.stop()
