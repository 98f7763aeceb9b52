"""SSH targets: what reaching a board over SSH costs, measured beside the same runs made locally.

Loopback targets: real OpenSSH servers on 127.0.0.1, each in its own UTS and
mount namespace (tests/sshd.py), so rtscope must deploy its probe there.

  1. overhead per run: the same short run (exec sum, 100 calls) made locally and on an SSH target
     (connection reused, deploy cached), interleaved; the median difference per run (target: <= 1 s)
     and how often rtprobe was copied (target: once per version);
  2. fleet: the same experiment on N = 1, 2, 4 loopback targets; wall time against one target's
     (target: about one target's, not N times);
  3. timer latency through the SSH target and locally, interleaved pairs on the same machine: the
     ratio of p99s (target: within +-10%: the remote path must not disturb the measurement).

Run as root (sshd in namespaces): .venv/bin/python bench/ssh_target.py [--pairs 5] [--loops 20000]
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
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


def define(server: sshd.SshServer, name: str) -> str:
    targets.define(name, {"url": server.url, "identity": str(server.user_key),
                          "known_hosts": str(server.known_hosts), "workdir": str(server.workdir)}, replace=True)
    return name


def overhead(server: sshd.SshServer, store: Store, rounds: int) -> None:
    req_local = build_request("exec", "sum", "native", {"iterations": 100, "pause_ms": 0})
    req_ssh = build_request("exec", "sum", "native", {"iterations": 100, "pause_ms": 0}, {"target": "board"})
    local, remote = [], []
    with targets.Pool() as pool:
        t = pool.get("board")
        copies = []
        real_put = t.put
        t.put = lambda *a, **kw: (copies.append(a[1]), real_put(*a, **kw))
        first = time.perf_counter()
        execute(req_ssh, store, target=t)  # connect done; deploys (or finds the cached copy)
        first = time.perf_counter() - first
        for _ in range(rounds):
            for req, out, target in ((req_local, local, None), (req_ssh, remote, t)):
                start = time.perf_counter()
                execute(req, store, target=target)
                out.append(time.perf_counter() - start)
    diff = statistics.median(remote) - statistics.median(local)
    print(f"1. overhead per run ({rounds} interleaved pairs, exec sum x100): local median "
          f"{statistics.median(local) * 1000:.0f} ms, ssh median {statistics.median(remote) * 1000:.0f} ms, "
          f"difference {diff * 1000:.0f} ms per run (target <= 1000 ms); first ssh run {first * 1000:.0f} ms; "
          f"files copied to the target: {len(copies)} ({', '.join(Path(c).name for c in copies) or 'none: cached'})")


def fleet(base: Path, servers: list[sshd.SshServer]) -> None:
    body = ('[[workload]]\nname = "exec"\nvariants = "sleep"\nrepetitions = 3\n'
            '[workload.params]\nn = 100\niterations = 5\npause_ms = 0\n')
    walls = {}
    for n in (1, 2, 4):
        names = [f"t{i}" for i in range(n)]
        spec = base / f"fleet{n}.toml"
        spec.write_text(f'name = "fleet{n}"\ntarget = {names!r}\n'.replace("'", '"')
                        + "".join(s.table(name) for s, name in zip(servers, names)) + body)
        start = time.perf_counter()
        subprocess.run([sys.executable, "-m", "rtscope", "run", str(spec), "--db", str(base / "fleet.db")],
                       check=True, capture_output=True)
        walls[n] = time.perf_counter() - start
    print("2. fleet, 3 runs of 0.5 s per target: " + ", ".join(
        f"N={n}: {w:.1f} s ({w / walls[1]:.2f}x one target's)" for n, w in walls.items()))


def timer(store: Store, pairs: int, loops: int) -> None:
    params = {"interval_us": 200, "loops": loops}
    settings = {"rt_priority": 90, "mlock": True, "cpu": 1}
    req_local = build_request("timer", "absolute", "native", params, settings)
    req_ssh = build_request("timer", "absolute", "native", params, {**settings, "target": "board"})
    p99 = {"local": [], "ssh": []}
    med = {"local": [], "ssh": []}
    with targets.Pool() as pool:
        t = pool.get("board")
        for _ in range(pairs):
            for name, req, target in (("local", req_local, None), ("ssh", req_ssh, t)):
                run = store.get_run(execute(req, store, target=target))
                values = store.primary_samples(run)
                p99[name].append(float(np.percentile(values, 99)))
                med[name].append(float(np.median(values)))
    ratio_p99 = statistics.median(p99["ssh"]) / statistics.median(p99["local"])
    ratio_med = statistics.median(med["ssh"]) / statistics.median(med["local"])
    print(f"3. timer latency, {pairs} interleaved pairs of {loops} loops at 200 us (SCHED_FIFO 90, CPU 1): "
          f"median {statistics.median(med['local']) / 1000:.2f} vs {statistics.median(med['ssh']) / 1000:.2f} us "
          f"(ratio {ratio_med:.3f}), p99 {statistics.median(p99['local']) / 1000:.2f} vs "
          f"{statistics.median(p99['ssh']) / 1000:.2f} us (ratio ssh/local {ratio_p99:.3f}, target 0.90..1.10)")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=10)
    ap.add_argument("--pairs", type=int, default=5)
    ap.add_argument("--loops", type=int, default=20_000)
    args = ap.parse_args()
    why = sshd.available()
    if why:
        print(f"bench/ssh_target.py: skipped: {why}")
        return 0
    with tempfile.TemporaryDirectory(prefix="rtscope-bench-ssh-") as tmp:
        base = Path(tmp)
        servers = [sshd.SshServer(base / f"s{i}", f"rtscope-bench-{i}").start() for i in range(4)]
        try:
            define(servers[0], "board")
            store = Store(str(base / "bench.db"))
            overhead(servers[0], store, args.rounds)
            fleet(base, servers)
            timer(store, args.pairs, args.loops)
        finally:
            for s in servers:
                s.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
