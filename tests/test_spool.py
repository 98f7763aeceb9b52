"""The spool of an unreachable store (store/spool.py): entries written atomically, written to the store exactly
once (also after a flush killed before it deleted its entry, and by another process), corrupt files named and set
aside; and what /metrics says of boards with no interval or given up on. The store is a SQLite file whose writes
are made to fail as a lost connection does (the real PostgreSQL restarts are tests/test_store_outage.py's)."""

from __future__ import annotations

import shutil

import pytest
import sqlalchemy as sa

from conftest import exec_samplefile
from rtscope import samplefile
from rtscope.store import Store
from rtscope.store import spool as spool_mod
from rtscope.store.sql import SqlStore

pytestmark = pytest.mark.fast


def lost(*_a, **_k):
    raise sa.exc.OperationalError("INSERT INTO runs ...", {}, Exception("server closed the connection unexpectedly"))


@pytest.fixture
def store(tmp_path):
    return Store(str(tmp_path / "s.db"))


def sample(tmp_path, name="r.rts", values=(1, 2, 3)):
    return samplefile.read(exec_samplefile(tmp_path / name, list(values)))


def experiment(store: Store) -> int:
    return store.add_experiment({"name": "e", "spec": {}, "status": "running", "created_at": "2026-01-01T00:00:00Z",
                                 "plan": []})


def down(monkeypatch):
    monkeypatch.setattr(SqlStore, "add_run", lost)


def test_a_run_is_spooled_while_the_store_is_unreachable_then_written_once(store, tmp_path, monkeypatch):
    said: list[str] = []
    keeper = store.keeper
    keeper.say = said.append
    exp = experiment(store)
    with monkeypatch.context() as m:
        down(m)
        kept = [keeper.add_run(sample(tmp_path), {"host": "x"}, experiment_id=exp, plan_index=i, cell="c")
                for i in range(2)]
    assert all(isinstance(k, spool_mod.Spooled) for k in kept) and kept[-1].pending == 2
    assert len(said) == 1 and "unreachable since" in said[0] and "1 run spooled" in said[0]   # the second: quiet
    assert "server closed the connection unexpectedly" in said[-1]
    assert store.runs() == [] and len(keeper.spool.files()) == 2
    run_id = keeper.add_run(sample(tmp_path), {"host": "x"}, experiment_id=exp, plan_index=2, cell="c")
    assert isinstance(run_id, int)   # the spool went first, in order
    assert [r.plan_index for r in store.runs()] == [0, 1, 2] and run_id == store.runs()[-1].id
    assert "answers again: 2 spooled runs written" in said[-1]
    assert keeper.spool.files() == [] and keeper.flush().entries == 0
    assert store.runs()[0].stored_at <= store.runs()[-1].stored_at


def test_the_unreachable_line_is_said_on_each_change_and_every_30_s(store, tmp_path, monkeypatch):
    """100 boards spooling an interval every 10 s for 90 s: the first spooled run is said (since when, how many),
    then one line every 30 s (not 1000 lines); the store answering again is said, and the next outage's first
    spooled run again at once."""
    said: list[str] = []
    keeper = store.keeper
    keeper.say = said.append
    now = [1000.0]
    keeper.clock = lambda: now[0]
    error = sa.exc.OperationalError("SELECT 1", {}, Exception("connection refused"))
    with monkeypatch.context() as m:
        m.setattr(spool_mod.Spool, "pending_runs", lambda self: 7)
        for step in range(10):
            now[0] = 1000.0 + 10 * step
            for _board in range(100):
                assert isinstance(keeper.spooled(error), spool_mod.Spooled)
    assert len(said) == 4, said          # at 0, 30, 60 and 90 s
    assert all("unreachable since" in line and "7 runs spooled" in line and "retrying (connection refused)" in line
               for line in said), said
    since = said[0].split("since ")[1][:8]
    assert all(f"since {since}," in line for line in said), said   # since the first failure, not each one's
    assert keeper.flush() is not None and keeper.since is None    # it answers (nothing waits: nothing said)
    del said[:]
    with monkeypatch.context() as m:
        down(m)
        keeper.add_run(sample(tmp_path), {})
    assert len(said) == 1 and "1 run spooled" in said[0], said   # a new outage: said at once
    keeper.add_run(sample(tmp_path, "b.rts"), {})
    assert "answers again: 1 spooled run written" in said[-1]


def test_a_replay_writes_each_run_once(store, tmp_path, monkeypatch):
    """A flush killed after its transaction committed but before it deleted the entry: the next flush (this or
    another process) finds the runs stored and writes nothing twice. Runs of an experiment are refused by its
    unique plan index, imported runs (no experiment) matched by their recorded identity."""
    exp = experiment(store)
    with monkeypatch.context() as m:
        down(m)
        store.keeper.add_run(sample(tmp_path), {}, experiment_id=exp, plan_index=0)
        store.keeper.add_runs([(sample(tmp_path, "a.rts"), {}, {"source": "a.rts"}),
                               (sample(tmp_path, "b.rts", (4, 5)), {}, {"source": "b.rts"})])
    files = store.keeper.spool.files()
    copies = tmp_path / "copies"
    copies.mkdir()
    for f in files:
        shutil.copy(f, copies / f.name)
    done = store.keeper.flush()
    assert len(done.stored) == 3 and done.already == 0
    for f in files:   # the entries back, as a flush killed before deleting them leaves them
        shutil.copy(copies / f.name, f)
    again = Store(str(tmp_path / "s.db"))   # another process opening the store writes what it finds
    assert again.keeper.last is not None and again.keeper.last.stored == [] and again.keeper.last.already == 3
    assert sorted((r.plan_index is None, r.source or "") for r in store.runs()) == [
        (False, ""), (True, "a.rts"), (True, "b.rts")]
    assert store.keeper.spool.files() == []


def test_an_experiments_status_is_spooled_and_never_undoes_finished(store, tmp_path, monkeypatch):
    from rtscope.experiment import execute as exp_mod
    exp = experiment(store)
    with monkeypatch.context() as m:
        m.setattr(spool_mod, "_apply_status", lost)
        assert exp_mod.keep_status(store, exp, exp_mod.FINISHED) is False
        assert exp_mod.keep_status(store, exp, exp_mod.INTERRUPTED) is False
    assert store.experiment_row(exp)["status"] == "running"
    assert store.keeper.flush().statuses == 2
    assert store.experiment_row(exp)["status"] == "finished"   # the later `interrupted` did not undo it


def test_an_entry_is_written_whole_or_not_at_all(store, tmp_path, monkeypatch):
    """A crash while writing an entry (here: the rename fails) leaves no entry and no temporary file."""
    sp = store.keeper.spool
    sf = sample(tmp_path)

    def crash(*_a):
        raise OSError(28, "No space left on device")
    with monkeypatch.context() as m:
        down(m)
        m.setattr(spool_mod.os, "replace", crash)
        with pytest.raises(spool_mod.RtscopeError, match="its spool .* cannot be written .*No space left on device"):
            store.keeper.add_run(sf, {})
    assert sp.files() == [] and list(sp.dir.iterdir()) == []   # no entry, no temporary file
    with monkeypatch.context() as m:
        down(m)
        store.keeper.add_run(sf, {})
    assert len(sp.files()) == 1 and (sp.dir / "store").read_text().strip() == sp.shown_url


@pytest.mark.parametrize("damage, said", [
    (lambda b: b[:-3], "is truncated: "),
    (lambda b: b[:-1] + bytes([b[-1] ^ 1]), "do not match their checksum"),
    (lambda b: b"not a spool\n" + b, "is not an rtscope spool entry"),
    (lambda b: b.replace(b'"kind":"runs"', b'"kind":"nope"'), "unknown kind 'nope' (valid: runs, status)"),
])
def test_a_corrupt_spool_file_is_named_and_set_aside(store, tmp_path, monkeypatch, cli, damage, said):
    with monkeypatch.context() as m:
        down(m)
        store.keeper.add_run(sample(tmp_path, "a.rts"), {}, source="a")
        store.keeper.add_run(sample(tmp_path, "b.rts"), {}, source="b")
    first, second = store.keeper.spool.files()
    first.write_bytes(damage(first.read_bytes()))
    r = cli("db", "flush-spool", "--db", tmp_path / "s.db")
    text = " ".join((r.out + r.err).split())
    assert r.code == 1 and said in text and str(first) in text and "set aside as" in text, text
    assert "1 spooled run written" in text and [x.source for x in store.runs()] == ["b"]
    assert first.with_name(first.name + ".corrupt").exists() and not first.exists() and not second.exists()
    assert "Traceback" not in r.err


def test_flush_spool_of_an_empty_spool(cli, tmp_path):
    r = cli("db", "flush-spool", "--db", tmp_path / "s.db")
    assert r.code == 0 and "is empty" in r.out


def test_each_store_has_its_own_spool(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    a = spool_mod.Spool(Store("s.db").url, "a")
    assert a.dir == spool_mod.Spool(f"sqlite:///{tmp_path / 's.db'}", "a").dir   # a relative path: the same file
    assert a.dir != spool_mod.Spool("postgresql+psycopg://lab@db/rtscope", "b").dir
    assert a.dir.parent == tmp_path.parent / a.dir.parent.relative_to(tmp_path.parent)
    monkeypatch.delenv("RTSCOPE_STATE_DIR")
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "xdg"))
    assert spool_mod.state_dir() == tmp_path / "xdg" / "rtscope"
    assert spool_mod.hide_password("postgresql+psycopg://lab:secret@db/r") == "postgresql+psycopg://lab:***@db/r"


def test_a_store_error_is_one_line_naming_the_store(cli, tmp_path, monkeypatch):
    """Any SQLAlchemy error reaching the command line is said in one line naming the store (no traceback): an
    unreachable store exits 75."""
    from rtscope.store import leases
    db = tmp_path / "s.db"
    Store(str(db))
    monkeypatch.setattr(leases.LeaseTables, "rows", lost)
    r = cli("lab", "--db", db)
    assert r.code == 75, (r.out, r.err)
    assert "rtscope: error: store sqlite:///" in r.err and "server closed the connection" in r.err
    assert "Traceback" not in r.err


# --- what /metrics and the lab page say of boards with no interval, or given up on ---------------------------

def silent_lab(tmp_path) -> str:
    """A lab whose boards have no interval stored: `dead` died before its first (down, watched), `given` was
    given up on (incomplete), `quit` is nobody's."""
    from rtscope.store.leases import INCOMPLETE
    db = str(tmp_path / "lab.db")
    store = Store(db)
    store.leases.ensure(["dead", "quit", "given"])
    assert store.leases.claim("dead", "ctl-a", 600)           # died before its first interval: down, watched
    store.leases.update("dead", "ctl-a", 600, state="down", reason="target dead: unreachable: connection refused")
    assert store.leases.claim("given", "ctl-a", 600)          # given up on
    store.leases.release("given", "ctl-a", INCOMPLETE, "down for 2 intervals (4 s), given up: refused")
    return db


def test_boards_of_the_lease_table_without_an_interval_are_in_metrics(tmp_path):
    from rtscope.serve import boards, metrics
    db = silent_lab(tmp_path)
    snap = metrics.read(boards.Lab(Store(db, read_only=True)))
    text = metrics.exposition(snap)[0].decode()
    from prometheus_client.parser import text_string_to_metric_families
    got = {(s.name, s.labels["target"]): s for f in text_string_to_metric_families(text) for s in f.samples}
    assert {t: got[("rtscope_board_up", t)].value for t in ("dead", "quit", "given")} == \
        {"dead": 0, "quit": 0, "given": 0}
    assert {t: got[("rtscope_board_watched", t)].value for t in ("dead", "quit", "given")} == \
        {"dead": 1, "quit": 0, "given": 0}
    assert {t: got[("rtscope_board_incomplete", t)].value for t in ("dead", "quit", "given")} == \
        {"dead": 0, "quit": 0, "given": 1}
    info = {t: got[("rtscope_board_state_info", t)].labels for t in ("dead", "quit", "given")}
    assert info["dead"]["state"] == "down" and "connection refused" in info["dead"]["reason"]
    assert info["given"]["state"] == "incomplete" and "given up" in info["given"]["reason"]
    assert info["quit"]["state"] == "unwatched" and info["quit"]["kernel"] == "unknown"
    assert ("rtscope_board_interval_run_id", "dead") not in got
    assert got[("rtscope_board_controller_info", "dead")].labels["controller"] == "ctl-a"


def test_the_lab_page_lists_boards_without_an_interval_and_given_up_ones(tmp_path):
    """The lab page (`/`) lists the boards /metrics does: one that died before its first interval (down, the
    controller's reason), one given up on (incomplete, why), one nobody watches; each with no figures yet."""
    import re
    import time
    from rtscope.serve import boards, routes_pages
    from rtscope.serve.access import Access
    from rtscope.serve.shared import Server
    db = silent_lab(tmp_path)
    store = Store(db, read_only=True)
    rows = {r["target"]: r for r in boards.page_rows(boards.Lab(store), time.time())}
    assert {t: (r["state"], r["reason"]) for t, r in rows.items()} == {
        "dead": ("down", "target dead: unreachable: connection refused"),
        "given": ("incomplete", "down for 2 intervals (4 s), given up: refused"), "quit": ("unwatched", None)}
    assert rows["dead"]["controller"] == "ctl-a" and rows["given"]["controller"] == "-"
    assert all(r["intervals"] == 0 and r["run"] is None and r["bound_reason"] == boards.NO_INTERVAL
               for r in rows.values())
    html = routes_pages.lab_page(Server(store, Access(None))).body.decode()
    table = html[html.index('id="boards-table"'):html.index("</table>", html.index('id="boards-table"'))]
    cells = {m.group(1): m.group(2) for m in re.finditer(r'<tr class="board-\w+"><td class="l">(\w+)</td>(.*?)</tr>',
                                                            table, re.S)}
    assert set(cells) == {"dead", "given", "quit"}, table
    assert 'class="l problem">down: target dead: unreachable: connection refused' in cells["dead"]
    assert 'class="l problem">incomplete: down for 2 intervals (4 s), given up: refused' in cells["given"]
    assert ">unwatched<" in cells["quit"] and "none" in cells["quit"]
