"""`/metrics`: the store in Prometheus' text format, for a lab's Prometheus, Alertmanager and Grafana
(docs/serve.md lists every series, docs/lab.md wires them up).

Per board (a target `rtscope monitor` watches, serve/boards.py, and every board of the lab's lease table, also
one with no interval stored yet: its kernel and preemption `unknown`), labelled `target`, `kernel` and
`preemption` (and `cpu` for what is per CPU): whether it is up, watched, and given up on (incomplete), its state
and the reason as an info series, its controller when the store records one, and
its newest interval — the latency histogram (buckets in seconds, `le`, from the interval's 1 µs buckets; the
values beyond the probe's histogram count only in `+Inf`), the maximum, p99.99 and samples per CPU, the
interval's length, when it was stored and its run id — and the intervals stored. Per target and workload the
runs stored, per target when its newest run was stored.

Labels are names that stay (never a run id or a time), so the series are a handful per board and CPU. What
the store holds is read once per change of the store (the server's cache, serve/origins.py: only the runs
stored since); up and down are computed at each scrape, since they change with the clock alone, and the text
is made again only when they or the store change. The text is written here, byte for byte as prometheus_client
writes it (a test parses it with prometheus_client and writes it again): prometheus_client took 60-110 ms for
100 boards of 2 CPUs, and a lab's store changes with every interval stored; here each board's lines are made
once per state of the board, the text of 100 boards in 27 ms the first time and 3 ms once made.
"""

from __future__ import annotations

import gzip
import time
from dataclasses import dataclass

from .boards import BOUNDS_US, Board, Lab, timestamp
from .live import Bounded

@dataclass(frozen=True, eq=False)   # a snapshot is itself only: the texts made from it are cached by it
class Snapshot:
    """What /metrics shows of the store as it is: its boards, runs per (target, workload), each target's newest
    run's storing time."""

    boards: list[Board]
    runs: dict[tuple[str, str], int]
    newest: dict[str, str]


def read(lab: Lab) -> Snapshot:
    counts = lab.origins.read()
    return Snapshot(lab.read(counts, silent=True), counts.by_workload, counts.last_stored)


def states(snap: Snapshot, now: float) -> tuple[bool, ...]:
    """What of the exposition changes with the clock alone: each board up or not."""
    return tuple(b.up(now) for b in snap.boards)


# name, type, help of each family, in the order served; a counter's samples are its name + "_total"
BOARD_FAMILIES = [
    ("rtscope_board_up", "gauge", "1 when the board's intervals arrive (its newest stored within 2 interval "
                                  "lengths + 10 s, or its controller says so), else 0."),
    ("rtscope_board_watched", "gauge", "1 while a controller watches the board (its monitoring runs or a "
                                       "controller holds its lease), else 0."),
    ("rtscope_board_incomplete", "gauge", "1 when the board's monitoring was given up on: down for --give-up-after "
                                          "intervals (the reason: rtscope_board_state_info), else 0."),
    ("rtscope_board_state_info", "gauge", "The board's state (up, down, incomplete, unwatched) and why it is down "
                                          "or was given up on, as its controller said (reason, empty when none)."),
    ("rtscope_board_controller_info", "gauge", "The controller watching the board (only where the store records "
                                               "it)."),
    ("rtscope_board_intervals_stored", "counter", "Monitoring intervals stored for the board."),
    ("rtscope_board_interval_length_seconds", "gauge", "The length of the board's newest interval."),
    ("rtscope_board_interval_stored_timestamp_seconds", "gauge",
     "When the board's newest interval was stored (Unix time)."),
    ("rtscope_board_interval_run_id", "gauge", "The run id of the board's newest interval (/runs/ID)."),
    ("rtscope_board_interval_latency_seconds", "histogram",
     "Timer latency of the board's newest interval, per CPU."),
    ("rtscope_board_interval_latency_max_seconds", "gauge",
     "Maximum latency of the board's newest interval, per CPU (exact, also beyond the histogram)."),
    ("rtscope_board_interval_latency_p9999_seconds", "gauge",
     "p99.99 of the latency of the board's newest interval, per CPU (the upper edge of its 1 µs bucket)."),
    ("rtscope_board_interval_samples", "gauge", "Samples of the board's newest interval, per CPU."),
]
RUNS = ("rtscope_runs_stored", "counter", "Runs stored, by target and workload.")
LAST = ("rtscope_last_run_stored_timestamp_seconds", "gauge",
        "When the newest run of the target was stored (Unix time).")


def _value(v: float) -> str:
    from prometheus_client.utils import floatToGoString
    return floatToGoString(v)


def _escaped(text: str, quote: bool = True) -> str:
    """A label value (or, quote False, a help text) escaped as the text format wants."""
    out = text.replace("\\", "\\\\").replace("\n", "\\n")
    return out.replace('"', '\\"') if quote else out


def _sample(name: str, labels: dict[str, str], value: float) -> str:
    """One line of the text format: labels in name order, their values escaped."""
    pairs = ",".join(f'{k}="{_escaped(str(v))}"' for k, v in sorted(labels.items()))
    return f"{name}{{{pairs}}} {_value(value)}\n"


def board_lines(b: Board, up: bool) -> dict[str, str]:
    """One board's samples of each board family, as text (a board with no interval stored: only its state)."""
    iv = b.newest
    board = {"target": b.target, "kernel": iv.kernel if iv else "unknown",
             "preemption": iv.preemption if iv else "unknown"}
    per_board = {"rtscope_board_up": 1 if up else 0, "rtscope_board_watched": 1 if b.watched else 0,
                 "rtscope_board_incomplete": 1 if b.incomplete else 0}
    if iv is not None:
        per_board |= {"rtscope_board_interval_length_seconds": iv.length_s,
                      "rtscope_board_interval_stored_timestamp_seconds": b.stored_at,
                      "rtscope_board_interval_run_id": iv.run_id}
    out = dict.fromkeys((name for name, _, _ in BOARD_FAMILIES), "")
    out |= {name: _sample(name, board, v) for name, v in per_board.items()}
    out["rtscope_board_intervals_stored"] = _sample("rtscope_board_intervals_stored_total", board, b.intervals)
    state = "up" if up else "down" if b.watched else "incomplete" if b.incomplete else "unwatched"
    out["rtscope_board_state_info"] = _sample("rtscope_board_state_info", {**board, "state": state,
                                                                          "reason": "" if up else b.reason or ""}, 1)
    out["rtscope_board_controller_info"] = "" if b.controller is None else _sample(
        "rtscope_board_controller_info", {**board, "controller": b.controller}, 1)
    if iv is None:
        return out
    cpus = [(c, {**board, "cpu": str(c.cpu)}) for c in iv.cpus]
    per_cpu = {"rtscope_board_interval_latency_max_seconds": lambda c: c.max_ns / 1e9,
               "rtscope_board_interval_latency_p9999_seconds": lambda c: c.p9999_ns / 1e9,
               "rtscope_board_interval_samples": lambda c: c.n}
    out |= {name: "".join(_sample(name, labels, value(c)) for c, labels in cpus) for name, value in per_cpu.items()}
    name = "rtscope_board_interval_latency_seconds"
    out[name] = "".join(
        "".join(_sample(f"{name}_bucket", {**labels, "le": f"{bound / 1e6:g}"}, n)
                for bound, n in zip(BOUNDS_US, c.at_bounds))
        + _sample(f"{name}_bucket", {**labels, "le": "+Inf"}, c.n) + _sample(f"{name}_count", labels, c.n)
        + _sample(f"{name}_sum", labels, c.sum_ns / 1e9) for c, labels in cpus)
    return out


def _header(name: str, kind: str, text: str) -> str:
    shown = f"{name}_total" if kind == "counter" else name
    return f"# HELP {shown} {_escaped(text, quote=False)}\n# TYPE {shown} {kind}\n"


class Exposition:
    """/metrics' text (Prometheus' text format 0.0.4, as prometheus_client writes it), each board's samples
    made once per state of the board (its newest interval, its intervals, watched, its controller, up): a
    store that changes with every interval stored makes one board's lines again, not a hundred's.

    The texts of the last few snapshots are kept whole: while the server reads the store's newest state (and
    makes its text), scrapes are answered from the state before, whose text must not be made again then."""

    def __init__(self, cached: int = 4096):
        self.boards = Bounded(cached)     # (board, up) -> its lines per family
        self.texts = Bounded(4)           # (snapshot, its boards' states) -> _Text

    def text(self, snap: Snapshot, now: float | None = None, gzipped: bool = False) -> tuple[bytes, str]:
        """The text to serve (`gzipped`: compressed, as Prometheus asks for it) and its content type: made once
        per snapshot and its boards' up states."""
        ups = states(snap, time.time() if now is None else now)
        made = self.texts.get((snap, ups), lambda: _Text(self._made(snap, ups)))
        return made.gzipped() if gzipped else made.plain, CONTENT_TYPE

    def _made(self, snap: Snapshot, ups: tuple[bool, ...]) -> bytes:
        per_board = [self.boards.get((b, up), lambda b=b, up=up: board_lines(b, up))
                     for b, up in zip(snap.boards, ups)]
        parts = []
        for name, kind, text in BOARD_FAMILIES:
            parts.append(_header(name, kind, text))
            parts += [lines[name] for lines in per_board]
        parts.append(_header(*RUNS))
        parts += [_sample("rtscope_runs_stored_total", {"target": t, "workload": w}, n)
                  for (t, w), n in sorted(snap.runs.items())]
        parts.append(_header(*LAST))
        parts += [_sample(LAST[0], {"target": t}, ts) for t, text in sorted(snap.newest.items())
                  if (ts := timestamp(text)) is not None]
        return "".join(parts).encode()


CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"


class _Text:
    """An exposition's text, and compressed once asked for (two threads may both compress it: same bytes)."""

    def __init__(self, plain: bytes):
        self.plain = plain
        self._gzipped: bytes | None = None

    def gzipped(self) -> bytes:
        if self._gzipped is None:
            self._gzipped = gzip.compress(self.plain, compresslevel=1)
        return self._gzipped


def exposition(snap: Snapshot, now: float | None = None) -> tuple[bytes, str]:
    """The text to serve and its content type (no board's lines kept for the next)."""
    return Exposition().text(snap, now)
