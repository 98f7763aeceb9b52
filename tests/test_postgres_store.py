"""The store on a real PostgreSQL server (tests/pgserver.py), many writers at once, migrations, copies."""

from __future__ import annotations

import os
import signal
import sqlite3
import subprocess
import sys
import time

import numpy as np
import pytest
import sqlalchemy as sa

import pgserver
from conftest import exec_samplefile
from rtscope.store import migrations
from rtscope.errors import RtscopeError
from rtscope.store import Store, metadata, runs, sample_chunks

WHY = pgserver.available()
pytestmark = [pytest.mark.real, pytest.mark.skipif(WHY is not None, reason=WHY or "")]

SPEC = ('name = "pg"\nrepetitions = 2\n[[workload]]\nname = "exec"\nvariants = ["sum", "nothing"]\n'
        '[workload.params]\niterations = 200\npause_ms = 0\n')


@pytest.fixture(scope="module")
def pg():
    server = pgserver.PgServer().start()
    yield server
    server.stop()


@pytest.fixture
def url(pg, request):
    return pg.create_database("t_" + request.node.name.lower().replace("[", "_").replace("]", "")[:40])


def rtscope(*args: str, **kw) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "rtscope", *args], capture_output=True, text=True, timeout=300, **kw)


def consistent(store: Store) -> list[tuple[int, int]]:
    """(run id, n) of every run; asserts each run has exactly its samples (nothing half-written)."""
    out = []
    for run in store.runs():
        n = len(store.primary_samples(run))
        assert n == run["n_samples"], f"run {run.id}: {n} samples stored of {run['n_samples']}"
        out.append((run.id, n))
    return out


def test_every_command_works_on_postgresql(url, tmp_path, rtprobe):
    spec = tmp_path / "pg.toml"
    spec.write_text(SPEC)
    r = rtscope("run", str(spec), "--db", url)
    assert r.returncode == 0, r.stderr
    r = rtscope("runs", "--db", url, "--json")
    assert r.returncode == 0 and r.stdout.count('"workload": "exec"') == 4
    r = rtscope("show", "1", "--db", url, "--json")
    assert r.returncode == 0 and '"p99"' in r.stdout
    r = rtscope("export", "1", "--db", url, "--format", "csv")
    assert r.returncode == 0 and len(r.stdout.splitlines()) == 201
    r = rtscope("compare", "--experiment", "pg", "--db", url, "--baseline", "variant=nothing")
    assert r.returncode == 0, r.stderr
    r = rtscope("db", "info", "--db", url)
    assert r.returncode == 0 and f"schema version {migrations.LATEST}" in r.stdout
    assert consistent(Store(url))


def test_eight_writers_on_a_fresh_database(url, tmp_path, rtprobe):
    """8 rtscope processes started at once create the schema once and lose or duplicate nothing."""
    spec = tmp_path / "pg.toml"
    spec.write_text(SPEC)
    procs = [subprocess.Popen([sys.executable, "-m", "rtscope", "run", str(spec), "--db", url],
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) for _ in range(8)]
    results = [p.communicate(timeout=300) for p in procs]
    assert [p.returncode for p in procs] == [0] * 8, [err for _, err in results]
    store = Store(url)
    stored = consistent(store)
    assert len(stored) == 8 * 4
    per_experiment = {}
    for run in store.runs():
        per_experiment.setdefault(run["experiment_id"], []).append(run["plan_index"])
    assert len(per_experiment) == 8 and all(sorted(v) == [0, 1, 2, 3] for v in per_experiment.values())


def test_kill_9_of_a_writer_mid_transaction_leaves_no_half_run(url, tmp_path):
    big = exec_samplefile(tmp_path / "big.rts", np.arange(3_000_000, dtype=np.int64))
    for delay in (0.3, 0.6, 0.9, 1.2):
        proc = subprocess.Popen([sys.executable, "-m", "rtscope", "import", "rts", str(big), "--db", url],
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        time.sleep(delay)
        proc.kill()
        proc.wait()
    store = Store(url)
    consistent(store)
    with store.engine.connect() as c:  # no chunk without its run
        orphans = c.execute(sa.select(sa.func.count()).select_from(sample_chunks).where(
            ~sample_chunks.c.run_id.in_(sa.select(runs.c.id)))).scalar()
    assert orphans == 0
    r = rtscope("import", "rts", str(big), "--db", url)  # and the store still takes a whole one
    assert r.returncode == 0, r.stderr
    assert consistent(store)[-1][1] == 3_000_000


def test_two_resumers_store_each_run_once(url, tmp_path, rtprobe):
    spec = tmp_path / "r.toml"
    spec.write_text('name = "r"\nrepetitions = 6\n[[workload]]\nname = "exec"\nvariants = "sleep"\n'
                    '[workload.params]\nn = 100\niterations = 2\npause_ms = 0\n')
    proc = subprocess.Popen([sys.executable, "-m", "rtscope", "run", str(spec), "--db", url],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 60   # interrupted once a run is stored (a fixed 2 s was before the experiment
    while time.monotonic() < deadline and proc.poll() is None:   # existed on a loaded machine: nothing to resume)
        if Store(url).runs():
            break
        time.sleep(0.05)
    proc.send_signal(signal.SIGTERM)
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == 143, err
    resumers = [subprocess.Popen([sys.executable, "-m", "rtscope", "run", str(spec), "--db", url, "--resume", "1"],
                                 stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) for _ in range(2)]
    said = [p.communicate(timeout=120)[1] for p in resumers]
    assert [p.returncode for p in resumers] == [0, 0], said
    plan = sorted(r["plan_index"] for r in Store(url).runs())
    assert plan == list(range(6))


def test_an_old_store_is_migrated_only_when_asked(tmp_path):
    path = tmp_path / "old.db"
    engine = sa.create_engine(f"sqlite:///{path}")
    # A store as rtscope 0.1 made it: no schema_version, none of the later tables.
    metadata.create_all(engine, tables=[t for t in metadata.sorted_tables if t.name != "sample_causes"])
    engine.dispose()
    latest = migrations.LATEST
    with pytest.raises(RtscopeError, match=rf"schema version 1; this rtscope needs {latest}: run `rtscope db migrate"):
        Store(str(path))
    r = rtscope("db", "migrate", "--db", str(path))
    assert r.returncode == 0 and f"from schema version 1 to {latest}" in r.stdout
    assert "applied 4: sample_causes" in r.stdout and "applied 5: lab_controllers, lab_boards" in r.stdout
    store = Store(str(path))
    assert store.causes(1) == []  # the table of setting explain exists
    assert store.leases.rows()[1] == [] and store.leases.live_controllers() == []  # the lab's lease tables
    with sqlite3.connect(path) as c:
        assert c.execute("select version from schema_version").fetchall() == [(latest,)]
        c.execute("update schema_version set version = 99")
    with pytest.raises(RtscopeError, match="newer than this rtscope knows"):
        Store(str(path))


def test_copy_sqlite_to_postgresql_and_back(url, tmp_path, rtprobe):
    spec = tmp_path / "pg.toml"
    spec.write_text(SPEC)
    lite = str(tmp_path / "lab.db")
    assert rtscope("run", str(spec), "--db", lite).returncode == 0
    r = rtscope("db", "copy", lite, url)
    assert r.returncode == 0 and "copied 1 experiment, 4 runs" in r.stdout, r.stderr
    r = rtscope("db", "copy", lite, url)  # again: nothing new
    assert r.returncode == 0 and "copied 0 experiments, 0 runs" in r.stdout and "4 runs were there" in r.stdout
    back = str(tmp_path / "back.db")
    assert rtscope("db", "copy", url, back).returncode == 0
    a, b = Store(lite), Store(back)
    for ra, rb in zip(a.runs(), b.runs(), strict=True):
        assert (ra["cell"], ra["plan_index"], ra["settings"]) == (rb["cell"], rb["plan_index"], rb["settings"])
        assert np.array_equal(a.primary_samples(ra), b.primary_samples(rb))
    r = rtscope("db", "copy", lite, lite)
    assert r.returncode == 2 and "the same store" in r.stderr


def test_connections_keep_tcp_keepalives(url):
    """Every connection to the server (the writer's and a reader's) has TCP keepalives and a user timeout, so a
    half-open connection is found within a minute: the socket's own options, as the kernel holds them."""
    import socket
    from rtscope.store.sql import PG_KEEPALIVES
    for store in (Store(url), Store(url, read_only=True)):
        raw = store.engine.raw_connection()
        try:
            sock = socket.socket(fileno=os.dup(raw.driver_connection.pgconn.socket))
            try:
                got = {"keepalives": sock.getsockopt(socket.SOL_SOCKET, socket.SO_KEEPALIVE),
                       "keepalives_idle": sock.getsockopt(socket.IPPROTO_TCP, socket.TCP_KEEPIDLE),
                       "keepalives_interval": sock.getsockopt(socket.IPPROTO_TCP, socket.TCP_KEEPINTVL),
                       "keepalives_count": sock.getsockopt(socket.IPPROTO_TCP, socket.TCP_KEEPCNT),
                       "tcp_user_timeout": sock.getsockopt(socket.IPPROTO_TCP, socket.TCP_USER_TIMEOUT)}
            finally:
                sock.close()
        finally:
            raw.close()
        assert got == PG_KEEPALIVES
        idle, every, count = got["keepalives_idle"], got["keepalives_interval"], got["keepalives_count"]
        assert idle + every * count <= 60 and got["tcp_user_timeout"] <= 60_000
