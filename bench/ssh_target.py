"""SSH targets: what reaching a board over SSH costs, measured beside the same runs made locally.

Loopback targets: real OpenSSH servers on 127.0.0.1, each in its own UTS and
mount namespace (tests/sshd.py), so rtscope must deploy its probe there.

  0. cost of an experiment as `rtscope run` makes it (connect, the machine record, the runs, close): exec sum
     x 10 calls, 1 + 10 runs, locally and on the SSH target, directly (0 added round-trip time) and through a
     relay on 127.0.0.1 that delays each direction by half of +20 ms and +200 ms RTT, and on a target whose
     ~/.bashrc sleeps 200 ms (a `pyenv init`); each with the session agent (one channel for the connection,
     the default) and with a channel per command (`session = false`: the fallback, and the way before the
     agent), interleaved. Per run: the median run; fixed: the median experiment minus its runs. Round trips
     are counted by instrumenting paramiko and the session (channel opens, exec and subsystem requests, waits
     for a command's exit status, SFTP requests and prefetches, session requests), login shells by the slow
     ~/.bashrc itself. Targets: per run <= 1 RTT + 10 ms over local; fixed <= 3 round trips of rtscope's own
     + deploy, besides the SSH connection (TCP, key exchange, authentication);
  1. overhead per run: the same short run (exec sum, 100 calls) made locally and on an SSH target
     (connection reused, deploy cached), interleaved; the median difference per run (target: <= 1 s)
     and how often rtprobe was copied (target: once per version);
  2. fleet: the same experiment on N = 1, 2, 4 loopback targets; wall time against one target's
     (target: about one target's, not N times);
  3. timer latency through the SSH target and locally, interleaved pairs on the same machine: the
     ratio of p99s (target: within +-10%: the remote path must not disturb the measurement).

Run as root (sshd in namespaces): .venv/bin/python bench/ssh_target.py [--pairs 5] [--loops 20000]
                                   [--sections 0123] [--repeat 3]
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
import tomllib
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))
import sshd  # noqa: E402

from rtscope import targets  # noqa: E402
from rtscope.experiment.runner import execute  # noqa: E402
from rtscope.experiment.spec import build_request  # noqa: E402
from rtscope.store import Store  # noqa: E402


RUNS = 10  # runs per experiment after the first (section 0)


class RoundTrips:
    """Counts the waits for the target of this process (paramiko instrumented, and the session agent)."""

    def __init__(self):
        import paramiko
        from paramiko import sftp_client
        from rtscope.targets import ssh_session
        self.count = 0
        self.patched = [(paramiko.Transport, "open_channel"),    # CHANNEL_OPEN, wait for the confirmation
                        (paramiko.Channel, "exec_command"),      # a request, wait for its reply
                        (paramiko.Channel, "invoke_subsystem"),
                        (paramiko.Channel, "recv_exit_status"),  # wait for a command's end
                        (sftp_client.SFTPClient, "_request"),    # one SFTP request and its answer
                        (paramiko.SFTPFile, "prefetch"),         # pipelined reads: one wait
                        (ssh_session.Session, "call")]           # a request to the session agent and its reply
        for cls, name in self.patched:
            setattr(cls, name, self._counted(getattr(cls, name)))

    def _counted(self, real):
        def counted(*args, **kwargs):
            self.count += 1
            return real(*args, **kwargs)
        return counted


def slow_bashrc_server(base: Path) -> tuple[sshd.SshServer, Path]:
    """An SSH target whose root's ~/.bashrc sleeps 200 ms (bash sources it for every command from sshd), and
    the file it adds a line to each time it runs."""
    count = base / "bashrc.count"
    bashrc = f"sleep 0.2; echo x >> {count}"
    server = sshd.SshServer(base / "slow", "rtscope-bench-slow",
                            setup=(f"printf '%s\\n' '{bashrc}' > {Path.home()}/.bashrc",)).start()
    return server, count


def experiment(name: str, store: Store, trips: RoundTrips, shells: Path) -> dict:
    """One experiment of 1 + RUNS runs of exec sum x 10 on target `name`, as `rtscope run` makes it (connect,
    the machine record, the runs, close): its wall time, each later run's time, round trips and login shells."""
    req = build_request("exec", "sum", "native", {"iterations": 10, "pause_ms": 0}, {"target": name})
    logins = (lambda: shells.read_text().count("x") if shells.exists() else 0)
    trips0, logins0 = trips.count, logins()
    start = time.perf_counter()
    with targets.Pool() as pool:
        t = pool.get(name)
        t.snapshot()
        execute(req, store, target=t)
        trips1, logins1 = trips.count, logins()
        runs = []
        for _ in range(RUNS):
            begin = time.perf_counter()
            execute(req, store, target=t)
            runs.append(time.perf_counter() - begin)
        trips2, logins2 = trips.count, logins()
    wall = time.perf_counter() - start
    run_trips, run_logins = (trips2 - trips1) / RUNS, (logins2 - logins1) / RUNS
    return {"wall": wall, "runs": runs, "run_trips": run_trips, "run_logins": run_logins,
            "fixed_trips": trips.count - trips0 - (RUNS + 1) * run_trips,
            "fixed_logins": logins() - logins0 - (RUNS + 1) * run_logins}


def experiment_cost(base: Path, server: sshd.SshServer, store: Store, repeat: int) -> None:
    trips = RoundTrips()
    relays = {rtt: sshd.DelayRelay(server.port, rtt / 2000) for rtt in (20, 200)}
    slow, shells = slow_bashrc_server(base)
    ways: dict[str, tuple[str, int]] = {"local": ("local", 0)}  # label -> (target, RTT ms)
    for session in (True, False):
        how = "session" if session else "channel per command"
        for label, rtt, table in [("ssh +0 ms", 0, server.table("s0")),
                                  *((f"ssh +{rtt} ms", rtt, sshd.relayed_table(server, relay, f"s{rtt}", base))
                                    for rtt, relay in relays.items()),
                                  ("slow .bashrc", 0, slow.table("slow"))]:
            name = f"{label.split()[0]}{rtt}-{'session' if session else 'channels'}"
            tbl = tomllib.loads(table)["targets"]
            targets.define(name, {**next(iter(tbl.values())), "session": session}, replace=True)
            ways[f"{label}, {how}"] = (name, rtt)
    results: dict[str, list[dict]] = {way: [] for way in ways}
    try:
        for name, _ in ways.values():
            experiment(name, store, trips, shells)  # deploy once (a user's first experiment), warm caches
        for _ in range(repeat):  # interleaved, so that what else the machine does weighs on every way alike
            for way, (name, _) in ways.items():
                results[way].append(experiment(name, store, trips, shells))
    finally:
        for relay in relays.values():
            relay.close()
        slow.stop()
    print(f"0. experiment cost: exec sum x 10 calls, experiments of 1 + {RUNS} runs (connect, machine record, runs, "
          f"close) x {repeat}, interleaved; load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} CPUs;")
    print("   per run: median run; fixed: median experiment minus its runs; RT: round trips; shells: login shells")
    print(f"   {'':33} {'per run':>8} {'over local':>10} {'target':>7} {'fixed':>7} {'over local':>10}  "
          "per run: RT, shells; fixed: RT, shells")
    local = None
    for way, (name, rtt) in ways.items():
        rs = results[way]
        per_run = statistics.median(x for r in rs for x in r["runs"])
        fixed = statistics.median(r["wall"] - (RUNS + 1) * per_run for r in rs)
        r = rs[0]
        if local is None:
            local = (per_run, fixed)
            print(f"   {way:33} {per_run * 1000:>6.1f}ms {'':>10} {'':>7} {fixed:>6.2f}s")
            continue
        over = per_run - local[0]
        verdict = "ok" if over <= rtt / 1000 + 0.010 else "MISSED"
        shells_of = (lambda v: f"{v:g}") if name.startswith("slow") else (lambda v: "-")
        print(f"   {way:33} {per_run * 1000:>6.1f}ms {over * 1000:>+8.1f}ms {verdict:>7} {fixed:>6.2f}s "
              f"{fixed - local[1]:>+9.2f}s  {r['run_trips']:g}, {shells_of(r['run_logins'])}; "
              f"{r['fixed_trips']:g}, {shells_of(r['fixed_logins'])}")
    print("   targets: per run <= 1 RTT + 10 ms over local (the 'target' column); fixed: <= 3 round trips of "
          "rtscope's own + deploy, besides the SSH connection")


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
    ap.add_argument("--repeat", type=int, default=3, help="experiments per figure in section 0 (median)")
    ap.add_argument("--sections", default="0123", help="which sections to run, e.g. 0 or 013")
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
            if "0" in args.sections:
                experiment_cost(base, servers[0], store, args.repeat)
            if "1" in args.sections:
                overhead(servers[0], store, args.rounds)
            if "2" in args.sections:
                fleet(base, servers)
            if "3" in args.sections:
                timer(store, args.pairs, args.loops)
        finally:
            for s in servers:
                s.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
