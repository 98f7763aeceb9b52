"""rtla (the kernel's timerlat tracer) as a runtime. It runs in a real QEMU guest with Debian's PREEMPT_RT kernel
and the rtla package, beside rtprobe timer with explain, in one experiment; this host (whose kernel, like
Debian's stock ones, has no timerlat tracer) says why rtla cannot run there. The same guest, booted once, shows
setting explain's culprit test under a PREEMPT_RT kernel (the stock kernels' are this host's,
tests/test_explain.py, and the aarch64 guest's, tests/test_gpio.py). The importer on recorded output:
tests/test_rtla_units.py."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import pytest

import culprit
from rtscope import targets
from rtscope.runtimes import RUNTIMES
from rtscope.store import Store
from rtscope.targets import LocalTarget
from qemu_skip import qemu_unavailable
from test_import_headlines import imported_stats
from test_rtla_units import printed

pytestmark = [pytest.mark.real, pytest.mark.alone]


def test_this_host_says_what_rtla_lacks(cli, tmp_path):
    """A kernel without the timerlat tracer (this host's, like Debian's stock kernels): the runtime says so, and
    `rtscope run` exits 1 with that reason and stores nothing (a target's kernel is asked the same way)."""
    tracers = Path("/sys/kernel/tracing/available_tracers")
    if os.geteuid() != 0 or not tracers.exists():
        pytest.skip("needs root and tracefs")
    why = RUNTIMES["rtla"].unavailable(LocalTarget())
    if "timerlat" in tracers.read_text().split():
        assert why is None or "apt-get install -y rtla" in why
        return
    assert why.startswith("target local: kernel has no timerlat tracer (available_tracers: ")
    assert "linux-image-rt" in why
    spec = tmp_path / "stock.toml"
    spec.write_text('name = "stock"\n[[workload]]\nname = "timer"\nvariants = "absolute"\nruntime = "rtla"\n'
                    '[workload.params]\nloops = 100\n')
    db = str(tmp_path / "s.db")
    r = cli("run", spec, "--db", db)
    said = " ".join((r.out + r.err).split())
    assert r.code == 1, said
    assert "target local: kernel has no timerlat tracer (available_tracers: " in said and "linux-image-rt" in said
    assert not Path(db).exists() or Store(db).runs() == []


# --- In QEMU guests: Debian 12's PREEMPT_RT kernel has the timerlat tracer, its stock kernel has not ----------

QEMU_WHY = qemu_unavailable("x86_64", root_for="kernels are fetched with apt")


def guest_table(name: str, kernel: str) -> str:
    return (f'[targets.{name}]\nkind = "qemu"\narch = "x86_64"\nkernel = "{kernel}"\ncpus = 2\nmemory = "1G"\n'
            'packages = ["rtla"]\n')


@pytest.fixture(scope="module")
def short_tmp(tmp_path_factory):
    """Short paths for QEMU's unix sockets (also for an rtscope started as a subprocess)."""
    import shutil
    import tempfile
    tmp_path_factory.getbasetemp()   # pytest's own temporary root fixed first: not below the one removed here
    mine = tempfile.mkdtemp(prefix="rtsq-", dir="/tmp")
    saved, saved_env = tempfile.tempdir, os.environ.get("TMPDIR")
    tempfile.tempdir, os.environ["TMPDIR"] = mine, mine
    yield mine
    tempfile.tempdir = saved
    if saved_env is None:
        os.environ.pop("TMPDIR", None)
    else:
        os.environ["TMPDIR"] = saved_env
    shutil.rmtree(mine, ignore_errors=True)


@pytest.fixture(scope="module")
def rt_guest(short_tmp):
    """The PREEMPT_RT guest with rtla, booted once for this module: (pool, target name)."""
    before = dict(targets.TARGETS)
    targets.define("x86-rt-rtla", {"kind": "qemu", "arch": "x86_64", "kernel": "debian:rt", "cpus": 2,
                              "memory": "1G", "packages": ["rtla"]}, replace=True)
    with targets.Pool() as pool:
        pool.get("x86-rt-rtla")
        yield pool
    targets.TARGETS.clear()
    targets.TARGETS.update(before)


@pytest.mark.skipif(QEMU_WHY is not None, reason=QEMU_WHY or "")
def test_rtla_beside_explained_rtprobe_on_the_rt_guest(cli, tmp_path, rt_guest):
    """One experiment on the PREEMPT_RT guest: rtprobe timer with explain, then rtla timerlat, same CPU,
    period and priority; compare shows rtla's own figures beside rtscope's."""
    from rtscope.experiment import execute as exp_mod, spec as spec_mod
    text = ('name = "rtla"\ntarget = "x86-rt-rtla"\n' + guest_table("x86-rt-rtla", "debian:rt")
            + "".join('[[workload]]\nname = "timer"\nvariants = "absolute"\n'
                      f'runtime = "{rt}"\n[workload.params]\ninterval_us = 1000\nloops = 2000\n'
                      f'[workload.settings]\nrt_priority = 90\ncpu = 1\n{extra}'
                      for rt, extra in (("native", "mlock = true\nexplain = 5\n"), ("rtla", ""))))
    db = str(tmp_path / "s.db")
    store = Store(db)
    parsed = spec_mod.parse(text, "rtla.toml")
    planned = exp_mod.plan(parsed, 1)
    experiment = exp_mod.start(store, parsed, planned, 1, "rtla.toml")
    outcome = exp_mod.execute(store, experiment, None, rt_guest)  # the guest booted once, by the fixture
    assert experiment.status == "finished", outcome
    native, rtla = sorted(store.runs(), key=lambda run: run["runtime"])
    assert (native["runtime"], rtla["runtime"]) == ("native", "rtla")
    assert rtla["environment"]["preemption"] == "PREEMPT_RT"
    assert rtla["source"].endswith(" rtla timerlat hist -d 2 -p 1000 -n -b 1000 -E 10000 -c 1 -P f:90")
    trailer = rtla["trailer"]
    [hist] = trailer["histograms"].values()
    assert hist["cpu"] == 1 and hist["bucket_width"] == 1000 and 1000 <= hist["n"] <= 2100
    assert trailer["summary"]["n"] == hist["n"] and trailer["summary"]["max"] == hist["max"]
    irq = trailer["contexts"]["irq"]["summary"]
    # one IRQ and one thread sample per period woken; the end of the duration may fall between the last
    # period's IRQ and its thread (seen once: 1,943 IRQ samples, 1,942 thread samples)
    assert hist["n"] <= irq["n"] <= hist["n"] + 1
    assert irq["min"] <= trailer["summary"]["min"]  # the handler runs before the thread it wakes
    assert json.loads(cli("explain", native["id"], "--db", db, "--json").out)["samples"]

    compared = json.loads(cli("compare", "--experiment", "rtla", "--baseline", "runtime=native", "--db", db,
                              "--json").out)
    by_runtime = {c["configuration"]["runtime"]: c for c in compared["configurations"]}
    assert by_runtime["native"]["is_baseline"] and by_runtime["native"]["n_samples"] == 2000
    mine = by_runtime["rtla"]["stats"]
    assert (mine["n"], mine["min"], mine["max"]) == (hist["n"], trailer["summary"]["min"], hist["max"])
    assert mine["mean"] == pytest.approx(trailer["summary"]["mean"])


@pytest.mark.skipif(QEMU_WHY is not None, reason=QEMU_WHY or "")
def test_rtla_output_from_the_guest_keeps_its_headline(cli, tmp_path, rt_guest):
    """rtla's own output, captured in the same guest and imported: the headline is its summary rows."""
    out = rt_guest.get("x86-rt-rtla").check(["rtla", "timerlat", "hist", "-d", "1", "-c", "0", "-n"], "rtla").stdout
    (tmp_path / "live.txt").write_text(out)
    rows = printed(out)
    st = imported_stats(cli, str(tmp_path / "live.db"), "rtla", tmp_path / "live.txt")
    [(count, lo, avg, hi)] = [tuple(v for k, _, v in (rows[r][i] for r in ("count", "min", "avg", "max")))
                              for i in range(len(rows["count"])) if rows["count"][i][0] == "thread"]
    assert (st["n"], st["min"], st["mean"], st["max"]) == (count, lo, avg, hi)


@pytest.mark.skipif(QEMU_WHY is not None, reason=QEMU_WHY or "")
def test_a_stopped_rtla_run_leaves_no_timerlat_tracer(tmp_path, rt_guest):
    """A run stopped midway (here by its timeout; Ctrl-C and SIGTERM stop it the same way: TERM, then KILL, to
    its process group) stores nothing and leaves the guest without rtla's instance or timerlat threads, also
    when rtla did not stop on SIGINT within the second before the KILL (its clean stop is slow under TCG)."""
    from rtscope.errors import RtscopeError
    from rtscope.experiment.runner import execute
    from rtscope.experiment.spec import build_request
    guest = rt_guest.get("x86-rt-rtla")
    req = build_request("timer", "absolute", "rtla", {"loops": 30000, "interval_us": 1000},
                        {"cpu": 1, "target": "x86-rt-rtla"})
    store = Store(str(tmp_path / "s.db"))
    with pytest.raises(RtscopeError, match="did not finish"):
        execute(req, store, target=guest, timeout=4)
    assert store.runs() == []
    left = guest.check(["sh", "-c", "for i in $(seq 50); do ps -e -o comm= | grep -q '^timerlat/' || break; sleep 0.1; "
                        "done; ls /sys/kernel/tracing/instances; cat /sys/kernel/tracing/current_tracer; "
                        "ps -e -o comm= | grep -c '^timerlat/' || true"], "looking for timerlat", timeout=60)
    assert left.stdout.split() == ["nop", "0"], left.stdout


@pytest.mark.timing
@pytest.mark.skipif(QEMU_WHY is not None, reason=QEMU_WHY or "")
def test_explain_names_the_culprit_in_the_rt_guest(cli, tmp_path, rt_guest):
    """tests/culprit.py's culprit in the guest: rtprobe under a distinctive name, `exec sum` busy about 10 ms
    every 200 ms at SCHED_FIFO 90 on the probe's CPU. Under TCG the emulated timer interrupt itself takes
    milliseconds (1-265 ms seen on this shared host), so there the culprit must be the largest cause of at least
    half of the delayed samples the guest's kernel saw (samples mostly made of time the host did not run the
    vCPU, which the guest shows as unexplained, are left out); the issue's criterion (>= 90 %, within 20 % of
    the delay) applies under KVM or on a board."""
    from rtscope.experiment.runner import execute
    from rtscope.experiment.spec import build_request
    db = str(tmp_path / "store.db")
    store = Store(db)
    guest = rt_guest.get("x86-rt-rtla")
    pid = culprit.start_in_guest(guest, 1)
    try:
        req = build_request("timer", "absolute", "native", {"loops": 3000, "interval_us": 1000},
                            {"cpu": 1, "rt_priority": 80, "mlock": True, "explain": 10, "target": "x86-rt-rtla"})
        run_id = execute(req, store, target=guest)
    finally:
        guest.run(["kill", "-9", str(pid)])
    left = guest.run(["sh", "-c", "ls /sys/kernel/tracing/instances"]).stdout.split()
    assert [x for x in left if x.startswith("rtscope-")] == []
    run = store.get_run(run_id)
    assert "rt" in run.machine["kernel_release"] and run.machine["preemption"] == "PREEMPT_RT"
    samples = json.loads(cli("explain", run_id, "--db", db, "--json").out)["samples"]
    emulated = run.machine["accelerator"] == "tcg"
    big, named = culprit.check_named(samples, pid, None if emulated else 0.2, seen_only=emulated)
    assert big >= (3 if emulated else 5) and named >= (0.5 if emulated else 0.9) * big, [
        (s["value_ns"], s["self_ns"], s["unexplained_ns"], [(c["name"], c["pid"], c["duration_ns"])
                                                           for c in s["causes"][:2]]) for s in samples]


RT_RUNTIME = "/proc/sys/kernel/sched_rt_runtime_us"


@pytest.mark.timing
@pytest.mark.skipif(QEMU_WHY is not None, reason=QEMU_WHY or "")
def test_rt_throttling_in_the_guest_remedied_through_the_loop_and_undone(cli, tmp_path, rt_guest):
    """The remedy loop through a QEMU guest, on a system setting: the guest's 6.1 kernel throttles real-time
    tasks by sched_rt_runtime_us alone (no fair deadline server, which from 6.12 on gives normal tasks their
    time whatever that setting says, tests/test_explain_throttled.py). A SCHED_FIFO 1 loop busy 99 % of the
    time on the probe's CPU uses the RT budget up, so for tens of ms a second a normal busy loop runs while the
    probe (SCHED_FIFO 80) waits: explain names rt_throttled, --suggest puts rt_runtime_us = -1 first, the written
    spec, run in the guest (4 runs a cell), calls it better on max or p99 and worse on nothing, its remedy's runs
    show no throttling left, and the guest's value is the original after every run."""
    from rtscope.experiment import execute as exp_mod, spec as spec_mod
    from rtscope.experiment.runner import execute
    from rtscope.experiment.spec import build_request
    guest = rt_guest.get("x86-rt-rtla")
    original = guest.check(["cat", RT_RUNTIME], "reading the RT budget").stdout.strip()
    assert int(original) > 0, "RT throttling is off in the guest"
    db = str(tmp_path / "store.db")
    store = Store(db)
    # SCHED_FIFO 1, below PREEMPT_RT's interrupt threads (FIFO 50: the guest's network stays served), busy 99 %
    # of the time: it uses the RT budget (95 % of each second) up, and the throttled 50 ms come every second
    # (at 97 % they were once too short to tell from a kernel section: no sample above 10 ms)
    hog = culprit.start_in_guest(guest, 1, priority=1, name="rtsc-fifo", busy_s=0.198, period_s=0.2)
    normal = culprit.start_in_guest(guest, 1, priority=0, name="rtsc-normal", busy_s=None)
    spec = tmp_path / "ab.toml"
    try:
        req = build_request("timer", "absolute", "native", {"loops": 1000, "interval_us": 1000},
                            {"cpu": 1, "rt_priority": 80, "mlock": True, "explain": 5, "target": "x86-rt-rtla"})
        run_id = execute(req, store, target=guest)
        samples = json.loads(cli("explain", run_id, "--db", db, "--json").out)["samples"]
        # the samples above 10 ms the guest's kernel saw (not mostly a TCG stall: unexplained, or its own time)
        big = [s for s in samples
               if s["value_ns"] > 10_000_000 and s["unexplained_ns"] + s["self_ns"] < s["value_ns"] / 2]
        named = [s for s in big if s["causes"] and (s["causes"][0]["kind"], s["causes"][0]["pid"]) ==
                 ("rt_throttled", normal)]
        assert big and len(named) >= 0.5 * len(big), [(s["value_ns"], s["causes"][:2]) for s in samples]
        doc = json.loads(cli("explain", run_id, "--db", db, "--suggest", "--json").out)
        top = doc["remedies"][0]
        assert (top["for"]["kind"], top["setting"], top["value"]) == ("rt_throttled", "rt_runtime_us", -1), \
            doc["remedies"]
        r = cli("explain", run_id, "--db", db, "--write-spec", spec, "--repetitions", "4", "--remedies", "1")
        assert r.code == 0, r.err
        parsed = spec_mod.parse(spec.read_text(), str(spec))
        experiment = exp_mod.start(store, parsed, exp_mod.plan(parsed, 1), 1, str(spec))
        outcome = exp_mod.execute(store, experiment, None, rt_guest)   # the guest booted once, its culprits in it
        assert experiment.status == "finished", outcome
        assert guest.check(["cat", RT_RUNTIME], "reading the RT budget").stdout.strip() == original
    finally:
        guest.run(["kill", "-9", str(hog), str(normal)])
    out = json.loads(cli("compare", "--experiment", f"remedies-run-{run_id}", "--db", db, "--json").out)
    [k] = out["comparisons"]
    assert "rt_runtime_us=-1" in k["configuration"].split() and (k["runs"], k["baseline_runs"]) == (4, 4), k
    assert {row["metric"] for row in k["rows"]} >= {"max", "p99"}, k["rows"]
    why = {c["configuration"]: c for c in out["causes"]}   # compare's side-by-side shares, per cause kind
    throttled = {label: sum(x["excess_ns"] for x in c["kinds"] if x["kind"] == "rt_throttled")
                 for label, c in why.items()}
    print("guest remedy rt_runtime_us=-1:", "; ".join(
        f"{row['metric']} {row['baseline']:.1f} -> {row['value']:.1f} {row['verdict']} (p Holm {row['p_holm']:.2g})"
        for row in k["rows"] if row["metric"] in ("p99", "max")), "; rt_throttled excess", throttled,
        file=sys.__stderr__)
    # 4 runs a cell: under TCG the guest's own timer noise (1-265 ms) left 2 too few for a verdict (3 measured
    # max 34.0 -> 4.5 ms, p Holm 0.1); the p99 holds that noise, the max the throttled 50 ms
    verdicts = {row["metric"]: row["verdict"] for row in k["rows"]}
    assert "better" in (verdicts["max"], verdicts["p99"]) and "worse" not in verdicts.values(), k["rows"]
    remedy = next(label for label in throttled if "rt_runtime_us=-1" in label.split())
    assert throttled[remedy] == 0 and max(throttled.values()) > 0, throttled
