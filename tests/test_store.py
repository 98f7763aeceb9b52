import os
from concurrent.futures import ThreadPoolExecutor

import numpy as np
import pytest
import sqlalchemy as sa

from rtscope import samplefile, store as store_mod
from rtscope.errors import UsageError
from rtscope.store import Store

pytestmark = pytest.mark.fast


def test_add_and_read_back_every_sample(tmp_path, make_samplefile):
    st = Store(str(tmp_path / "s.db"))
    values = np.arange(2_500_000) % 977  # spans several stored chunks
    run_id = st.add_run(samplefile.read(make_samplefile(values)), {"kernel_release": "x"}, tags=["b", "a"])
    run = st.get_run(run_id)
    assert run["workload"] == "exec" and run["n_samples"] == len(values) and run["tags"] == ["a", "b"]
    assert run["environment"] == {"kernel_release": "x"}
    got = st.samples(run_id)
    assert np.array_equal(got["duration"], values) and len(got["cpu"]) == len(values)


def test_run_is_stored_whole_or_not_at_all(tmp_path, make_samplefile, monkeypatch):
    st = Store(str(tmp_path / "s.db"))
    sf = samplefile.read(make_samplefile([1, 2, 3]))
    original = st.sql._insert  # the SQLAlchemy store inserts (store/sql.py)

    def insert_then_fail(conn, row, sf):
        original(conn, row, sf)
        raise RuntimeError("disk full")

    monkeypatch.setattr(st.sql, "_insert", insert_then_fail)
    with pytest.raises(RuntimeError):
        st.add_run(sf, {})
    with st.engine.connect() as c:
        assert c.execute(sa.select(sa.func.count()).select_from(store_mod.runs)).scalar() == 0
        assert c.execute(sa.select(sa.func.count()).select_from(store_mod.sample_chunks)).scalar() == 0


def test_unknown_run_names_the_store(tmp_path):
    with pytest.raises(UsageError, match="no run 42"):
        Store(str(tmp_path / "s.db")).get_run(42)


def test_unwritable_paths(tmp_path):
    with pytest.raises(UsageError, match="does not exist"):
        Store(str(tmp_path / "missing" / "s.db"))
    with pytest.raises(UsageError, match="is a directory"):
        Store(str(tmp_path))
    locked = tmp_path / "ro"
    locked.mkdir()
    locked.chmod(0o500)
    try:
        if os.geteuid() == 0:
            pytest.skip("root can write anywhere; covered by the CLI test run as nobody")
        with pytest.raises(UsageError, match="not writable"):
            Store(str(locked / "s.db"))
    finally:
        locked.chmod(0o700)


def test_url_resolution(monkeypatch):
    monkeypatch.delenv("RTSCOPE_DB", raising=False)
    assert store_mod.resolve_url(None) == "sqlite:///rtscope.db"
    assert store_mod.resolve_url("x/y.db") == "sqlite:///x/y.db"
    assert store_mod.resolve_url("postgresql://u@h/db") == "postgresql+psycopg://u@h/db"  # psycopg 3, installed
    assert store_mod.resolve_url("postgres://u@h/db") == "postgresql+psycopg://u@h/db"
    assert store_mod.resolve_url("postgresql+psycopg2://u@h/db") == "postgresql+psycopg2://u@h/db"
    monkeypatch.setenv("RTSCOPE_DB", "/tmp/env.db")
    assert store_mod.resolve_url(None) == "sqlite:////tmp/env.db"


def explained_store(path, make_samplefile) -> Store:
    """A store with a run of each kind the SQLite read path reads: samples in two chunks and tags, a run without
    samples but with settings, a run with explained samples."""
    st = Store(str(path))
    st.add_run(samplefile.read(make_samplefile(np.arange((1 << 20) + 5000) % 977)),
               {"kernel_release": "x", "governors": {"0": "performance"}}, tags=["b", "a"])
    st.add_run(samplefile.read(make_samplefile([], name="empty.rts", settings={"kernel": "rt"})), {})
    st.add_run(samplefile.read(make_samplefile([5, 50, 500], name="e.rts")), {}, causes=[
        {"sample_index": 2, "thread": 0, "cpu": 1, "value_ns": 500, "start_ns": 7, "unexplained_ns": 20,
         "causes": [{"kind": "irq", "name": "local_timer", "irq": 236, "duration_ns": 480}]},
        {"sample_index": 1, "thread": 0, "cpu": 1, "value_ns": 50, "start_ns": None, "unexplained_ns": 50,
         "note": "window not traced"}])
    return st


def test_sqlite_read_path_reads_what_sqlalchemy_reads(tmp_path, make_samplefile):
    from rtscope.store import tables
    from rtscope.store.records import RUN_JSON_COLUMNS
    assert set(RUN_JSON_COLUMNS) == {c.name for c in tables.runs.c if isinstance(c.type, sa.JSON)}
    assert [c.name for c in tables.sample_causes.c if isinstance(c.type, sa.JSON)] == ["detail"]
    explained_store(tmp_path / "s.db", make_samplefile)
    fast, slow = Store(str(tmp_path / "s.db")), Store(str(tmp_path / "s.db"))
    assert fast._fast is not None  # a store at this version: read with sqlite3
    slow.sql  # noqa: B018  (opens it through SQLAlchemy, which then reads)
    assert slow._fast is None
    for query in ({}, {"workload": "exec"}, {"workload": "nothing"}, {"ids": [3, 1]}, {"ids": []},
                  {"experiment_id": 1}):
        assert fast.runs(**query) == slow.runs(**query), query
    assert [r.id for r in fast.runs(ids=[3, 1])] == [1, 3] and fast.runs()[0].tags == ["a", "b"]
    for run_id in (1, 2, 3):
        assert fast.causes(run_id) == slow.causes(run_id)
        a, b = fast.samples(run_id), slow.samples(run_id)
        assert a.keys() == b.keys() and all(np.array_equal(a[k], b[k]) and a[k].dtype == b[k].dtype for k in a)
    assert [c["value_ns"] for c in fast.causes(3)] == [500, 50] and fast.causes(3)[1]["note"] == "window not traced"
    assert fast.samples(1, ["cpu"]).keys() == {"cpu"} and len(fast.samples(1)["duration"]) == (1 << 20) + 5000
    with ThreadPoolExecutor(1) as pool:  # and from another thread
        assert pool.submit(fast.runs).result() == slow.runs()
    assert fast._fast is not None  # reading never opened SQLAlchemy


def test_a_store_read_then_written_sees_its_writes(tmp_path, make_samplefile):
    explained_store(tmp_path / "s.db", make_samplefile)
    st = Store(str(tmp_path / "s.db"))
    assert len(st.runs()) == 3 and st._fast is not None
    new = st.add_run(samplefile.read(make_samplefile([1, 2], name="n.rts")), {})
    assert st._fast is None and [r.id for r in st.runs()] == [1, 2, 3, new]
    assert list(st.samples(new)["duration"]) == [1, 2]


def test_stores_of_other_versions_get_the_same_errors_from_runs_and_show(tmp_path, make_samplefile, cli):
    import sqlite3
    db = tmp_path / "s.db"
    explained_store(db, make_samplefile)
    with sqlite3.connect(db) as c:
        c.execute("update schema_version set version = 99")
    for args in (("runs",), ("show", "1")):
        r = cli(*args, "--db", str(db))
        assert r.code == 1 and "schema version 99, newer than this rtscope knows" in r.err, r.err
    with sqlite3.connect(db) as c:
        c.execute("update schema_version set version = 3")
    r = cli("show", "1", "--db", str(db))
    assert r.code == 1 and "schema version 3; this rtscope needs" in r.err and "rtscope db migrate" in r.err
    db.chmod(0o400)
    try:
        if os.geteuid() != 0:  # the checks of a store opened for writing come first, as before
            r = cli("runs", "--db", str(db))
            assert r.code == 2 and "is not writable" in r.err
    finally:
        db.chmod(0o600)



def test_creating_a_store_keeps_this_processs_sqlite_lock_on_it(tmp_path):
    """Creating (migrating) a store must not drop the fcntl locks SQLite holds on the file in this process
    (closing any descriptor of the file drops them all): without its shared lock, the next process to close
    the store believes it is the last, deletes the WAL this process still reads from, and this process sees
    no later write, then reads pages being checkpointed ('database disk image is malformed')."""
    db = tmp_path / "s.db"
    store = Store(str(db))  # created, so migrated, here
    store.experiment_names()
    inode = os.stat(db).st_ino
    held = [line.split() for line in open("/proc/locks")]
    mine = [f for f in held if f[-4] == str(os.getpid()) and f[-3].endswith(f":{inode}")]  # pid, dev:inode
    assert mine, f"no lock of pid {os.getpid()} on inode {inode}: {held}"
