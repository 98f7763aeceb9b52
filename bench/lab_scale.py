"""A lab at scale: N simulated boards, one fleet controller into PostgreSQL, `rtscope serve` on the same store,
and one `rtscope monitor` process per board side by side (docs/lab.md, "Scale").

Starts a PostgreSQL server (tests/pgserver.py) and N boards (OpenSSH servers in their own namespaces,
tests/sshd.py; their probes at a low rate: --interval-us, default 10 ms), then for --minutes:

- one controller, `rtscope monitor --target lab` (a fleet of the N boards) into database `lab`; its RSS and
  its CPU time (with the ssh clients it starts) sampled every 2 s;
- `rtscope serve` on the same store; the lab page `/` and `/metrics` requested in turn every --request-every
  seconds, timed, from a process of their own; only the requests made once every board has an interval stored
  count;
- --peer-boards P single-board `rtscope monitor` processes, each into its own database on the same server
  (the first P boards), their RSS and CPU summed and divided by P.

Prints per board: the controller's RSS (the peak after the first interval, divided by N) and CPU (% of a core,
after the first interval), the store's growth per board-hour (pg_database_size), the lab page's p99 and the
/metrics scrape time (p50, p99) with every board live, and the same RSS and CPU per board of the single-board
monitors; each beside its goal. Every process it started is stopped on exit, on Ctrl-C and on SIGTERM.

--restart-store S: PostgreSQL is stopped (`pg_ctl stop -m immediate`) once, half-way through the run (once
every board has an interval stored), and started again S seconds later: the controller and the single-board
monitors keep measuring into their spools (docs/store.md). The bench then also prints the intervals planned and
stored per board (no interval may be lost or stored twice) and leaves the requests made while the store was
down out of the timings (their errors are counted apart).

Run as root (sshd in namespaces, PostgreSQL as user postgres):
    .venv/bin/python bench/lab_scale.py [--boards 100] [--minutes 30] [--interval 60] [--peer-boards 10]
                                        [--restart-store 20]
"""

from __future__ import annotations

import argparse
import multiprocessing
import os
import re
import signal
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))
sys.path.insert(0, str(Path(__file__).resolve().parent))
import pgserver  # noqa: E402
import sshd  # noqa: E402
from monitor_memory import rss_kb  # noqa: E402
from serve_load import client, percentile  # noqa: E402

RSS_GOAL_MB = 3.0       # controller RSS per board
CPU_GOAL_PCT = 0.5      # controller CPU per board, % of one core
PAGE_P99_GOAL_MS = 200.0
SCRAPE_GOAL_MS = 100.0
TICKS = os.sysconf("SC_CLK_TCK")


def tree(pid: int) -> list[int]:
    """pid and its descendants (their parents read from /proc)."""
    children: dict[int, list[int]] = {}
    for d in Path("/proc").iterdir():
        if d.name.isdigit():
            try:
                ppid = int((d / "stat").read_text().rsplit(")", 1)[1].split()[1])
            except (OSError, IndexError, ValueError):
                continue
            children.setdefault(ppid, []).append(int(d.name))
    out, todo = [], [pid]
    while todo:
        p = todo.pop()
        out.append(p)
        todo += children.get(p, [])
    return out


def cpu_s(pid: int) -> float:
    """CPU time (user + system) of a process and its reaped children, in seconds (0 when it is gone)."""
    try:
        f = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return 0.0
    return sum(int(x) for x in f[11:15]) / TICKS   # utime stime cutime cstime


def tree_cpu_s(pid: int) -> float:
    """CPU time of a process, its live descendants and everything they reaped."""
    return sum(cpu_s(p) for p in tree(pid))


class Procs:
    """The processes the bench started; all stopped (SIGTERM, then SIGKILL) on exit."""

    def __init__(self, logs: Path):
        self.logs, self.procs = logs, []

    def start(self, name: str, argv: list[str], env: dict) -> subprocess.Popen:
        log = open(self.logs / f"{name}.log", "w")
        proc = subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, text=True,
                                env=env, start_new_session=True)
        proc.log_path = self.logs / f"{name}.log"
        self.procs.append(proc)
        return proc

    def stop(self) -> None:
        for p in self.procs:
            if p.poll() is None:
                p.send_signal(signal.SIGTERM)
        deadline = time.monotonic() + 30
        for p in self.procs:
            try:
                p.wait(max(0.1, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                os.killpg(p.pid, signal.SIGKILL)
                p.wait()


def db_bytes(url: str) -> int:
    import psycopg
    with psycopg.connect(url) as conn:
        return int(conn.execute("select pg_database_size(current_database())").fetchone()[0])


def intervals_stored(url: str) -> dict[str, int]:
    """Monitoring intervals stored per board (`rtscope serve`'s own reading of the store)."""
    from rtscope.serve.views import target_of
    from rtscope.store import Store
    out: dict[str, int] = {}
    for _, _, settings, _, tags in Store(url).run_origins():
        if "monitor" in (tags or []):
            t = target_of(settings or {})
            out[t] = out.get(t, 0) + 1
    return out


def duplicates(url: str) -> int:
    """Runs stored twice: the same monitoring and plan index (the store's unique index forbids it)."""
    import psycopg
    with psycopg.connect(url) as conn:
        return int(conn.execute("select count(*) - count(distinct (experiment_id, plan_index)) from runs "
                                "where experiment_id is not null").fetchone()[0])


def sampler(pids: list[int], stop: threading.Event, out: list) -> None:
    """Every 2 s: (monotonic time, RSS kB summed over pids, CPU s of their trees)."""
    while not stop.is_set():
        out.append((time.monotonic(), sum(rss_kb(p) for p in pids), sum(tree_cpu_s(p) for p in pids)))
        stop.wait(2)


def requester(port: int, every: float, stop, results) -> None:
    """The lab page and /metrics in turn, timed, until `stop` is set; then (timings, errors) into `results`. Run
    in a process of its own: in the bench's, the samplers' walks of /proc held the interpreter's lock while a
    response was being read, and the timings held those waits."""
    out: list = []
    errors: list = []
    paths = ["/", "/metrics"]
    i = 0
    while not stop.is_set():
        got: list = []
        path = paths[i % 2]    # a scrape asks for gzip, as Prometheus does
        client(port, [path], 1, time.monotonic() + 60, got, errors, "gzip" if path == "/metrics" else "identity")
        out.extend((path, s, time.monotonic()) for path, s, _ in got)
        i += 1
        stop.wait(every / 2)
    results.put((out, errors))


def per_board(samples: list, since: float, boards: int) -> tuple[float, float]:
    """(peak RSS MB per board, CPU % of a core per board) of the samples after `since`."""
    later = [s for s in samples if s[0] >= since] or samples[-1:]
    peak = max(kb for _, kb, _ in later) / 1024
    wall = later[-1][0] - later[0][0]
    cpu = (later[-1][2] - later[0][2]) / wall * 100 if wall > 0 else float("nan")
    return peak / boards, cpu / boards


def verdict(value: float, goal: float) -> str:
    return "met" if value <= goal else "MISSED"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--boards", type=int, default=100)
    ap.add_argument("--minutes", type=float, default=30)
    ap.add_argument("--interval", type=int, default=60, help="monitoring interval, seconds")
    ap.add_argument("--interval-us", type=int, default=10_000, help="the boards' probe period (low rate)")
    ap.add_argument("--peer-boards", type=int, default=10, help="single-board monitor processes side by side")
    ap.add_argument("--request-every", type=float, default=2.0, help="seconds between lab page + /metrics")
    ap.add_argument("--restart-store", type=float, default=0, metavar="S",
                    help="stop PostgreSQL once half-way through, for S seconds (0: never)")
    args = ap.parse_args()
    if args.boards < 1 or args.peer_boards < 0 or args.peer_boards > args.boards:
        raise SystemExit(f"--boards must be >= 1 and --peer-boards 0..--boards, got {args.boards}, "
                         f"{args.peer_boards}")
    if args.interval * 2 > args.minutes * 60:
        raise SystemExit(f"--minutes {args.minutes} holds fewer than two intervals of {args.interval} s")
    for why in (sshd.available(), pgserver.available()):
        if why:
            raise SystemExit(f"cannot run here: {why}")
    signal.signal(signal.SIGTERM, lambda *_: (_ for _ in ()).throw(KeyboardInterrupt()))
    duration = f"{int(args.minutes * 60)}s"
    with tempfile.TemporaryDirectory(prefix="rtscope-bench-lab-") as tmp:
        base = Path(tmp)
        procs = Procs(base)
        servers: dict[str, sshd.SshServer] = {}
        pg = None
        stop = threading.Event()
        try:
            pg = pgserver.PgServer().start()
            url = pg.create_database("lab")
            print(f"starting {args.boards} boards ...", flush=True)
            for i in range(1, args.boards + 1):
                servers[f"board{i}"] = sshd.SshServer(base / f"board{i}", f"rtscope-lab-{i}").start()
            targets = base / "targets.toml"
            names = ", ".join(f'"{n}"' for n in servers)
            targets.write_text("".join(s.table(n) for n, s in servers.items()) + f"[fleets]\nlab = [{names}]\n")
            env = {**os.environ, "RTSCOPE_TARGETS": str(targets), "PYTHONUNBUFFERED": "1"}
            rt = [sys.executable, "-m", "rtscope"]
            common = ["--duration", duration, "--interval", f"{args.interval}s", "--interval-us",
                      str(args.interval_us)]
            start = time.monotonic()
            ctl = procs.start("controller", rt + ["monitor", "--target", "lab", *common, "--db", url], env)
            peers = [procs.start(f"peer{i}", rt + ["monitor", "--target", f"board{i}", *common, "--db",
                                                   pg.create_database(f"peer{i}")], env)
                     for i in range(1, args.peer_boards + 1)]
            m, tries = None, 0
            while not m and time.monotonic() - start < 120:   # serve opens a store with its schema made
                serve = procs.start(f"serve{tries}", rt + ["serve", "--db", url, "--host", "127.0.0.1", "--port",
                                                          "0"], env)
                tries += 1
                while not m and serve.poll() is None and time.monotonic() - start < 120:
                    time.sleep(0.2)
                    m = re.search(r"read-only at http://127\.0\.0\.1:(\d+)/", serve.log_path.read_text())
                if not m:
                    time.sleep(1)
            if not m:
                raise SystemExit(f"rtscope serve did not start: {serve.log_path.read_text()[-2000:]}")
            ctl_samples: list = []
            peer_samples: list = []
            fork = multiprocessing.get_context("fork")
            asking, results = fork.Event(), fork.Queue()
            client_proc = fork.Process(target=requester, args=(int(m.group(1)), args.request_every, asking, results),
                                       daemon=True)
            client_proc.start()
            threads = [threading.Thread(target=sampler, args=([ctl.pid], stop, ctl_samples), daemon=True),
                       threading.Thread(target=sampler, args=([p.pid for p in peers], stop, peer_samples),
                                        daemon=True)]
            for t in threads:
                t.start()
            live_at = None       # every board has an interval stored
            grow_from = None     # (time, bytes) at that moment
            outage = None        # (stopped, started again), monotonic
            while ctl.poll() is None:
                time.sleep(5)
                if (args.restart_store and outage is None and live_at is not None
                        and time.monotonic() - start >= args.minutes * 30):
                    down_at = time.monotonic()
                    pg.pause()
                    print(f"PostgreSQL stopped at {down_at - start:.0f} s, for {args.restart_store:.0f} s",
                          flush=True)
                    time.sleep(args.restart_store)
                    pg.resume()
                    outage = (down_at, time.monotonic())
                if live_at is None:
                    got = intervals_stored(url)
                    if len(got) >= args.boards:
                        live_at = time.monotonic()
                        grow_from = (live_at, db_bytes(url))
                        print(f"all {args.boards} boards live after {live_at - start:.0f} s", flush=True)
            end = time.monotonic()
            grow_to = (end, db_bytes(url))
            stop.set()
            asking.set()
            timed, errors = results.get(timeout=120)
            client_proc.join(30)
            for t in threads:
                t.join(60)
            for p in peers:
                p.wait(args.interval * 2 + 120)
            if ctl.returncode != 0:
                print(f"controller exited {ctl.returncode}: {ctl.log_path.read_text()[-3000:]}", file=sys.stderr)
            stored = intervals_stored(url)
            print(f"\n{args.boards} boards, {duration} at {args.interval} s intervals, probe period "
                  f"{args.interval_us} µs; {sum(stored.values())} intervals stored by the controller "
                  f"({min(stored.values(), default=0)}..{max(stored.values(), default=0)} per board)")
            lost = 0
            if outage is not None:
                planned = -(-int(args.minutes * 60) // args.interval)
                lost = sum(planned - stored.get(n, 0) for n in servers)
                twice = duplicates(url)
                print(f"PostgreSQL down {outage[1] - outage[0]:.0f} s from {outage[0] - start:.0f} s: {planned} "
                      f"intervals planned per board, {lost} lost in all ({'none' if not lost else 'LOST'}), "
                      f"{twice} stored twice; controller exit {ctl.returncode}")
                lost += twice
            if live_at is None:
                print("not every board had an interval stored: no figures with all boards live", file=sys.stderr)
                return 1
            rss, cpu = per_board(ctl_samples, live_at, args.boards)
            print(f"controller  RSS per board {rss:6.2f} MB (goal <= {RSS_GOAL_MB} MB: {verdict(rss, RSS_GOAL_MB)})"
                  f"   CPU per board {cpu:6.3f} % of a core (goal <= {CPU_GOAL_PCT} %: {verdict(cpu, CPU_GOAL_PCT)})"
                  f"   [peak {rss * args.boards:.0f} MB, {cpu * args.boards:.1f} % in all]")
            if peers:
                prss, pcpu = per_board(peer_samples, live_at, len(peers))
                print(f"1 monitor per board ({len(peers)} side by side)  RSS per board {prss:6.2f} MB   "
                      f"CPU per board {pcpu:6.3f} % of a core")
            hours = (grow_to[0] - grow_from[0]) / 3600
            growth = (grow_to[1] - grow_from[1]) / args.boards / hours / 1e6 if hours > 0 else float("nan")
            print(f"store growth {growth:.2f} MB per board-hour (PostgreSQL, {grow_from[1] / 1e6:.1f} -> "
                  f"{grow_to[1] / 1e6:.1f} MB over {hours * 60:.1f} min)")
            for path, goal, what in (("/", PAGE_P99_GOAL_MS, "lab page"), ("/metrics", SCRAPE_GOAL_MS, "scrape")):
                live = [s for p, s, at in timed if p == path and at >= live_at
                        and not (outage and outage[0] <= at <= outage[1] + 2 * args.interval)]
                if not live:
                    print(f"{what}: no request timed with all boards live")
                    continue
                p99 = percentile(live, 99)
                print(f"{what:9} {path:9} {len(live)} requests with all boards live: p50 {percentile(live, 50):.0f}"
                      f" ms  p99 {p99:.0f} ms  max {max(live) * 1000:.0f} ms (goal p99 <= {goal:.0f} ms: "
                      f"{verdict(p99, goal)})")
            if errors:
                print(f"{len(errors)} request errors{' (the store was down for some)' if outage else ''}, "
                      f"e.g. {errors[:3]}")
            return 0 if ctl.returncode == 0 and (not errors or outage) and not lost else 1
        except KeyboardInterrupt:
            print("interrupted: stopping every process started", file=sys.stderr)
            return 130
        finally:   # a second Ctrl-C or SIGTERM does not cut the cleanup short
            signal.signal(signal.SIGINT, signal.SIG_IGN)
            signal.signal(signal.SIGTERM, signal.SIG_IGN)
            stop.set()
            if "asking" in locals():
                asking.set()
            procs.stop()
            for s in servers.values():
                s.stop()
            if pg is not None:
                pg.stop()


if __name__ == "__main__":
    sys.exit(main())
