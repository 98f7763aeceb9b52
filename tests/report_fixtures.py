"""Fixture stores for the compare / recommend / report / API tests, built from sample files (no probes)."""

from __future__ import annotations

from datetime import datetime, timezone
from pathlib import Path

import numpy as np

from rtscope import samplefile
from rtscope.samplefile import Column
from rtscope.store import Store, experiments

ENV = {"hostname": "board-1", "kernel_release": "6.1.0-rpi", "kernel_version": "#1 SMP PREEMPT_RT",
       "preemption": "PREEMPT_RT", "machine": "aarch64", "cpu_model": "Cortex-A53", "cpu_count": 4,
       "cpus_online": [0, 1, 2, 3], "isolated_cpus": "3", "governors": {"0": "performance"},
       "memory_bytes": 1 << 30, "board": "Raspberry Pi 3 Model B", "loadavg": "0.01 0.02 0.00 1/100 1",
       "rtscope_version": "0.1.0", "probe_version": "0.1.0", "python_version": "3.11.2",
       "timestamp": "2026-01-01T00:00:00+00:00"}


def add_experiment(store: Store, name: str) -> int:
    with store.transaction() as c:
        return c.execute(experiments.insert().values(
            name=name, spec={"name": name}, status="finished",
            created_at=datetime.now(timezone.utc).isoformat())).inserted_primary_key[0]


def add_run(store: Store, tmp: Path, values, *, workload="exec", variant="sum", runtime="native",
            settings=None, params=None, tags=None, experiment_id=None, side=None, unit="ns", measure="duration",
            trailer=None, env=None, side_units=None, causes=None) -> int:
    """Write a sample file of `values` (+ side columns) and store it as one run (with the causes of its
    explained samples, store.add_run's form, when given)."""
    values = np.asarray(values)
    cols = [Column(measure, unit, "f64" if values.dtype.kind == "f" else "i64")]
    data = {measure: values}
    for name, arr in (side or {}).items():
        cols.append(Column(name, (side_units or {}).get(name, "count"), "i64"))
        data[name] = np.asarray(arr, dtype=np.int64)
    header = samplefile.make_header(workload, variant, runtime, "test", "0", "2026-01-01T00:00:00Z", cols,
                                    settings or {}, {"iterations": len(values), **(params or {})})
    path = tmp / f"run-{np.random.default_rng().integers(1 << 62)}.rts"
    samplefile.write(path, header, data, {"finished_at": "2026-01-01T00:00:01Z", **(trailer or {})})
    return store.add_run(samplefile.read(path), env or ENV, tags=tags, experiment_id=experiment_id,
                         source=str(path), **({"causes": causes} if causes is not None else {}))


def add_histogram_run(store: Store, tmp: Path, values, *, bucket_width=1000, buckets=200, **kw) -> int:
    """A histogram-only run (n_samples 0), like a long timer run keeps."""
    values = np.asarray(values)
    counts = np.bincount((values // bucket_width).astype(np.int64).clip(0, buckets), minlength=buckets + 1)
    hist = {"unit": "ns", "bucket_width": bucket_width, "min_value": 0, "counts": counts[:buckets].tolist(),
            "overflow": int(counts[buckets:].sum()), "n": int(len(values)), "min": int(values.min()),
            "max": int(values.max()), "sum": int(values.sum())}
    return add_run(store, tmp, np.empty(0, dtype=np.int64), trailer={"histograms": {"latency": hist}}, **kw)


def gc_columns(n: int, rng: np.random.Generator, every: int = 50):
    """heap_size growing and dropping at each minor GC; minor_gcs counting them."""
    gcs = np.arange(n) // every
    heap = 233 + (np.arange(n) % every) * 10 + rng.integers(0, 3, n)
    return {"heap_size": heap, "minor_gcs": gcs}


def study_store(tmp: Path, *, reps: int = 3, n: int = 2000, seed: int = 1) -> tuple[str, dict]:
    """Study-1 style store: exec sum under fullsweep_after 0/65535 and governor conservative/performance/powersave.

    fullsweep_after=0 scales every sample by 1.05; governor=performance by 0.5;
    powersave is identical in distribution to the baseline. Returns (db path, {name: run ids}).
    """
    db = str(tmp / "study.db")
    store = Store(db)
    rng = np.random.default_rng(seed)
    exp = add_experiment(store, "study1")
    ids: dict[str, list[int]] = {}
    configs = {"base": ({"fullsweep_after": 65535, "governor": "conservative"}, 1.0),
               "fs0": ({"fullsweep_after": 0, "governor": "conservative"}, 1.05),
               "perf": ({"fullsweep_after": 65535, "governor": "performance"}, 0.5),
               "save": ({"fullsweep_after": 65535, "governor": "powersave"}, 1.0)}
    for rep in range(reps):
        for name, (settings, scale) in configs.items():
            values = ((3_000_000 + rng.gamma(20, 2500, n)) * scale).astype(np.int64)
            ids.setdefault(name, []).append(add_run(
                store, tmp, values, settings=settings, experiment_id=exp, tags=["study1", f"rep{rep}"],
                side=gc_columns(n, rng)))
    return db, ids


EVIL = "<script>window.rtsInjected=1</script><img src=x onerror=alert(1)>$x$ & <!--"


def mixed_store(tmp: Path, seed: int = 2) -> str:
    """Every kind of data a report handles: exec runs with GC columns (one setting value carries markup and
    mathtext), histogram-only timer runs, and study-5 task-memory runs of two task models."""
    db = str(tmp / "mixed.db")
    store = Store(db)
    rng = np.random.default_rng(seed)
    for _ in range(3):
        for prio, scale in (("normal", 1.0), ("high", 0.8), (EVIL, 1.2)):
            n = 3000
            values = (5_000_000 + rng.gamma(4, 25_000, n) * scale).astype(np.int64)
            values[rng.integers(0, n, 5)] += 600_000          # spikes
            add_run(store, tmp, values, settings={"priority": prio}, tags=["mixed", EVIL], side=gc_columns(n, rng),
                    side_units={"heap_size": "words"})
        for kernel, lo, hi in (("normal", 5_000, 78_000), ("preempt_rt", 7_000, 36_000)):
            add_histogram_run(store, tmp, rng.integers(lo, hi, 20_000), workload="timer", variant="cyclic",
                              runtime="cyclictest", settings={"kernel": kernel}, measure="latency")
    counts = np.array([1, 10, 100, 1000, 2000, 5000, 10000])
    for model, per_task in (("erlang_process", 2835), ("callback", 204)):
        for _ in range(2):
            mem = (1_000_000 + per_task * counts + rng.normal(0, 2000, len(counts))).astype(np.int64)
            add_run(store, tmp, mem, workload="tasks", variant="memory", runtime="beam", measure="bytes",
                    unit="bytes", settings={"model": model}, side={"tasks": counts}, params={"counts": "1,10"})
    return db


NERVES_FLAGS = "+sbwt none +sbwtdcpu none +sbwtdio none"


def nerves_store(tmp: Path) -> str:
    """A store of the Nerves study's shape (issue 50's figures): 12 exec sum configurations, fullsweep_after ×
    min_heap_size with the VM's flags in some (long labels), 3,000 samples each, one far sample (40,000 µs) in
    the fifth. Returns its path."""
    db = str(tmp / "nerves.db")
    store = Store(db)
    rng = np.random.default_rng(50)
    exp = add_experiment(store, "nerves rt exec sum")
    i = 0
    for fullsweep in (0, 6, 65535, 131071):
        for heap in (34, 233, 196418):
            v = (4_000_000 + 40_000 * i + rng.gamma(3, 30_000, 3000)).astype(np.int64)
            if i == 4:
                v[100] = 40_000_000
            add_run(store, tmp, v, workload="exec", variant="sum", runtime="beam", experiment_id=exp,
                    settings={"fullsweep_after": fullsweep, "min_heap_size": heap,
                              "vm_flags": NERVES_FLAGS if heap == 233 else "", "schedulers_online": 4},
                    params={"n": 4000})
            i += 1
    return db
