"""`rtscope serve` as the tests start it: the real command in its own process on a free port of 127.0.0.1,
and a headless Chromium (Debian's `chromium`, driven by Playwright's Python client) to open its pages."""

from __future__ import annotations

import json
import os
import queue
import re
import shutil
import signal
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
from contextlib import contextmanager
from pathlib import Path

CHROMIUM = next((shutil.which(n) for n in ("chromium", "chromium-browser") if shutil.which(n)), None)


def browser_missing() -> str | None:
    if CHROMIUM is None:
        return "headless Chromium not installed: apt-get install -y chromium"
    try:
        import playwright.sync_api  # noqa: F401
    except ImportError:
        return "Playwright's Python client not installed: pip install -e '.[test]'"
    return None


class Served:
    """One `rtscope serve` process; `stop()` ends it (SIGTERM) and keeps its log in `.log`."""

    def __init__(self, db: str, *args: str, log: Path):
        self.log_path = log
        self.log_file = open(log, "w")
        self.proc = subprocess.Popen([sys.executable, "-m", "rtscope", "serve", "--db", db, "--port", "0", *args],
                                     stdout=subprocess.PIPE, stderr=self.log_file, text=True,
                                     env={**os.environ, "PYTHONUNBUFFERED": "1"})
        lines: queue.Queue = queue.Queue()
        threading.Thread(target=lambda: [lines.put(x) for x in self.proc.stdout] + [lines.put("")],
                         daemon=True).start()
        m, line = None, "?"
        while line and not m:
            try:
                line = lines.get(timeout=60)
            except queue.Empty:
                break
            m = re.search(r"read-only at (http://127\.0\.0\.1:\d+)/", line)
        if not m:
            self.stop()
            raise RuntimeError(f"rtscope serve did not start: {line}{self.log}")
        self.url = m.group(1)

    @property
    def log(self) -> str:
        if not self.log_file.closed:
            self.log_file.flush()
        return self.log_path.read_text()

    def get(self, path: str, headers: dict | None = None) -> tuple[int, str, dict]:
        """(status, body, headers) of a GET; redirects are not followed."""
        class Stay(urllib.request.HTTPRedirectHandler):
            def redirect_request(self, *a, **k):
                return None
        opener = urllib.request.build_opener(Stay)
        req = urllib.request.Request(self.url + path, headers=headers or {})
        try:
            with opener.open(req, timeout=60) as r:
                return r.status, r.read().decode(), dict(r.headers)
        except urllib.error.HTTPError as e:
            return e.code, e.read().decode(), dict(e.headers)

    def json(self, path: str, **kw):
        status, body, _ = self.get(path, **kw)
        assert status == 200, (path, status, body)
        return json.loads(body)

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=15)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self.log_file.close()


@contextmanager
def chromium():
    """A headless Chromium; each page records its console messages and script errors in `page.problems`."""
    from playwright.sync_api import sync_playwright
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=["--no-sandbox", "--disable-gpu"])
        try:
            yield browser
        finally:
            browser.close()


def new_page(browser):
    page = browser.new_page(viewport={"width": 1280, "height": 900})
    page.problems = []
    page.on("console", lambda m: page.problems.append(f"console {m.type}: {m.text}")
            if m.type in ("error", "warning") else None)
    page.on("pageerror", lambda e: page.problems.append(f"page error: {e}"))
    return page


DRAWN = ("document.body.dataset.plots !== undefined && "
         "document.body.dataset.plotsDrawn === document.body.dataset.plots")


def wait_until(page, expression: str, timeout: float = 30.0) -> None:
    """Poll a JavaScript expression until it is true (page.wait_for_function evaluates its predicate with
    eval, which the server's Content-Security-Policy forbids, as it should)."""
    deadline = time.monotonic() + timeout
    while not page.evaluate(expression):
        if time.monotonic() > deadline:
            raise AssertionError(f"not true after {timeout} s: {expression}")
        time.sleep(0.05)


def report_page(cli, db: str, out, browser, page=None):
    """`rtscope report` of the store `db` written to `out`, opened in Chromium (`page`, else a new 1280 px one)
    with every plot drawn: the page."""
    r = cli("report", "--db", db, "-o", out)
    assert r.code == 0, r.err
    page = page or new_page(browser)
    page.goto(out.as_uri())
    wait_until(page, DRAWN)
    return page


def fitted_bounds(page, url: str, timeout: float = 60.0) -> dict[str, tuple[str, str | None]]:
    """The lab page at `url` once no board's bound is being fitted (serve fits them off the request): each
    board's bound cell, (text, title)."""
    deadline = time.monotonic() + timeout
    while True:
        open_page(page, url)
        cells = page.eval_on_selector_all("#boards-table tbody tr", "rows => rows.map(r => [r.cells[0].textContent"
                                          ".trim(), r.querySelector('td.bound').textContent.trim(), "
                                          "r.querySelector('td.bound').getAttribute('title')])")
        if not any(title and "being fitted" in title for _, _, title in cells):
            return {board: (text, title) for board, text, title in cells}
        assert time.monotonic() < deadline, f"bounds still being fitted after {timeout} s: {cells}"
        time.sleep(0.5)


def expected_bounds(db: str) -> dict[str, tuple[str, str | None]]:
    """Each board's bound cell as the lab page must show it: monitor's running bound of its newest interval."""
    from rtscope.serve.boards import Lab, running_bound
    from rtscope.store import Store
    store = Store(db, read_only=True)
    found = {b.target: running_bound(store, store.get_run(b.newest.run_id)) for b in Lab(store).read()}
    return {board: (f"{b.value_ns / 1000:.1f}", None) if b.value_ns is not None else ("—", f"no bound: {b.reason}")
            for board, b in found.items()}


def open_page(page, url: str) -> dict:
    """Load a page and wait until every plot is drawn; its body's counters."""
    page.goto(url)
    wait_until(page, DRAWN)
    return page.evaluate("({plots: +document.body.dataset.plots, drawn: +document.body.dataset.plotsDrawn, "
                         "errors: +document.body.dataset.jsErrors, svgs: document.querySelectorAll("
                         "'div.plot .main-svg').length})")
