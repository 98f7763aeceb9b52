"""`rtscope serve` end to end: the real server on 127.0.0.1 over real stores (SQLite; PostgreSQL from
pgserver.py), its pages in a real headless Chromium, its API against the CLI's JSON, its /metrics through
prometheus_client's own parser, a live update from another rtscope process, the token flow, and a
database that goes down and comes back.
"""

from __future__ import annotations

import gzip
import json
import re
import subprocess
import sys
import time
import urllib.error
import urllib.request
from datetime import datetime, timezone

import numpy as np
import pytest

import pgserver
from conftest import RTPROBE
from report_fixtures import ENV, EVIL, add_histogram_run, add_run, study_store
from rtscope.analysis.threads import thread_histograms
from rtscope.store import Store, experiments
from served import DRAWN, Served, expected_bounds, fitted_bounds, new_page, open_page, wait_until

pytestmark = pytest.mark.real

BIG = 1_000_000          # samples of the large run: its page must not carry them all
SPIKE = 987_654_321      # the large run's one extreme sample (ns), which the decimated series must keep
EVIL_TARGET = "lab<b>1</b>"


def monitor(db: str, duration: str = "2s") -> subprocess.Popen:
    """A real `rtscope monitor` of this machine, one 1 s interval after another, storing into `db`."""
    return subprocess.Popen([sys.executable, "-m", "rtscope", "monitor", "--db", db, "--duration", duration,
                             "--interval", "1s", "--interval-us", "1000"], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)


def markup_experiment(store: Store) -> int:
    with store.transaction() as c:
        return c.execute(experiments.insert().values(
            name=f"bench {EVIL}", spec={"name": EVIL, "parsed": {"description": f"about {EVIL}", "tags": [EVIL]}},
            status="finished", created_at=datetime.now(timezone.utc).isoformat())).inserted_primary_key[0]


@pytest.fixture(scope="module")
def lab(tmp_path_factory):
    """A SQLite lab store: a study experiment, markup in every user text, a 10^6-sample run with one spike,
    and the intervals of a real `rtscope monitor` (skipped without the probe)."""
    tmp = tmp_path_factory.mktemp("serve")
    db, ids = study_store(tmp, reps=2, n=1500)
    store = Store(db)
    exp = markup_experiment(store)
    env = {**ENV, "target": EVIL_TARGET, "target_kind": "ssh", "target_description": EVIL}
    rng = np.random.default_rng(5)
    marked = [add_run(store, tmp, rng.integers(9_000, 12_000, 800), settings={"target": EVIL_TARGET, "priority": p},
                      tags=[EVIL], experiment_id=exp, env=env) for p in ("normal", EVIL)]
    big = rng.integers(20_000, 30_000, BIG)
    big[BIG // 3] = SPIKE
    big_id = add_run(store, tmp, big, workload="timer", variant="absolute", measure="latency")
    hist_id = add_histogram_run(store, tmp, rng.integers(5_000, 80_000, 20_000), workload="timer",
                                variant="cyclic", runtime="cyclictest", measure="latency")
    monitor_id = None
    if RTPROBE.exists():
        proc = monitor(db)
        out, err = proc.communicate(timeout=120)
        assert proc.returncode == 0, err
        monitor_id = int(re.search(r"monitoring (\d+) finished", out).group(1))
    return {"db": db, "tmp": tmp, "study": ids, "markup": exp, "marked": marked, "big": big_id, "hist": hist_id,
            "monitor": monitor_id}


@pytest.fixture(scope="module")
def server(lab):
    s = Served(lab["db"], log=lab["tmp"] / "serve.log")
    yield s
    s.stop()


# --- the API and the CLI ----------------------------------------------------------------------------------

def test_api_documents_are_the_clis(lab, server, cli):
    """/api/runs/ID is `show ID --json` and /api/experiments/ID/compare is `compare --json`, to the byte."""
    for run_id in (lab["study"]["base"][0], lab["hist"], lab["big"], lab["marked"][1]):
        shown = cli("show", run_id, "--db", lab["db"], "--json")
        assert shown.code == 0, shown.err
        status, body, headers = server.get(f"/api/runs/{run_id}")
        assert status == 200 and headers["content-type"] == "application/json"
        assert body + "\n" == shown.out
    doc = json.loads(body)
    assert doc["run"]["settings"]["priority"] == EVIL
    shown = cli("compare", "--experiment", "1", "--baseline", "governor=conservative", "--db", lab["db"], "--json")
    assert shown.code == 0, shown.err
    status, body, _ = server.get("/api/experiments/1/compare?baseline=governor=conservative")
    assert status == 200 and body + "\n" == shown.out
    assert json.loads(body)["comparisons"]


def test_api_lists_and_bad_input(lab, server, cli):
    everything = Store(lab["db"], read_only=True).runs()
    page = server.json("/api/runs?limit=3&offset=2")
    assert page["total"] == len(everything) and [r["id"] for r in page["runs"]] == [r.id for r in everything[2:5]]
    listed = cli("runs", "--db", lab["db"], "--workload", "timer", "--json")
    assert server.json("/api/runs?workload=timer&limit=1000")["runs"] == json.loads(listed.out)
    exp = server.json(f"/api/experiments/{lab['markup']}")
    assert exp["experiment"]["tags"] == [EVIL] and [r["id"] for r in exp["runs"]] == lab["marked"]
    targets = {t["name"]: t for t in server.json("/api/targets")}
    assert targets[EVIL_TARGET]["kind"] == "ssh" and targets[EVIL_TARGET]["description"] == EVIL
    assert targets[EVIL_TARGET]["runs"] == 2
    assert "/api/runs/{run_id}" in server.json("/openapi.json")["paths"]

    for path, code, words in (("/api/runs/999999", 404, "no run 999999"),
                              ("/api/experiments/999999", 404, "no experiment 999999"),
                              ("/api/experiments/999999/compare", 404, "no experiment 999999"),
                              ("/api/runs?limit=0", 422, "limit"),
                              ("/api/runs?experiment=x", 422, "experiment"),
                              ("/api/runs/abc", 422, "run_id"),
                              ("/api/experiments/1/compare?alpha=2", 422, "alpha"),
                              ("/api/experiments/1/compare?baseline=nope=1", 422, "valid names: fullsweep_after")):
        status, body, headers = server.get(path)
        assert status == code and headers["content-type"] == "application/json", (path, status, body)
        assert words in json.loads(body)["detail"], body
        assert "Traceback" not in body
    status, body, headers = server.get("/runs/999999")
    assert status == 404 and "text/html" in headers["content-type"] and "no run 999999" in body
    status, body, _ = server.get("/no/such/page")
    assert status == 404 and "Traceback" not in body


def test_metrics_parse(lab, server):
    """/metrics in Prometheus' text format, read back with prometheus_client's parser: runs per target and
    workload as stored, and the latest monitoring interval's histogram per CPU (tests/test_prometheus.py:
    every per-board series, with a real Prometheus)."""
    from prometheus_client.parser import text_string_to_metric_families
    status, body, headers = server.get("/metrics")
    assert status == 200 and headers["content-type"].startswith("text/plain")
    families = {f.name: f for f in text_string_to_metric_families(body)}
    # gzip when asked, as Prometheus asks: the same series (a board's up may change between the two)
    with urllib.request.urlopen(urllib.request.Request(server.url + "/metrics", headers={
            "Accept-Encoding": "gzip"}), timeout=60) as r:
        assert (r.headers["Content-Encoding"], r.headers["Vary"]) == ("gzip", "Accept-Encoding")
        unzipped = gzip.decompress(r.read()).decode()
    assert {f.name for f in text_string_to_metric_families(unzipped)} == set(families)
    assert "Content-Encoding" not in headers
    store = Store(lab["db"], read_only=True)
    runs = store.runs()
    stored = {(s.labels["target"], s.labels["workload"]): s.value for s in families["rtscope_runs_stored"].samples}
    expected: dict = {}
    for r in runs:
        key = (str(r.settings.get("target", "local")), r.workload)
        expected[key] = expected.get(key, 0) + 1
    assert stored == expected
    assert {s.labels["target"] for s in families["rtscope_last_run_stored_timestamp_seconds"].samples} == \
        {t for t, _ in expected}
    if lab["monitor"] is None:
        pytest.skip("no rtprobe: make probes (the monitoring part of /metrics needs a monitor run)")
    latest = [r for r in runs if "monitor" in r.tags][-1]
    samples = families["rtscope_board_interval_latency_seconds"].samples
    maxima = {s.labels["cpu"]: s.value for s in families["rtscope_board_interval_latency_max_seconds"].samples}
    assert {s.labels["kernel"] for s in samples} == {latest.machine["kernel_release"]}
    for index, cpu, h in thread_histograms(latest):
        label = str(index if cpu is None else cpu)
        mine = {s.labels["le"]: s.value for s in samples
                if s.name.endswith("_bucket") and s.labels["cpu"] == label and s.labels["target"] == "local"}
        counts = np.asarray(h["counts"])
        upper_us = (h.get("min_value", 0) + h["bucket_width"] * np.arange(1, len(counts) + 1)) / 1000
        assert mine["0.0001"] == counts[upper_us <= 100].sum()
        assert mine["+Inf"] == h["n"]
        assert maxima[label] == pytest.approx(h["max"] / 1e9)


# --- pages in a real browser ------------------------------------------------------------------------------

def test_pages_render_and_escape(lab, server, browser):
    """Each page draws all its plots with no console error; store text with markup shows as text."""
    page = new_page(browser)
    lab_page = open_page(page, server.url + "/")
    assert lab_page["errors"] == 0
    text = page.inner_text("main")
    assert EVIL_TARGET in text and EVIL in text            # target name and description, shown as text
    if lab["monitor"] is not None:   # the monitored board's running bound, as monitor prints it, or why none
        assert "bound (µs)" in page.locator("#boards-table th").all_inner_texts()
        assert fitted_bounds(page, server.url + "/") == expected_bounds(lab["db"])

    counters = open_page(page, f"{server.url}/experiments/{lab['markup']}")
    assert counters["plots"] >= 4 and counters["svgs"] >= counters["plots"] and counters["errors"] == 0
    text = page.inner_text("main")
    assert f"bench {EVIL}" in text and f"about {EVIL}" in text and f"priority={EVIL}" in text

    run = open_page(page, f"{server.url}/runs/{lab['marked'][1]}")
    assert run["plots"] >= 3 and run["errors"] == 0
    assert EVIL in page.inner_text("#settings + table") and EVIL in page.inner_text("main p")
    assert page.evaluate("window.rtsInjected") is None and page.locator("main img").count() == 0

    # a baseline picked in the page: the comparison and the recommendations appear
    open_page(page, f"{server.url}/experiments/1")
    page.select_option("#baseline", "governor=conservative")
    page.click("#baseline-form button")
    page.wait_for_url("**baseline=governor%3Dconservative**")
    wait_until(page, DRAWN)
    assert "Against governor=conservative" in page.inner_text("#comparisons ~ p.note")
    assert page.locator("#recommendations").count() == 1
    assert page.problems == [], page.problems


def test_large_run_page_is_bounded(lab, server, browser):
    """A 10^6-sample run: its page carries the decimated series (a few thousand points) with the spike kept."""
    status, body, _ = server.get(f"/runs/{lab['big']}")
    assert status == 200 and len(body) < 600_000
    page = new_page(browser)
    counters = open_page(page, f"{server.url}/runs/{lab['big']}")
    assert counters["errors"] == 0 and page.problems == []
    series = page.evaluate("(() => { const d = [...document.querySelectorAll('div.plot')].find(d => "
                           "d.layout.xaxis.title.text === 'sample'); return {n: d.data[0].y.length, "
                           "max: Math.max(...d.data[0].y)}; })()")
    assert series["n"] <= 4000 and series["max"] == pytest.approx(SPIKE / 1000)
    assert "1,000,000 samples, drawn as each block's minimum and maximum" in page.inner_text("main")


def test_live_monitor_interval_appears(lab, server, browser):
    """Another rtscope process stores monitoring intervals: the open pages show each as it comes, no reload."""
    if lab["monitor"] is None:
        pytest.skip("no rtprobe: make probes")
    page = new_page(browser)
    open_page(page, server.url + "/")
    wait_until(page, "document.body.dataset.live === 'on'")
    before = page.evaluate("document.body.dataset.updates")
    proc = monitor(lab["db"], "3s")
    try:
        page.wait_for_selector("tr.running a", timeout=30_000)   # the new monitoring, live on the lab page
        assert page.evaluate("document.body.dataset.updates") != before
        href = page.get_attribute("tr.running a", "href")
        exp_id = int(href.rsplit("/", 1)[1])
        open_page(page, server.url + href)
        wait_until(page, "document.body.dataset.live === 'on'")
        store = Store(lab["db"], read_only=True)
        shown = page.evaluate("+document.querySelector('#intervals-stored').dataset.stored")
        assert shown < 3
        while True:   # each interval as it is stored: the page follows within 2 s
            deadline = time.monotonic() + 60
            while len(store.runs(experiment_id=exp_id)) <= shown and time.monotonic() < deadline:
                time.sleep(0.05)
            count = len(store.runs(experiment_id=exp_id))
            assert count > shown, "the monitor stored nothing"
            # the stream polls the store every 0.5 s: a 10 s wait tolerates a loaded machine (how fast pages
            # follow is a figure for a bench, not a timed test)
            wait_until(page, f"+(document.querySelector('#intervals-stored') || {{dataset: {{}}}})"
                             f".dataset.stored >= {count}", 10)
            wait_until(page, DRAWN)
            shown = count
            if count == 3:
                break
    finally:
        out, err = proc.communicate(timeout=60)
    assert proc.returncode == 0, err
    counters = page.evaluate("({plots: +document.body.dataset.plots, errors: +document.body.dataset.jsErrors})")
    assert counters == {"plots": 2, "errors": 0} and page.problems == []
    # the monitoring finished: the page, which can no longer change, closes its stream
    wait_until(page, "document.body.dataset.live === 'off' && document.body.hasAttribute('data-static')", 10)


def test_finished_pages_open_no_stream(lab, server, browser):
    """A run's page, a finished experiment's and a finished monitoring's open no event stream; the lab's does."""
    page = new_page(browser)
    requested: list[str] = []
    page.on("request", lambda r: requested.append(r.url))
    finished = [f"/runs/{lab['marked'][0]}", f"/runs/{lab['big']}", f"/experiments/{lab['markup']}"]
    if lab["monitor"] is not None:
        finished.append(f"/monitors/{lab['monitor']}")
    for path in finished:
        assert open_page(page, server.url + path)["errors"] == 0
        time.sleep(0.3)
        assert page.evaluate("document.body.dataset.live") == "off", path
    assert requested and not [u for u in requested if u.endswith("/events")], requested
    open_page(page, server.url + "/")
    wait_until(page, "document.body.dataset.live === 'on'")
    assert [u for u in requested if u.endswith("/events")] == [server.url + "/events"]
    assert page.problems == []


def head(server, path: str) -> tuple[int, bytes, dict]:
    req = urllib.request.Request(server.url + path, method="HEAD")
    try:
        with urllib.request.urlopen(req, timeout=10) as r:
            return r.status, r.read(), dict(r.headers)
    except urllib.error.HTTPError as e:
        return e.code, e.read(), dict(e.headers)


def test_head_answered_wherever_get_is(lab, server):
    """HEAD on every GET route of the application: the GET's status and headers (Content-Length too), no
    body; the event stream answers its headers at once; a page that does not exist is a 404 to HEAD too."""
    from rtscope.serve.access import Access
    from rtscope.serve.app import make_app
    app = make_app(Store(lab["db"], read_only=True), Access(None))
    values = {"run_id": lab["marked"][0], "exp_id": 1, "name": "serve.js"}   # experiment 1: the study
    paths = []
    for route in app.routes:
        if "GET" in (getattr(route, "methods", None) or ()):
            ids = {**values, "exp_id": lab["monitor"] or lab["markup"]} if route.path.startswith("/monitors") \
                else values
            paths.append(re.sub(r"{(\w+)}", lambda m: str(ids[m.group(1)]), route.path))
    assert {"/", "/metrics", "/events", "/api/runs", "/openapi.json", "/static/plotly.js"} <= set(paths)
    # the lab page and /metrics answer at once with the newest copy made, the one before while the store's
    # newest state is being made (serve/live.Refreshed; an earlier test stored intervals): made before comparing
    for path in ("/", "/metrics"):
        deadline = time.monotonic() + 30
        while True:
            first = server.get(path)[1]
            time.sleep(0.5)
            _, again, headers = server.get(path)
            if first == again and "x-rtscope-stale" not in {k.lower() for k in headers}:
                break
            assert time.monotonic() < deadline, path
    for path in [*paths, "/runs/999999", "/api/runs/999999", "/no/such/page"]:
        started = time.monotonic()
        status, body, headers = head(server, path)
        assert body == b"" and time.monotonic() - started < 5, path
        if path == "/events":
            assert status == 200 and headers["content-type"].startswith("text/event-stream")
            continue
        got_status, got_body, got = server.get(path)
        assert status == got_status and status != 405, (path, status, got_status)
        assert headers["content-type"] == got["content-type"], path
        assert headers.get("content-length") == got.get("content-length"), path
        assert headers["content-security-policy"] == got["content-security-policy"]
    # every route answered a page or a document, but the documents that say why not: the marked run has
    # nothing to explain (404), the study's comparison needs a baseline (422), its 800-sample run is too short
    # for a tail and the study has several configurations to choose from (422)
    assert {p: server.get(p)[0] for p in paths if p != "/events" and server.get(p)[0] != 200} == \
        {f"/api/runs/{lab['marked'][0]}/explain": 404, "/api/experiments/1/compare": 422,
         f"/api/runs/{lab['marked'][0]}/tail": 422, "/api/experiments/1/tail": 422}


# --- the token --------------------------------------------------------------------------------------------

def test_token_flow(lab, browser, tmp_path, cli):
    token = "t0ken-" + "x" * 30
    token_file = tmp_path / "token"
    token_file.write_text(token + "\n")
    token_file.chmod(0o644)
    r = cli("serve", "--db", lab["db"], "--token-file", token_file)
    assert r.code == 2 and "chmod 600" in r.err
    r = cli("serve", "--db", lab["db"], "--host", "0.0.0.0")
    assert r.code == 2 and "--token-file" in r.err and "secrets.token_urlsafe" in r.err
    r = cli("serve", "--db", tmp_path / "missing.db")
    assert r.code == 2 and "no store at" in r.err
    token_file.chmod(0o600)

    s = Served(lab["db"], "--token-file", str(token_file), log=tmp_path / "serve.log")
    try:
        for path in ("/api/runs", "/metrics", "/api/runs/1", "/openapi.json"):
            assert s.get(path)[0] == 401
            assert s.get(path, headers={"Authorization": "Bearer wrong"})[0] == 401
            assert s.get(path, headers={"Authorization": f"Bearer {token}"})[0] == 200
        status, _, headers = s.get("/runs/1")
        assert status == 303 and headers["location"].startswith("/login")

        page = new_page(browser)
        page.goto(s.url + "/runs/1")
        assert "/login" in page.url
        page.fill("#token", "not the token")
        page.click("button[type=submit]")
        assert "That is not the token" in page.inner_text("main")
        page.fill("#token", token)
        page.click("button[type=submit]")
        page.wait_for_url(s.url + "/runs/1")
        wait_until(page, DRAWN)
        page.goto(s.url + "/")
        wait_until(page, "document.body.dataset.live === 'on'")    # the event stream carries the cookie
        cookie = next(c for c in page.context.cookies() if c["name"] == "rtscope_session")
        assert cookie["httpOnly"] and token not in cookie["value"]
        assert [p for p in page.problems if "401" not in p] == []
        page.close()          # its event stream ends with it
    finally:
        s.stop()
    assert token not in s.log and "Traceback" not in s.log


# --- read-only, and PostgreSQL ----------------------------------------------------------------------------

def test_read_only_store_cannot_write(lab):
    store = Store(lab["db"], read_only=True)
    with pytest.raises(Exception, match="readonly|read-only"):
        store.add_experiment({"name": "x", "spec": {}, "status": "running", "created_at": "now"})


@pytest.fixture(scope="module")
def pg():
    if (why := pgserver.available()):
        pytest.skip(why)
    server = pgserver.PgServer().start()
    yield server
    server.stop()


def test_postgres_store_down_and_back(lab, pg, browser, tmp_path, cli):
    url = pg.create_database("serve")
    copied = cli("db", "copy", lab["db"], url)
    assert copied.code == 0, copied.err
    s = Served(url, log=tmp_path / "serve.log")
    try:
        run_id = lab["study"]["perf"][0]
        shown = cli("show", run_id, "--db", url, "--json")
        assert s.get(f"/api/runs/{run_id}")[1] + "\n" == shown.out
        with pytest.raises(Exception, match="read-only transaction"):
            Store(url, read_only=True).add_experiment({"name": "x", "spec": {}, "status": "running",
                                                       "created_at": "now"})
        page = new_page(browser)
        assert open_page(page, s.url + "/")["errors"] == 0
        wait_until(page, "document.body.dataset.live === 'on'")

        pg.pause()
        time.sleep(1.0)    # past the fingerprint's poll interval: nothing answers from a cache
        status, body, _ = s.get("/api/runs")
        assert status == 503 and "cannot be reached" in json.loads(body)["detail"]
        status, body, headers = s.get("/")
        assert status == 503 and "text/html" in headers["content-type"] and "cannot be reached" in body
        page.wait_for_selector("#rts-errors.warn", timeout=5_000)          # the open page says so too

        pg.resume()
        deadline = time.monotonic() + 30
        while s.get("/api/runs")[0] != 200 and time.monotonic() < deadline:
            time.sleep(0.2)
        assert s.json("/api/runs")["total"] == len(Store(lab["db"], read_only=True).runs())
        assert s.get("/")[0] == 200
        page.close()
    finally:
        s.stop()
    assert "Traceback" not in s.log
