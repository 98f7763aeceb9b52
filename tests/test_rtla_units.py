"""rtla (the kernel's timerlat tracer) as an importer: real `rtla timerlat hist` output captured in the PREEMPT_RT
guest (tests/fixtures/rtla: rtla 6.1 of Debian 12, under TCG; `_us`: both CPUs, µs; `_ns`: CPU 1, -n -b 1000
-E 5000 -P f:90 -p 500) keeps rtla's own headline; bad output is refused; `rtscope check` takes the runtime for
timer absolute only. The runtime on this host and in a QEMU guest: tests/test_rtla.py."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from rtscope.store import Store
from test_import_headlines import imported_stats

pytestmark = pytest.mark.fast


FIXTURES = Path(__file__).parent / "fixtures" / "rtla"


def printed(text: str) -> dict[str, list[tuple[str, int, int | None]]]:
    """rtla's own summary rows, read independently of the importer: row -> [(kind, cpu, value)]."""
    header = re.search(r"^Index\s+(.*)$", text, re.M).group(1).split()
    cols = [(("thread" if c.startswith("Thr") else "irq"), int(c[4:])) for c in header]
    rows = {}
    for name in ("count", "min", "avg", "max", "over"):
        values = re.search(rf"^{name}:\s+(.*)$", text, re.M).group(1).split()
        rows[name] = [(k, cpu, int(v)) for (k, cpu), v in zip(cols, values)]
    return rows


@pytest.mark.parametrize("fixture, unit_ns", [("timerlat_hist_us.txt", 1000), ("timerlat_hist_ns.txt", 1)])
def test_import_keeps_rtlas_own_headline(cli, tmp_path, fixture, unit_ns):
    text = (FIXTURES / fixture).read_text()
    rows = printed(text)
    thread = {row: [(cpu, v) for k, cpu, v in vals if k == "thread"] for row, vals in rows.items()}
    n = sum(v for _, v in thread["count"])
    db = str(tmp_path / "r.db")
    st = imported_stats(cli, db, "rtla", FIXTURES / fixture)
    assert st["n"] == n
    assert st["min"] == min(v for _, v in thread["min"]) * unit_ns
    assert st["max"] == max(v for _, v in thread["max"]) * unit_ns
    mean = sum(v * c for (_, v), (_, c) in zip(thread["avg"], thread["count"])) / n * unit_ns
    assert st["mean"] == pytest.approx(mean)
    if len(thread["count"]) == 1:
        assert st["mean"] == thread["avg"][0][1] * unit_ns  # one CPU: exactly rtla's avg
    [run] = Store(db).runs()
    trailer = run["trailer"]
    assert trailer["primary_context"] == "thread"
    # One histogram per CPU for the primary context, rtla's own per-CPU figures in each.
    hists = sorted(trailer["histograms"].values(), key=lambda h: h["cpu"])
    assert [(h["cpu"], h["n"], h["overflow"]) for h in hists] == \
        [(cpu, c, o) for (cpu, c), (_, o) in zip(thread["count"], thread["over"])]
    # The IRQ latency is kept beside it, per CPU, with rtla's figures.
    irq = trailer["contexts"]["irq"]
    irq_rows = {row: [(cpu, v) for k, cpu, v in vals if k == "irq"] for row, vals in rows.items()}
    assert sorted((h["cpu"], h["n"], h["min"], h["max"]) for h in irq["histograms"].values()) == \
        [(cpu, c, lo * unit_ns, hi * unit_ns) for (cpu, c), (_, lo), (_, hi)
         in zip(irq_rows["count"], irq_rows["min"], irq_rows["max"])]
    assert irq["summary"]["max"] == max(v for _, v in irq_rows["max"]) * unit_ns
    threads = json.loads(cli("show", str(run["id"]), "--db", db, "--json").out).get("threads") or []
    if len(hists) > 1:
        assert [t["cpu"] for t in threads] == [h["cpu"] for h in hists]


def test_bad_rtla_output_is_refused_and_nothing_is_stored(cli, tmp_path):
    good = (FIXTURES / "timerlat_hist_us.txt").read_text()
    cases = {
        "empty.txt": ("", "empty file"),
        "cyclictest.txt": ("# /dev/cpu_dma_latency set to 0us\nT: 0 ( 812) P:90 I:1000 C: 100 Min: 3 Act: 5 Avg: 4 "
                           "Max: 9\n", "no '# RTLA timerlat histogram' table"),
        "headerless.txt": (good.split("Index")[1].split("\n", 1)[1], "histogram rows without an 'Index"),
        "cut.txt": (good.split("count:")[0], "no count:, min:, avg:, max: summary row"),
        "edited.txt": (re.sub(r"^count:\s+\d+", "count:     1999", good, flags=re.M), "CPU 0 irq"),
        "column.txt": (good.replace("Thr-001", "Foo-001"), "unknown column 'Foo-001'"),
    }
    db = tmp_path / "bad.db"
    for name, (text, said) in cases.items():
        (tmp_path / name).write_text(text)
        r = cli("import", "rtla", tmp_path / name, "--db", db)
        assert r.code == 2 and said in " ".join(r.err.split()), (name, r.err)
    r = cli("import", "rtla", FIXTURES / "timerlat_hist_us.txt", "--variant", "relative", "--db", db)
    assert r.code == 2 and "variant absolute" in r.err
    assert Store(str(db)).runs() == []


def test_check_accepts_rtla_for_timer_absolute_only(cli, tmp_path):
    spec = tmp_path / "s.toml"
    block = '[[workload]]\nname = "timer"\nvariants = "{v}"\nruntime = "rtla"\n[workload.settings]\nrt_priority = 90\n'
    spec.write_text('name = "r"\non_unavailable = "skip"\n' + block.format(v="absolute"))
    r = cli("check", spec)
    assert r.code == 0, r.err
    spec.write_text('name = "r"\n' + block.format(v="relative"))
    r = cli("check", spec)
    assert r.code != 0 and "relative" in r.out + r.err
