"""A test-only runtime with a known optimum and known noise, to test `rtscope tune` and the gate deterministically.

`synthetic` runs exec sum as a small Python process (this file run as a script) that writes an ordinary
sample file: its times follow a known function of fullsweep_after, min_heap_size, priority and n (the shape
study 1 measured on the BEAM: a small heap costs most, fullsweep_after matters only with a small heap), with
seeded noise within and between runs. It goes through the real runner and store; only the probe is made up,
because the BEAM's own timings cannot be known in advance. Tests enable it with `enable(monkeypatch)`.

With SYNTHETIC_IN_FORCE=1 in its environment it does what the BEAM does with spawn options it cannot honour
(fullsweep_after kept in 16 bits, min_heap_size rounded up to a heap size of at least 233 words): its times
follow the values in force, its header's `process` records them, and its trailer notes the difference.
"""

from __future__ import annotations

import json
import math
import os
import sys
import time
import zlib
from collections import Counter
from pathlib import Path

import numpy as np

OPTIMUM_HEAP = 46422
BASE_NS = 100_000.0
SUM_N = 4000     # exec sum's default n: BASE_NS is the time of sum(SUM_N); a larger n takes longer in proportion
SAMPLES = 300


def expected_ns(fullsweep_after: int | None, min_heap_size: int | None, priority: str | None) -> float:
    """The noise-free mean time of one call (ns) under these settings (unset: the BEAM's defaults)."""
    heap = 233 if min_heap_size is None else max(min_heap_size, 1)
    sweep = 65535 if fullsweep_after is None else fullsweep_after
    small = max(0.0, math.log10(OPTIMUM_HEAP / heap)) / math.log10(OPTIMUM_HEAP / 233)
    large = 0.05 * max(0.0, math.log10(heap / OPTIMUM_HEAP))
    f_heap = 1.0 + 0.5 * small + large
    f_sweep = 1.0 + 0.3 * (1.0 - min(1.0, math.log10(sweep + 1) / math.log10(65536))) * (heap < 20000)
    f_prio = {"low": 1.15, "high": 0.98}.get(priority or "normal", 1.0)
    return BASE_NS * f_heap * f_sweep * f_prio


def spec_text(name: str, repetitions: int, axes: list[str], claims: list[tuple[str, str, str, str, str, str]] = (),
              extra: str = "", iterations: int = 60) -> str:
    """A spec of exec sum blocks on this runtime, one per setting axis (`min_heap_size = [233, 46422]`), with claims
    (id, text, metric, baseline, cell, expect; baseline and cell as `NAME = VALUE`) and extra top-level text."""
    out = [f'name = "{name}"', f"repetitions = {repetitions}"]
    for axis in axes:
        out += ["[[workload]]", 'name = "exec"', 'variants = "sum"', 'runtime = "synthetic"', "[workload.params]",
                f"iterations = {iterations}", "pause_ms = 0", "[workload.settings]", axis]
    for cid, text, metric, baseline, cell, expect in claims:
        out += ["[[claim]]", f'id = "{cid}"', f'text = "{text}"', f'metric = "{metric}"',
                f"baseline = {{ {baseline} }}", f"cell = {{ {cell} }}", f'expect = "{expect}"']
    return "\n".join(out) + "\n" + extra


def enable(monkeypatch) -> None:
    from rtscope.runtimes import RUNTIMES
    monkeypatch.setitem(RUNTIMES, "synthetic", SyntheticRuntime())


def _runtime_class():
    from rtscope.runtimes.base import Runtime

    class Synthetic(Runtime):
        def __init__(self):
            super().__init__("synthetic", "test-only: exec sum with a known optimum and known noise",
                             {"exec": ("sum",)}, ("fullsweep_after", "min_heap_size", "priority"))
            self.calls: Counter = Counter()

        def command(self, req, out, site):
            key = json.dumps([req.settings, req.params], sort_keys=True, default=str)
            self.calls[key] += 1
            seed = zlib.crc32(key.encode()) * 1000 + self.calls[key]
            return [sys.executable, str(Path(__file__).resolve()), out,
                    json.dumps({"settings": req.settings, "params": req.params, "seed": seed})]

    return Synthetic


def SyntheticRuntime():
    return _runtime_class()()


def main(out: str, arg: str) -> None:
    from rtscope import samplefile
    a = json.loads(arg)
    s = a["settings"]
    extra, notes = {}, []
    if os.environ.get("SYNTHETIC_IN_FORCE") == "1":
        from rtscope.settings.registry import beam_fullsweep_after, beam_min_heap_size
        ran = {"fullsweep_after": beam_fullsweep_after(s.get("fullsweep_after", 65535)),
               "min_heap_size": beam_min_heap_size(s.get("min_heap_size", 233)),
               "priority": s.get("priority", "normal")}
        extra["process"] = ran
        notes = [f"{k} {s[k]} requested, the process runs with {v}" for k, v in ran.items() if k in s and s[k] != v]
        s = {**{k: v for k, v in ran.items() if k != "priority"}, **s}   # unset: the defaults in force, as the BEAM
        a["settings"] = s
        s = {**s, **{k: v for k, v in ran.items()}}                       # the times follow what is in force
    rng = np.random.default_rng(a["seed"])
    mean = (expected_ns(s.get("fullsweep_after"), s.get("min_heap_size"), s.get("priority"))
            * a["params"].get("n", SUM_N) / SUM_N)
    run_offset = rng.normal(0.0, 0.03 * mean)
    n = int(a["params"].get("iterations", SAMPLES))
    times = np.maximum(1, rng.normal(mean + run_offset, 0.10 * mean, n)).astype(np.int64)
    cols = [samplefile.Column("time", "ns", "i64")]
    header = samplefile.make_header("exec", "sum", "synthetic", "synthetic", "1", "2026-01-01T00:00:00Z", cols,
                                    settings=a["settings"], params=a["params"], **extra)
    time.sleep(float(os.environ.get("SYNTHETIC_RUN_S", "0")))   # a longer run, for tests that interrupt one
    samplefile.write(out, header, {"time": times}, {"finished_at": "2026-01-01T00:00:01Z", "notes": notes})


if __name__ == "__main__":
    if sys.argv[1] == "rtscope":          # the CLI with this runtime enabled (tests that need a process)
        from rtscope.cli import main as cli_main
        from rtscope.runtimes import RUNTIMES
        RUNTIMES["synthetic"] = SyntheticRuntime()
        sys.argv = sys.argv[1:]
        cli_main()
    else:
        main(sys.argv[1], sys.argv[2])
