"""VM targets: boot-to-first-sample per target kind, and timer latency on the host beside VMs per kernel.

  1. boot-to-first-sample: from "use this target" to the first stored run (exec sum, 10 calls), for the local
     target, an SSH target (a namespaced sshd on 127.0.0.1), and QEMU targets with a warm cache (kernel and
     image built before) and, with --cold, a cold one (an empty RTSCOPE_CACHE: kernel fetch, mmdebstrap,
     image, boot);
  2. timer latency (rtprobe timer, 1 ms interval, --loops per run) on the host and in each VM (x86_64 and the
     virtual Raspberry Pi 3, stock and PREEMPT_RT kernels): median and max in one table. Under TCG these
     numbers measure QEMU's emulator, not the kernels (the table says which accelerator ran).

Run as root: .venv/bin/python bench/vm_targets.py [--loops 5000] [--cold]
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))
import sshd  # noqa: E402

from rtscope import targets  # noqa: E402
from rtscope.experiment.runner import execute  # noqa: E402
from rtscope.experiment.spec import build_request  # noqa: E402
from rtscope.store import Store  # noqa: E402

GUESTS = {"x86-stock": ("x86_64", "debian:stock"), "x86-rt": ("x86_64", "debian:rt"),
          "pi3-stock": ("aarch64", "debian:stock"), "pi3-rt": ("aarch64", "debian:rt")}


def first_sample(name: str, store: Store) -> float:
    req = build_request("exec", "sum", "native", {"iterations": 10, "pause_ms": 0}, {"target": name})
    start = time.perf_counter()
    with targets.Pool() as pool:
        execute(req, store, target=pool.get(name))
        took = time.perf_counter() - start
    return took


def define_vm(name: str, arch: str, kernel: str) -> None:
    targets.define(name, {"kind": "qemu", "arch": arch, "kernel": kernel, "cpus": 2, "memory": "1G"}, replace=True)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--loops", type=int, default=5000)
    ap.add_argument("--cold", action="store_true", help="also measure x86_64 and arm64 with an empty cache")
    args = ap.parse_args()
    if os.geteuid() != 0:
        print("bench/vm_targets.py: skipped: needs root")
        return 0
    with tempfile.TemporaryDirectory(prefix="rtscope-bench-vm-") as tmp:
        base = Path(tmp)
        store = Store(str(base / "bench.db"))
        server = sshd.SshServer(base / "ssh", "rtscope-bench-ssh").start()
        try:
            targets.define("ssh", {"url": server.url, "identity": str(server.user_key),
                                   "known_hosts": str(server.known_hosts), "workdir": str(server.workdir)})
            rows = [("local", first_sample("local", store)), ("ssh (loopback, first deploy)", first_sample("ssh", store)),
                    ("ssh (loopback, deployed)", first_sample("ssh", store))]
        finally:
            server.stop()
        for name, (arch, kernel) in GUESTS.items():
            define_vm(name, arch, kernel)
            first_sample(name, store)  # warm the cache (kernel, image)
            rows.append((f"qemu {name} (warm cache)", first_sample(name, store)))
        if args.cold:
            os.environ["RTSCOPE_CACHE"] = str(base / "cold-cache")
            for name in ("x86-stock", "pi3-stock"):
                rows.append((f"qemu {name} (cold cache)", first_sample(name, store)))
            del os.environ["RTSCOPE_CACHE"]
        print("1. boot-to-first-sample")
        for label, seconds in rows:
            print(f"   {label:34} {seconds:7.2f} s")
        print(f"2. timer latency, rtprobe timer absolute, 1 ms interval, {args.loops} loops per run")
        print(f"   {'target':12} {'kernel':22} {'accel':6} {'median µs':>10} {'max µs':>10}")
        for name in ("local", *GUESTS):
            req = build_request("timer", "absolute", "native", {"interval_us": 1000, "loops": args.loops},
                                {"target": name})
            with targets.Pool() as pool:
                run = store.get_run(execute(req, store, target=pool.get(name)))
            values = store.primary_samples(run) / 1000
            env = run["environment"]
            print(f"   {name:12} {env['kernel_release'][:22]:22} {env.get('accelerator', '-'):6} "
                  f"{np.median(values):10.1f} {values.max():10.1f}")
        print("   (tcg: the VM rows measure QEMU's emulator on this host, not the kernels; see docs/kernels.md)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
