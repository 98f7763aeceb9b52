"""The lab's views in the report: OSADL-style monitoring plots, the fleet's worst-case table."""

from __future__ import annotations

import re

import numpy as np

from rtscope import samplefile
from rtscope.report import lab
from rtscope.report.model import decimate, machine_rows, machines
from rtscope.store import Store
import pytest

pytestmark = pytest.mark.fast


def timer_file(path, values, target: str):
    cols = [samplefile.Column("latency", "ns", "i64")]
    header = samplefile.make_header("timer", "absolute", "native", "test", "0", "2026-01-01T00:00:00Z", cols,
                                    {"target": target}, {"interval_us": 1000})
    samplefile.write(path, header, {"latency": np.asarray(values)}, {"finished_at": "2026-01-01T00:00:01Z"})
    return path


def test_fleet_table_names_each_targets_worst_case(cli, db, tmp_path):
    for target, worst in (("pi3", 90_000), ("x86", 20_000)):
        f = timer_file(tmp_path / f"{target}.rts", [5_000] * 999 + [worst], target)
        assert cli("import", "rts", f, "--db", db).code == 0
    store = Store(db)
    rows = {r.target: r for r in lab.fleet_rows(store, store.runs())}
    assert set(rows) == {"pi3", "x86"} and rows["pi3"].worst_max == 90_000 and rows["x86"].worst_max == 20_000
    assert rows["pi3"].n == 1000
    out = tmp_path / "r.html"
    r = cli("report", "--db", db, "-o", out)
    assert r.code == 0, r.err
    html = out.read_text()
    assert "Fleet: the worst case per target" in html and "<td>90</td>" in html


def test_monitoring_views(cli, db, tmp_path):
    r = cli("monitor", "--duration", "4s", "--interval", "2s", "--load", "cpu", "--phase", "2s", "--db", db)
    assert r.code == 0, r.err
    store = Store(db)
    [view] = lab.monitor_views(store.runs())
    assert len(view.intervals) == 2 and [iv[2] for iv in view.intervals] == ["none", "cpu"]
    assert sorted(view.histograms) == sorted(view.intervals[0][3])   # a histogram and a maximum per CPU
    for cpu, h in view.histograms.items():
        assert h["max"] == max(iv[3][cpu] for iv in view.intervals)  # merged over the intervals
    out = tmp_path / "m.html"
    assert cli("report", "--experiment", "1", "--db", db, "-o", out).code == 0
    html = out.read_text()
    assert "Long-term monitoring" in html and "maximum per interval" in html and "latency per CPU" in html


def test_decimate_keeps_first_last_and_every_block_extreme():
    for n in (2001, 2999, 3001, 100_007):
        values = np.arange(n)
        idx, shown = decimate(values, 2000)
        assert shown[0] == 0 and shown[-1] == n - 1 and len(idx) <= 2002


def test_a_fleets_machines_are_one_table_with_the_differences_marked(cli, tmp_path):
    """Two boards of one experiment: one machines table with a column each, the rows where they differ marked
    (kernel, board), the rows they share not; the same table in the report and on serve's experiment page."""
    from report_fixtures import ENV, add_experiment, add_run
    from served import Served
    db = str(tmp_path / "fleet.db")
    store = Store(db)
    exp = add_experiment(store, "fleet")
    other = {**ENV, "hostname": "board-2", "kernel_release": "6.6.0-rt", "board": "BeagleBone Black"}
    for board, env in (("board-1", ENV), ("board-2", other)):
        add_run(store, tmp_path, np.full(50, 5_000), settings={"target": board}, experiment_id=exp,
                env={**env, "target": board})
    rows = {r.field: r for r in machine_rows(machines(store.runs()))}
    assert rows["kernel"].values == ["6.1.0-rpi", "6.6.0-rt"] and rows["kernel"].differs
    assert rows["CPU"].values == ["Cortex-A53"] * 2 and not rows["CPU"].differs
    out = tmp_path / "r.html"
    r = cli("report", "--db", db, "--experiment", exp, "-o", out)
    assert r.code == 0, r.err
    pages = [out.read_text()]
    served = Served(db, log=tmp_path / "serve.log")
    try:
        status, body, _ = served.get(f"/experiments/{exp}")
        assert status == 200
        pages.append(body)
    finally:
        served.stop()
    for page in pages:
        table = page.split('<table class="machines">')[1].split("</table>")[0]
        assert table.count("<th") == 3                                 # the field column and one per board
        assert re.search(r'<tr class="differs"><td class="l">kernel ≠</td><td class="l">6.1.0-rpi</td>'
                         r'<td class="l">6.6.0-rt</td>', table), table
        assert '<tr><td class="l">CPU</td><td class="l">Cortex-A53</td><td class="l">Cortex-A53</td>' in table
        assert page.count('<table class="machines">') == 1
