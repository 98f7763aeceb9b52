"""BEAM node targets: the same harness code measured inside a running node and in a VM rtscope starts itself.

A second Erlang node (tests/beamnode.py: its own mount namespace, this checkout hidden, so the harness is
loaded over Erlang distribution) on this machine; runs interleaved, node then local, in one process:

  1. empty-call overhead (exec nothing): the timed loop is the same code, so the figures must match
     within +-10 % (the mean; the median moves in steps of the clock's 10 ns);
  2. exec sum n=4000: the statistics on the node target and on the local `beam` runtime side by side.

Run as root: .venv/bin/python bench/beam_node.py [--pairs 5] [--iterations 20000]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))
import beamnode  # noqa: E402

from rtscope import targets  # noqa: E402
from rtscope.analysis.distribution import of_run  # noqa: E402
from rtscope.experiment.runner import execute  # noqa: E402
from rtscope.experiment.spec import build_request  # noqa: E402
from rtscope.store import Store  # noqa: E402

STATS = ("min", "p50", "mean", "p99", "max", "stdev")


def pairs(store: Store, node: targets.Target, variant: str, params: dict, n_pairs: int) -> dict[str, list]:
    """Interleaved runs: node, local, node, local, ...; each run's statistics."""
    got: dict[str, list] = {"node": [], "local": []}
    for _ in range(n_pairs):
        for where, target, settings in (("node", node, {"target": "board"}), ("local", None, {})):
            req = build_request("exec", variant, "beam", params, settings)
            run = store.get_run(execute(req, store, target=target))
            got[where].append(of_run(store, run).stats)
    return got


def median_of(runs: list, stat: str) -> float:
    return statistics.median(s[stat] for s in runs)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--pairs", type=int, default=5)
    ap.add_argument("--iterations", type=int, default=20_000)
    a = ap.parse_args()
    why = beamnode.available()
    if why:
        sys.exit(f"bench/beam_node.py: {why}")
    with tempfile.TemporaryDirectory(prefix="rtscope-bench-node-") as tmp:
        board = beamnode.Board(Path(tmp) / "board").start()
        try:
            targets.define("board", {"url": board.url, "cookie_file": str(board.cookie_file)}, replace=True)
            store = Store(str(Path(tmp) / "bench.db"))
            with targets.Pool() as pool:
                node = pool.get("board")
                empty = pairs(store, node, "nothing", {"iterations": a.iterations, "pause_ms": 0}, a.pairs)
                # The clock steps by 10 ns here, so an empty call's median is 70 or 80: the mean resolves it.
                print(f"1. empty call, {a.pairs} interleaved pairs of {a.iterations} calls, medians over runs:")
                for stat in ("mean", "p50"):
                    node_v, local_v = median_of(empty["node"], stat), median_of(empty["local"], stat)
                    print(f"   {stat:4}: node {node_v:.1f} ns, local VM {local_v:.1f} ns, ratio node/local "
                          f"{node_v / local_v:.3f} (target 0.90-1.10)")
                sums = pairs(store, node, "sum", {"n": 4000, "iterations": 2000, "pause_ms": 0}, a.pairs)
            print(f"2. exec sum n=4000, 2000 calls, median over {a.pairs} runs each (ns):")
            print(f"   {'':8}" + "".join(f"{s:>12}" for s in STATS))
            for where in ("node", "local"):
                print(f"   {where:8}" + "".join(f"{median_of(sums[where], s):>12.0f}" for s in STATS))
            print("   ratio   " + "".join(f"{median_of(sums['node'], s) / median_of(sums['local'], s):>12.3f}"
                                         for s in STATS))
        finally:
            board.stop()


if __name__ == "__main__":
    main()
