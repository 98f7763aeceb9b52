"""The store goes away mid-work (docs/store.md, "When the store goes away"): a real PostgreSQL server
(tests/pgserver.py) stopped (`pg_ctl stop -m immediate`) and started again under a real `rtscope run` and
`rtscope monitor`, a controller killed while its store is down, a store that never comes back. Each checks that no
run is lost or stored twice, that the command said what it did and printed no traceback, and that nothing is left
in the spool. The runs are short (0.5 s; a monitor's intervals 1 s): a test takes some 15-25 s.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

import pgserver
from proc_helpers import default_signals
from rtscope.store import Store
from test_postgres_store import pg  # noqa: F401  (the module's PostgreSQL server)
from test_tune_real import TIMER_SPEC

WHY = pgserver.available()
pytestmark = [pytest.mark.real, pytest.mark.skipif(WHY is not None, reason=WHY or "")]

SPEC = ('name = "outage"\nrepetitions = {n}\n[[workload]]\nname = "exec"\nvariants = "sleep"\n'
        '[workload.params]\nn = 100\niterations = 5\npause_ms = 0\n')   # a run: 5 sleeps of 100 ms


@pytest.fixture
def url(pg, request):
    if not (pg.data / "postmaster.pid").exists():   # a failed test left it stopped
        pg.resume()
    return pg.create_database("o_" + request.node.name.lower()[:40])


class Rtscope:
    """An rtscope process with its own state directory (its spool); stdout and stderr read as they come."""

    def __init__(self, args: list[str], state: Path, **env: str):
        self.state = state
        self.proc = subprocess.Popen([sys.executable, "-m", "rtscope", *args], text=True, stdout=subprocess.PIPE,
                                     stderr=subprocess.PIPE, preexec_fn=default_signals,
                                     env={**os.environ, "RTSCOPE_STATE_DIR": str(state), "PYTHONUNBUFFERED": "1",
                                          **env})
        self.out: list[str] = []
        self.err: list[str] = []
        self.readers = [threading.Thread(target=self._read, args=(f, lines), daemon=True)
                        for f, lines in ((self.proc.stdout, self.out), (self.proc.stderr, self.err))]
        for t in self.readers:
            t.start()

    @staticmethod
    def _read(f, lines: list[str]) -> None:
        for line in f:
            lines.append(line.rstrip("\n"))

    def wait_for(self, text: str, timeout: float = 60) -> None:
        deadline = time.monotonic() + timeout
        while not any(text in line for line in self.out + self.err):
            assert self.proc.poll() is None, (text, self.out, self.err)
            assert time.monotonic() < deadline, (f"no line with {text!r} within {timeout} s", self.out, self.err)
            time.sleep(0.05)

    def finish(self, timeout: float = 180) -> int:
        try:
            self.proc.wait(timeout)
        finally:
            if self.proc.poll() is None:
                self.proc.kill()
                self.proc.wait()
        for t in self.readers:
            t.join(5)
        return self.proc.returncode

    @property
    def said(self) -> str:
        return "\n".join(self.out + self.err)

    def __enter__(self) -> "Rtscope":
        return self

    def __exit__(self, *exc) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()


def through_a_restart(pg, r: Rtscope, ready, said: str, down_s: float = 2) -> int:
    """The server stopped once `ready()` holds, started again `down_s` after `r` said `said`; r's exit code."""
    with r:
        wait_until(ready, timeout=120)
        pg.pause()
        r.wait_for(said)
        time.sleep(down_s)
        pg.resume()
        return r.finish()


def spooled_files(state: Path) -> list[Path]:
    return sorted(state.glob("spool/*/*.spool"))


def wait_until(condition, timeout: float = 60) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline
        time.sleep(0.05)


def stored(url: str) -> list:
    return Store(url, flush_spool=False).runs()


def test_run_goes_on_while_postgresql_restarts(pg, url, tmp_path, rtprobe):
    """`rtscope run` of 8 runs, the server stopped after the second is stored and started 4 s later: the runs
    made meanwhile are spooled, then written, each once; the experiment finishes (exit 0)."""
    spec = tmp_path / "o.toml"
    spec.write_text(SPEC.format(n=8))
    r = Rtscope(["run", str(spec), "--db", url], tmp_path / "state")
    code = through_a_restart(pg, r, lambda: len(stored(url)) >= 2, "run spooled")
    assert code == 0, r.said
    assert "unreachable since" in r.said and "answers again" in r.said and "Traceback" not in r.said, r.said
    runs = stored(url)
    assert sorted(x["plan_index"] for x in runs) == list(range(8)), [x["plan_index"] for x in runs]
    assert all(x["n_samples"] == 5 for x in runs)
    assert Store(url).experiment_row(1)["status"] == "finished"
    assert spooled_files(tmp_path / "state") == []
    assert "8 runs stored" in r.said


def test_monitor_goes_on_while_postgresql_restarts(pg, url, tmp_path, rtprobe):
    """`rtscope monitor` of 8 intervals of 1 s, the server down for 3 s after the second: every interval is
    stored once, those measured meanwhile through the spool."""
    m = Rtscope(["monitor", "--duration", "8s", "--interval", "1s", "--interval-us", "1000", "--db", url],
                tmp_path / "state")
    code = through_a_restart(pg, m, lambda: any("[2/8]" in line for line in m.out), "kept in the spool")
    assert code == 0, m.said
    assert "Traceback" not in m.said and "unreachable since" in m.said, m.said
    runs = stored(url)
    assert sorted(x["plan_index"] for x in runs) == list(range(8)), m.said
    assert "monitoring 1 finished: 8 intervals stored" in m.said, m.said
    assert spooled_files(tmp_path / "state") == []


def test_a_killed_controllers_spool_is_written_by_the_next_rtscope(pg, url, tmp_path, rtprobe):
    """`rtscope run` killed (-9) while its store is down leaves its spool; the next rtscope opening the store
    writes it (each run once, a second time nothing), and `--resume` makes only what is missing."""
    spec = tmp_path / "o.toml"
    spec.write_text(SPEC.format(n=6))
    state = tmp_path / "state"
    r = Rtscope(["run", str(spec), "--db", url], state)
    try:
        wait_until(lambda: len(stored(url)) >= 1)
        pg.pause()
        wait_until(lambda: len(spooled_files(state)) >= 2)
        r.proc.kill()
        r.finish()
    finally:
        if r.proc.poll() is None:
            r.proc.kill()
        pg.resume()
    kept = len(spooled_files(state))
    before = len(stored(url))
    env = {**os.environ, "RTSCOPE_STATE_DIR": str(state)}
    shown = subprocess.run([sys.executable, "-m", "rtscope", "runs", "--db", url], capture_output=True, text=True,
                           env=env, timeout=120)
    assert shown.returncode == 0, shown.stderr
    assert f"{kept} spooled runs written" in shown.stderr and "left in its spool by an earlier rtscope" in \
        shown.stderr, shown.stderr
    assert spooled_files(state) == [] and len(stored(url)) == before + kept
    again = subprocess.run([sys.executable, "-m", "rtscope", "db", "flush-spool", "--db", url], capture_output=True,
                           text=True, env=env, timeout=120)
    assert again.returncode == 0 and "is empty" in again.stdout, again.stdout + again.stderr
    resumed = subprocess.run([sys.executable, "-m", "rtscope", "run", str(spec), "--resume", "--db", url],
                             capture_output=True, text=True, env=env, timeout=180)
    assert resumed.returncode == 0, resumed.stderr
    assert sorted(x["plan_index"] for x in stored(url)) == list(range(6))


def test_a_store_that_does_not_come_back(pg, url, tmp_path, rtprobe):
    """The server down until the command ends: it waits $RTSCOPE_STORE_WAIT seconds, then exits 75 naming the
    store and the spool; `rtscope db flush-spool` writes the runs once the server is back (and says so)."""
    spec = tmp_path / "o.toml"
    spec.write_text(SPEC.format(n=3))
    state = tmp_path / "state"
    r = Rtscope(["run", str(spec), "--db", url], state, RTSCOPE_STORE_WAIT="1")
    try:
        wait_until(lambda: len(stored(url)) >= 1)
        pg.pause()
        code = r.finish()
    finally:
        if r.proc.poll() is None:
            r.proc.kill()
    try:
        assert code == 75, r.said
        assert "Traceback" not in r.said
        last = " ".join(" ".join(r.err).split())
        assert "still unreachable" in last and "kept in its spool" in last and "rtscope db flush-spool" in last, last
        kept = len(spooled_files(state))
        assert kept >= 2   # the runs after the first, and the experiment's status
        env = {**os.environ, "RTSCOPE_STATE_DIR": str(state)}
        refused = subprocess.run([sys.executable, "-m", "rtscope", "runs", "--db", url], capture_output=True,
                                 text=True, env=env, timeout=60)
        assert refused.returncode == 1 and "Traceback" not in refused.stderr, refused.stderr
        assert "cannot open store" in refused.stderr, refused.stderr
    finally:
        pg.resume()
    flushed = subprocess.run([sys.executable, "-m", "rtscope", "db", "flush-spool", "--db", url],
                             capture_output=True, text=True, env=env, timeout=60)
    assert flushed.returncode == 0 and "spooled runs written" in flushed.stdout, flushed.stdout + flushed.stderr
    assert sorted(x["plan_index"] for x in stored(url)) == [0, 1, 2]
    assert Store(url).experiment_row(1)["status"] == "finished"


def test_tune_goes_on_while_postgresql_restarts(pg, url, tmp_path, rtprobe):
    """`rtscope tune` with the server down for 3 s after its first runs: the run made meanwhile is spooled, the
    tune waits for the store (it plans from stored runs), then finishes; each planned run stored once."""
    spec = tmp_path / "t.toml"
    spec.write_text(TIMER_SPEC)
    t = Rtscope(["tune", str(spec), "--db", url], tmp_path / "state")
    code = through_a_restart(pg, t, lambda: len(stored(url)) >= 3, "unreachable since", down_s=3)
    assert code == 0, t.said
    assert "Traceback" not in t.said
    indexes = [x["plan_index"] for x in stored(url)]
    assert len(indexes) == len(set(indexes)) and len(indexes) <= 14, indexes
    assert spooled_files(tmp_path / "state") == []


def test_import_while_postgresql_is_down(pg, url, tmp_path):
    """`rtscope import` with the server down (a store it has opened before): the imported runs are spooled
    together, the command says so on one line (no traceback), waits, and writes them once the server is back
    (started 3 s later): each run once; a flush afterwards finds nothing."""
    files = [str(Path(__file__).parent / "fixtures" / "cyclictest" / n) for n in ("hist.json", "two_threads.json")]
    Store(url)                        # the store made (its schema), as a lab's store is before an import
    state = tmp_path / "state"
    pg.pause()
    try:
        r = Rtscope(["import", "cyclictest", *files, "--db", url], state)
        with r:
            r.wait_for("unreachable since")
            assert len(spooled_files(state)) == 1   # the runs of one import: one entry, written in one transaction
            time.sleep(3)
            pg.resume()
            code = r.finish()
    finally:
        if not (pg.data / "postmaster.pid").exists():
            pg.resume()
    assert code == 0, r.said
    assert "Traceback" not in r.said
    assert sum("unreachable since" in line for line in r.err) == 1, r.err
    assert "imported 2 runs through the spool" in r.said and "2 spooled runs written" in r.said, r.said
    runs = stored(url)
    assert sorted(x.source for x in runs) == sorted(files), [x.source for x in runs]
    assert spooled_files(state) == []
    env = {**os.environ, "RTSCOPE_STATE_DIR": str(state)}
    again = subprocess.run([sys.executable, "-m", "rtscope", "db", "flush-spool", "--db", url], capture_output=True,
                           text=True, env=env, timeout=120)
    assert again.returncode == 0 and "is empty" in again.stdout, again.stdout + again.stderr
    assert len(stored(url)) == 2
