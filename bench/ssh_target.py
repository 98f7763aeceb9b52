"""SSH targets: what reaching a board over SSH costs, measured beside the same runs made locally.

Loopback targets: real OpenSSH servers on 127.0.0.1, each in its own UTS and
mount namespace (tests/sshd.py), so rtscope must deploy its probe there.

  0. cost of an experiment, measured as a user runs it (`rtscope run SPEC`, a fresh process each): exec sum
     x 10 calls with 1 and with 21 repetitions, locally and on the SSH target, directly (0 added round-trip
     time) and through a relay on 127.0.0.1 that delays each direction by half of +20 ms and +200 ms RTT, and on
     a target whose ~/.bashrc sleeps 200 ms (a `pyenv init`); each with the session agent (one channel for
     the connection, the default) and with a channel per command (`session = false`, the fallback and the way
     before the agent), interleaved. The marginal cost of a run is (T21 - T1) / 20, the fixed cost
     T1 - marginal. Round trips are counted by instrumenting paramiko and the session (channel opens, exec and
     subsystem requests, waits for a command's exit status, SFTP requests and prefetches, session requests),
     login shells by the slow ~/.bashrc itself. Targets: per run <= 1 RTT + 10 ms over local; fixed <= 3 round
     trips of rtscope's own + deploy, besides the SSH connection (TCP, key exchange, authentication);
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
import json
import os
import queue
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))
import sshd  # noqa: E402

from rtscope import targets  # noqa: E402
from rtscope.experiment.runner import execute  # noqa: E402
from rtscope.experiment.spec import build_request  # noqa: E402
from rtscope.store import Store  # noqa: E402


# `rtscope ARGS` with paramiko instrumented: the counts are printed on stderr when it exits.
COUNTED_CLI = """
import atexit, json, sys
import paramiko
from paramiko import sftp_client
counts = {"channels": 0, "round_trips": 0}
def count(cls, name, channels=0):
    real = getattr(cls, name)
    def counted(*args, **kwargs):
        counts["channels"] += channels
        counts["round_trips"] += 1
        return real(*args, **kwargs)
    setattr(cls, name, counted)
count(paramiko.Transport, "open_channel", channels=1)         # CHANNEL_OPEN, wait for the confirmation
for name in ("exec_command", "invoke_subsystem"):             # a request, wait for its reply
    count(paramiko.Channel, name)
count(paramiko.Channel, "recv_exit_status")                   # wait for a command's end
count(sftp_client.SFTPClient, "_request")                     # one SFTP request and its answer
count(paramiko.SFTPFile, "prefetch")                          # pipelined reads: one wait
from rtscope.targets import ssh_session
count(ssh_session.Session, "call")                            # a request to the session agent and its reply
atexit.register(lambda: print("COUNTS " + json.dumps(counts), file=sys.stderr))
sys.argv = ["rtscope", *sys.argv[1:]]
from rtscope.cli import main
main()
"""
COST_BODY = '[[workload]]\nname = "exec"\nvariants = "sum"\n[workload.params]\niterations = 10\npause_ms = 0\n'


class DelayRelay:
    """A TCP relay on 127.0.0.1 to another port there, each direction delayed by `delay` seconds."""

    def __init__(self, dest_port: int, delay: float):
        self.dest_port, self.delay = dest_port, delay
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.port = self.listener.getsockname()[1]
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while True:
            try:
                client, _ = self.listener.accept()
            except OSError:
                return  # closed
            server = socket.create_connection(("127.0.0.1", self.dest_port))
            for s in (client, server):
                s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            for src, dst in ((client, server), (server, client)):
                pending: queue.Queue = queue.Queue()
                threading.Thread(target=self._read, args=(src, pending), daemon=True).start()
                threading.Thread(target=self._write, args=(dst, pending), daemon=True).start()

    def _read(self, src: socket.socket, pending: queue.Queue) -> None:
        while True:
            try:
                data = src.recv(1 << 16)
            except OSError:
                data = b""
            pending.put((time.monotonic() + self.delay, data))
            if not data:
                return

    def _write(self, dst: socket.socket, pending: queue.Queue) -> None:
        while True:
            due, data = pending.get()
            time.sleep(max(0.0, due - time.monotonic()))
            try:
                if not data:
                    dst.shutdown(socket.SHUT_WR)
                    return
                dst.sendall(data)
            except OSError:
                return

    def close(self) -> None:
        self.listener.close()


def relayed_table(server: sshd.SshServer, relay: DelayRelay, name: str, base: Path) -> str:
    """The target table of `server` reached through `relay` (its known_hosts names the relay's port)."""
    known = base / f"known_hosts_{relay.port}"
    key = server.known_hosts.read_text().split(None, 1)[1]
    known.write_text(f"[127.0.0.1]:{relay.port} {key}")
    return (server.table(name).replace(server.url, f"ssh://root@127.0.0.1:{relay.port}")
            .replace(str(server.known_hosts), str(known)))


def slow_bashrc_server(base: Path) -> tuple[sshd.SshServer, Path]:
    """An SSH target whose root's ~/.bashrc sleeps 200 ms (bash sources it for every command from sshd), and
    the file it adds a line to each time it runs."""
    count = base / "bashrc.count"
    bashrc = f"sleep 0.2; echo x >> {count}"
    server = sshd.SshServer(base / "slow", "rtscope-bench-slow",
                            setup=(f"printf '%s\\n' '{bashrc}' > {Path.home()}/.bashrc",)).start()
    return server, count


def timed_experiment(base: Path, table: str, target: str | None, reps: int) -> tuple[float, dict]:
    """Wall time and paramiko counts of `rtscope run` of exec sum x 10 with `reps` repetitions."""
    spec = base / f"cost-{target or 'local'}-{reps}.toml"
    spec.write_text(f'name = "cost"\nrepetitions = {reps}\n' + (f'target = "{target}"\n{table}' if target else "")
                    + COST_BODY)
    db = base / f"cost-{time.monotonic_ns()}.db"
    start = time.perf_counter()
    r = subprocess.run([sys.executable, "-c", COUNTED_CLI, "run", str(spec), "--db", str(db)],
                       capture_output=True, text=True)
    wall = time.perf_counter() - start
    if r.returncode != 0:
        raise SystemExit(f"rtscope run {spec} failed: {r.stderr[-2000:]}")
    counts = json.loads([x for x in r.stderr.splitlines() if x.startswith("COUNTS ")][-1][7:])
    return wall, counts


def experiment_cost(base: Path, server: sshd.SshServer, repeat: int) -> None:
    relays = {rtt: DelayRelay(server.port, rtt / 2000) for rtt in (20, 200)}
    slow, shells = slow_bashrc_server(base)
    ways: dict[str, tuple[str, str | None, int]] = {"local": ("", None, 0)}  # label -> (table, target, RTT ms)
    for session in (True, False):
        how = "session" if session else "channel per command"
        extra = "" if session else "session = false\n"
        ways[f"ssh +0 ms, {how}"] = (server.table("board") + extra, "board", 0)
        for rtt, relay in relays.items():
            ways[f"ssh +{rtt} ms, {how}"] = (relayed_table(server, relay, f"far{rtt}", base) + extra, f"far{rtt}", rtt)
        ways[f"slow .bashrc, {how}"] = (slow.table("slow") + extra, "slow", 0)
    try:
        for table, target, _ in ways.values():
            timed_experiment(base, table, target, 1)  # deploy once (a user's first experiment), warm caches
        # Interleaved, so that what else the machine does weighs on every way alike.
        times: dict[str, tuple[list, list]] = {way: ([], []) for way in ways}
        logins: dict[str, list[int]] = {way: [] for way in ways}
        for _ in range(repeat):
            for way, (table, target, _) in ways.items():
                for reps, out in ((1, times[way][0]), (21, times[way][1])):
                    before = shells.read_text().count("x") if shells.exists() else 0
                    out.append(timed_experiment(base, table, target, reps))
                    logins[way].append(shells.read_text().count("x") - before if shells.exists() else 0)
    finally:
        for relay in relays.values():
            relay.close()
        slow.stop()
    local = None
    print(f"0. experiment cost: `rtscope run` of exec sum x 10 calls with 1 and 21 repetitions (median of {repeat});")
    print("   per run = (T21 - T1) / 20, fixed = T1 - per run; RT: round trips counted; shells: login shells started")
    print(f"   {'':33} {'per run':>8} {'over local':>10} {'target':>7} {'fixed':>7} {'over local':>10}  "
          "per run: RT, shells; fixed: RT, shells")
    for way, (_, target, rtt) in ways.items():
        t1, t21 = times[way]
        one, many = statistics.median(w for w, _ in t1), statistics.median(w for w, _ in t21)
        marginal = (many - one) / 20
        c1, c21 = t1[0][1], t21[0][1]
        run_rt = (c21["round_trips"] - c1["round_trips"]) / 20
        shells1, shells21 = logins[way][0], logins[way][1]
        run_shells = (shells21 - shells1) / 20
        fixed_shells = f"{shells1 - run_shells:g}" if target == "slow" else "-"
        if local is None:
            local = (marginal, one - marginal)
            print(f"   {way:33} {marginal * 1000:>6.0f}ms {'':>10} {'':>7} {one - marginal:>6.2f}s")
            continue
        over_run = marginal - local[0]
        verdict = "ok" if over_run <= rtt / 1000 + 0.010 else "MISSED"
        print(f"   {way:33} {marginal * 1000:>6.0f}ms {over_run * 1000:>+8.0f}ms {verdict:>7} {one - marginal:>6.2f}s "
              f"{one - marginal - local[1]:>+9.2f}s  {run_rt:g}, {run_shells if target == 'slow' else '-'}; "
              f"{c1['round_trips'] - run_rt:g}, {fixed_shells}")
    print("   targets: per run <= 1 RTT + 10 ms over local (the 'target' column); fixed: see docs/targets.md")


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
                experiment_cost(base, servers[0], args.repeat)
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
