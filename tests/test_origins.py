"""serve/origins.py: the store's runs counted per target, per (target, workload) and per board, read
incrementally, and read again whole when a run appears below the highest id read or one is removed."""

import numpy as np
import sqlalchemy as sa

from report_fixtures import add_run
from rtscope.serve.origins import Origins
from rtscope.store import Store
from rtscope.store.tables import runs
import pytest

pytestmark = pytest.mark.fast


def test_counts_follow_the_store(tmp_path):
    store = Store(str(tmp_path / "s.db"))
    ids = [add_run(store, tmp_path, np.arange(10), settings={"target": t}, tags=tags, workload=w)
           for t, tags, w in (("b1", ["monitor"], "timer"), ("b2", ["monitor"], "timer"), ("b1", [], "exec"))]
    origins = Origins(store)
    seen = origins.read()
    assert (seen.total, seen.last_id) == (3, ids[-1])
    assert {t: (n.runs, n.run_id) for t, n in seen.targets.items()} == {"b1": (2, ids[2]), "b2": (1, ids[1])}
    assert {t: (n.runs, n.run_id) for t, n in seen.boards.items()} == {"b1": (1, ids[0]), "b2": (1, ids[1])}
    assert seen.by_workload == {("b1", "timer"): 1, ("b2", "timer"): 1, ("b1", "exec"): 1}

    new = add_run(store, tmp_path, np.arange(10), settings={"target": "b2"}, tags=["monitor"], workload="timer")
    later = origins.read()
    assert later.boards["b2"].runs == 2 and later.boards["b2"].run_id == new and later.total == 4
    assert seen.boards["b2"].runs == 1          # a snapshot handed out does not change

    with store.engine.begin() as c:             # a run removed: read again whole
        c.execute(runs.delete().where(runs.c.id == ids[1]))
    assert origins.read().boards["b2"].runs == 1
    with store.engine.begin() as c:             # a run that appears below the highest id read (a late commit)
        row = dict(c.execute(sa.select(runs).where(runs.c.id == new)).mappings().one())
        c.execute(runs.insert().values({**row, "id": ids[1]}))
    last = origins.read()
    assert last.boards["b2"].runs == 2 and last.total == 4 and last.last_id == new
