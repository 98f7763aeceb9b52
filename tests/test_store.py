import os

import numpy as np
import pytest
import sqlalchemy as sa

from rtscope import samplefile, store as store_mod
from rtscope.errors import UsageError
from rtscope.store import Store


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
    original = st._insert

    def insert_then_fail(conn, row, sf):
        original(conn, row, sf)
        raise RuntimeError("disk full")

    monkeypatch.setattr(st, "_insert", insert_then_fail)
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
