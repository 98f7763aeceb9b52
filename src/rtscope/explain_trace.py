"""What a CPU did during one sample's interval, from the kernel's trace: the sample's causes.

Input: the text lines of a tracefs `trace` file of one CPU (`comm-pid [cpu] flags secs.usecs: event: fields`,
trace_clock `mono`, the clock the probes stamp their samples with) and the sample's interval
[start, end] in CLOCK_MONOTONIC ns. Every moment of the interval belongs to the innermost context the CPU was
in: an interrupt handler (`irq_handler_entry/exit`, the local timer vector), an hrtimer callback inside it,
a softirq, else the task that was current (`sched_switch`). Summed per culprit, those are the causes:

  irq      a hard interrupt handler (name and irq number; the local APIC timer as `local_timer`)
  hrtimer  an hrtimer callback run in the timer interrupt (name: the callback function)
  softirq  a softirq (name: its action, e.g. TIMER, RCU, NET_RX; `irq` holds the vector)
  thread   another task running on the CPU (comm, pid, kernel priority: 0..99 real-time, 100..139 normal)
  page_fault  the measuring thread's own page faults (x86's exceptions:page_fault_user; name: the access,
           `write`, `read` or `instruction`; `count`): from each fault to the thread's next event (its next
           fault, being switched out) or the sample's end, interrupts in between excepted — the kernel's
           handling and the code after it up to there: exact for faults back to back (memory written for the
           first time), the case locked memory (mlockall) removes; no fault-exit event exists to tell more
  pi_boost another task running on the CPU boosted by priority inheritance (sched_pi_setprio): it held a
           PI lock (a PTHREAD_PRIO_INHERIT mutex, an rt_mutex) a real-time task waits for — the measuring
           thread, typically — and ran at that task's priority until it let the lock go (comm, pid, its own
           prio). A thread cause otherwise, whose remedy (a priority above it) would not help
  rt_throttled  a normal-priority task running while the measuring thread, real-time (SCHED_FIFO/RR), was
           runnable on the CPU for 10 ms or more of the sample (shorter: a kernel section not preempted at
           once, a thread cause): RT throttling (the rt bandwidth, sched_rt_runtime_us, used up; from 6.12 also
           the fair deadline server); named by the task that ran (comm, pid, prio)
  migration  the measuring thread moved to another CPU inside the sample (sched_migrate_task; name `cpu A ->
           B`, `count`): the time the destination's task that made the move (the scheduler pulling it there, or
           the idle task) ran until the thread's switch-in there. The sample is followed across the move: what
           ran on A while it waited there is A's causes, what ran on B after it B's

In a VM's interference (the BEAM's scheduler threads, `interference`), also:
  vm_thread  another thread of the VM on the CPU while the measuring scheduler's thread waited for it: a
           scheduler spinning for work (+sbwt) or running other processes, a dirty scheduler, an aux thread
           (comm, tid, prio)

Time the measuring thread itself ran is `self_ns` (its own work, or its path back from the wake-up) and is no
cause. Time in the idle task while the sample was pending, and any gap no event accounts for, is
`unexplained_ns`: the hardware waking from a power state, a hypervisor's steal, an SMI, interrupts disabled.
A leaf module: pure functions over text, no I/O.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

US = 1000
_LINE = re.compile(r"^\s*(?P<comm>.*?)-(?P<pid>\d+)\s+(?:\(\s*[\d-]+\)\s+)?\[(?P<cpu>\d+)\]\s+(?:(?P<flags>\S+)\s+)?"
                   r"(?P<sec>\d+)\.(?P<usec>\d{6}):\s+(?P<event>\w+):\s?(?P<rest>.*)$")
_FIELD = re.compile(r"(\w+)=(\S+)")
THROTTLED_MIN_NS = 10_000_000  # a normal task this long over a runnable RT task: RT throttling, not a section
NORMAL_PRIO = 100   # kernel priorities from here on are normal (SCHED_OTHER/BATCH/IDLE) tasks'
TASK_OWNERS = ("task", "boosted")   # a slice's owner that is a task: as it is, or boosted by a lock's waiter
INTERVALS_KEPT = 16  # per cause: enough to draw a timeline, bounded for a cause that recurs


@dataclass(frozen=True)
class Event:
    ts_ns: int
    cpu: int
    comm: str
    pid: int
    name: str
    rest: str
    flags: str = ""   # irqs-off, need-resched (N), hardirq/softirq, preempt depth: `d.h1.`

    def fields(self) -> dict[str, str]:
        return dict(_FIELD.findall(self.rest))


def parse_line(line: str) -> Event | None:
    """One trace line, or None for comments, markers of lost events and lines of other formats."""
    m = _LINE.match(line)
    if not m:
        return None
    ts = int(m["sec"]) * 1_000_000_000 + int(m["usec"]) * US
    return Event(ts, int(m["cpu"]), m["comm"], int(m["pid"]), m["event"], m["rest"], m["flags"] or "")


def parse(lines) -> list[Event]:
    return [e for e in map(parse_line, lines) if e is not None]


def _switch(rest: str) -> tuple[tuple[str, int, int], tuple[str, int, int]] | None:
    """sched_switch's (prev comm, pid, prio), (next comm, pid, prio); comms may hold spaces."""
    m = re.match(r"prev_comm=(.*?) prev_pid=(\d+) prev_prio=(\d+) .*==> next_comm=(.*?) next_pid=(\d+) "
                 r"next_prio=(\d+)", rest)
    if not m:
        return None
    return (m[1], int(m[2]), int(m[3])), (m[4], int(m[5]), int(m[6]))


@dataclass
class _Cause:
    kind: str
    name: str
    pid: int | None = None
    irq: int | None = None
    prio: int | None = None
    duration_ns: int = 0
    intervals: list[list[int]] = field(default_factory=list)
    count: int | None = None   # page faults: how many

    def add(self, a: int, b: int, origin: int) -> None:
        self.duration_ns += b - a
        if self.intervals and self.intervals[-1][1] == a - origin:
            self.intervals[-1][1] = b - origin   # one slice continued after an event that did not change it
        elif len(self.intervals) < INTERVALS_KEPT:
            self.intervals.append([a - origin, b - origin])

    def to_json(self) -> dict:
        out = {"kind": self.kind, "name": self.name, "pid": self.pid, "irq": self.irq, "prio": self.prio,
               "duration_ns": self.duration_ns, "intervals": self.intervals}
        return out if self.count is None else {**out, "count": self.count}


_ENTRY = {"irq_handler_entry": "irq", "softirq_entry": "softirq", "hrtimer_expire_entry": "hrtimer"}
_EXIT = {"irq_handler_exit": "irq", "softirq_exit": "softirq", "hrtimer_expire_exit": "hrtimer"}


def _context(event: Event) -> tuple[str, str, int | None] | None:
    """(kind, name, irq) an entry event opens, else None."""
    f = event.fields()
    if event.name == "irq_handler_entry":
        return "irq", f.get("name", "?"), int(f["irq"]) if f.get("irq", "").isdigit() else None
    if event.name == "softirq_entry":
        m = re.search(r"action=(\w+)", event.rest)
        return "softirq", m[1] if m else "?", int(f["vec"]) if f.get("vec", "").isdigit() else None
    if event.name == "hrtimer_expire_entry":
        return "hrtimer", f.get("function", "?"), None
    if event.name.endswith("_entry") and "vector" in f:  # x86 irq_vectors: local_timer_entry, reschedule_entry
        return "irq", event.name[:-len("_entry")], int(f["vector"]) if f["vector"].isdigit() else None
    return None


def _closes(event: Event) -> str | None:
    if event.name in _EXIT:
        return _EXIT[event.name]
    if event.name.endswith("_exit") and "vector=" in event.rest:
        return "irq"
    return None


PAGE_FAULT = "page_fault_user"


def fault_access(rest: str) -> str:
    """A page fault's access from its x86 error code: `instruction` (bit 4), `write` (bit 1), else `read`."""
    m = re.search(r"error_code=0x([0-9a-fA-F]+)", rest)
    code = int(m[1], 16) if m else 0
    return "instruction" if code & 0x10 else "write" if code & 0x2 else "read"


MIGRATE = "sched_migrate_task"


def moves(events: list[Event], start_ns: int, end_ns: int, pid: int) -> list[tuple[int, int, int]]:
    """The thread `pid`'s moves between CPUs inside [start_ns, end_ns], in time order: (time, from, to)."""
    out = []
    for e in events:
        if e.name == MIGRATE and start_ns <= e.ts_ns <= end_ns:
            f = e.fields()
            if f.get("pid") == str(pid) and f.get("orig_cpu", "").isdigit() and f.get("dest_cpu", "").isdigit() \
                    and f["orig_cpu"] != f["dest_cpu"]:
                out.append((e.ts_ns, int(f["orig_cpu"]), int(f["dest_cpu"])))
    return sorted(out)


def by_cpu(events: list[Event]) -> dict[int, list[Event]]:
    """Events of several CPUs split per CPU, each in time order."""
    out: dict[int, list[Event]] = {}
    for e in events:
        out.setdefault(e.cpu, []).append(e)
    for evs in out.values():
        evs.sort(key=lambda e: e.ts_ns)
    return out


def migration_name(orig: int, dest: int) -> str:
    return f"cpu {orig} -> {dest}"


def current_at(events: list[Event], end_ns: int) -> int | None:
    """The pid current on the CPU at end_ns: for a sample's interval, the measuring thread (it has just woken,
    or just finished)."""
    pid = None
    for e in events:
        if e.ts_ns > end_ns:
            break
        pid = e.pid
        if e.name == "sched_switch" and (sw := _switch(e.rest)):
            pid = sw[1][1]
    return pid


def _slices(events: list[Event], start_ns: int, end_ns: int, vm: frozenset[int] = frozenset(),
            cpu: int | None = None, assume: frozenset[int] = frozenset(), due: frozenset[int] = frozenset()
            ) -> tuple[list[tuple[int, int, tuple, bool]], dict[int, int], tuple | None]:
    """The interval [start_ns, end_ns] cut into (from, to, owner, vm_waits) slices: owner ("ctx", (kind, name,
    irq)) for the innermost interrupt context, else ("task", pid) (("boosted", pid) while priority inheritance
    has it run at a lock waiter's priority); vm_waits: whether one of the `vm` threads was
    runnable on this CPU (`cpu`) then (it ran, was preempted, or was woken for this CPU and not yet run; the
    threads `assume` are taken as runnable until the events say otherwise, the threads `due` so from start_ns on:
    the probe's own wake-up is filtered out of the trace). Also the kernel priorities seen, and
    the task current at the end."""
    stack: list[tuple[str, str, int | None]] = []
    current: tuple[str, int, int | None] | None = None
    prios: dict[int, int] = {}
    base: dict[int, int] = {}     # pid -> its priority before a lock's waiter boosted it (while boosted)

    def task(pid: int) -> tuple:
        return ("boosted" if pid in base else "task", pid)

    runnable: set[int] = set(assume)
    slices: list[tuple[int, int, tuple, bool]] = []
    last = None
    after: Event | None = None  # the first event past end_ns: its task was current up to it, as below
    for e in events:
        if due and e.ts_ns > start_ns:
            runnable |= due
            due = frozenset()
        if e.ts_ns > end_ns:
            after = e
            break
        if current is None:
            # No event before it in the window read (which begins before start_ns): the task the first event
            # interrupted was current since then.
            current = (e.comm, e.pid, None)
            last = min(e.ts_ns, start_ns)
            runnable.add(e.pid)
        if last is not None:
            a, b = max(last, start_ns), min(e.ts_ns, end_ns)
            if b > a:
                # Outside interrupts, every line names the task current when it was written: it ran up to
                # this event (also when the trace lost the sched_switch that brought it in).
                slices.append((a, b, ("ctx", stack[-1]) if stack else task(e.pid), bool(runnable & vm)))
        if not stack and e.pid != current[1] and e.name != "sched_switch":
            current = (e.comm, e.pid, prios.get(e.pid))
            runnable.add(e.pid)
        last = e.ts_ns
        opened = _context(e)
        if opened:
            stack.append(opened)
            continue
        closed = _closes(e)
        if closed:
            for i in range(len(stack) - 1, -1, -1):  # the innermost open context of that kind
                if stack[i][0] == closed:
                    del stack[i:]
                    break
            continue
        if e.name == PAGE_FAULT:
            # the task's own fault, inside the sample: its time until the task's next event is the fault's
            if e.ts_ns >= start_ns and e.pid == current[1] and all(c[0] == "page_fault" for c in stack):
                stack[:] = [("page_fault", fault_access(e.rest), None)]
            continue
        if e.name == "sched_switch":
            stack[:] = [c for c in stack if c[0] != "page_fault"]   # switched out: the fault's time is over
            sw = _switch(e.rest)
            if sw:
                (pc, pp, pprio), (nc, np_, nprio) = sw
                prios[pp], prios[np_] = pprio, nprio
                current = (nc, np_, nprio)
                state = re.search(r"prev_state=(\S+)", e.rest)
                if not (state and state[1].startswith("R")):  # blocked (S, D, ...), not preempted
                    runnable.discard(pp)
                runnable.add(np_)
        elif e.name == "sched_pi_setprio":
            f = e.fields()
            if all(f.get(k, "").lstrip("-").isdigit() for k in ("pid", "oldprio", "newprio")):
                pid, new = int(f["pid"]), int(f["newprio"])
                normal = base.pop(pid, int(f["oldprio"]))
                if new != normal:       # boosted (again: a chain); back at its own priority: no longer
                    base[pid] = normal
        elif e.name == "sched_wakeup":
            f = e.fields()
            if f.get("pid", "").isdigit() and f.get("prio", "").isdigit():
                prios[int(f["pid"])] = int(f["prio"])
                target = f.get("target_cpu", "")
                if cpu is None or (target.isdigit() and int(target) == cpu):
                    runnable.add(int(f["pid"]))
    runnable |= due
    if current is not None and last is not None and end_ns > max(last, start_ns):
        # The task the next line names (the trace may have lost the sched_switch that brought it in: one out
        # of the idle task, typically), else the one the last switch made current.
        pid = after.pid if after is not None else current[1]
        slices.append((max(last, start_ns), end_ns, ("ctx", stack[-1]) if stack else task(pid),
                       bool(runnable & vm)))
    return slices, prios, current


def attribute(events: list[Event], start_ns: int, end_ns: int, measuring: int | None = None,
              elsewhere: dict[int, list[Event]] | None = None) -> dict:
    """The causes of one sample whose interval is [start_ns, end_ns], from its CPU's events (sorted by time,
    beginning some time before start_ns so that the state at start_ns is known).

    `measuring`: the pid of the measuring thread (default: the task current at end_ns). `elsewhere`: the other
    CPUs' events of the same window, for a thread that may move: when it did inside the interval, each part
    is attributed on the CPU it was on then, and the moves are `migration` causes.
    """
    slices, prios, current = _slices(events, start_ns, end_ns)
    if measuring is None:
        measuring = current[1] if current else None
    moved: dict[int, _Cause] = {}   # slice index -> the migration cause it belongs to
    causes: dict[tuple, _Cause] = {}
    if measuring is not None:  # again, following its wait: from start_ns on, it wanted the CPU (due, or busy)
        slices, prios = [], {}
        for evs, a, b, move in _segments(events, start_ns, end_ns, measuring, elsewhere or {}):
            got, p, _ = _slices(evs, a, b, frozenset({measuring}), due=frozenset({measuring}))
            prios.update(p)
            if move is not None:
                name = migration_name(*move)
                c = causes.setdefault(("migration", name, None), _Cause("migration", name, count=0))
                c.count += 1
                for j in _finishing_move(got, measuring):
                    moved[len(slices) + j] = c
            slices += got
    names = _task_names(events + [e for evs in (elsewhere or {}).values() for e in evs])
    self_ns = idle_ns = 0
    rt = measuring is not None and prios.get(measuring, NORMAL_PRIO) < NORMAL_PRIO
    # A normal task over the waiting RT task: a kernel section not preempted at once (µs, a few ms: a thread
    # cause), or the RT class throttled (tens of ms: the bandwidth's 50 ms a second). The need-resched flag does
    # not tell them apart (on kernels from 6.12 the fair deadline server runs the normal task with it set).
    over: dict[int, int] = {}
    for a, b, (what, who), runnable in slices:
        if what == "task" and rt and runnable and who not in (measuring, 0) \
                and prios.get(who, NORMAL_PRIO) >= NORMAL_PRIO:
            over[who] = over.get(who, 0) + b - a
    throttled = {who for who, ns in over.items() if ns >= THROTTLED_MIN_NS}
    for i, (a, b, (what, who), runnable) in enumerate(slices):
        if i in moved:
            moved[i].add(a, b, start_ns)
            continue
        if what in TASK_OWNERS and who == measuring:   # boosted too: it holds a lock another waits for
            self_ns += b - a
            continue
        if what == "task" and who == 0:
            idle_ns += b - a
            continue
        if what == "task" and runnable and who in throttled:
            # a normal task ran while the real-time one waited to run: the RT class was throttled
            _cause(causes, "rt_throttled", who, names, prios).add(a, b, start_ns)
            continue
        _cause(causes, what, who, names, prios).add(a, b, start_ns)
    for e in events:   # how many faults each page_fault cause holds
        if e.name == PAGE_FAULT and e.pid == measuring and start_ns <= e.ts_ns <= end_ns:
            fault = causes.get(("page_fault", fault_access(e.rest), None))
            if fault is not None:
                fault.count = (fault.count or 0) + 1
    ordered = sorted(causes.values(), key=lambda c: -c.duration_ns)
    explained = sum(c.duration_ns for c in ordered)
    return {"causes": [c.to_json() for c in ordered], "self_ns": self_ns, "idle_ns": idle_ns,
            "unexplained_ns": max(0, end_ns - start_ns - explained - self_ns),
            "measuring_pid": measuring, "measuring_comm": names.get(measuring) if measuring is not None else None}


def _segments(events: list[Event], start_ns: int, end_ns: int, measuring: int,
              elsewhere: dict[int, list[Event]]) -> list[tuple[list[Event], int, int, tuple[int, int] | None]]:
    """[start_ns, end_ns] cut at the measuring thread's moves: (the events of the CPU it was on, from, to, the
    move (from CPU, to CPU) that began the part or None). A CPU whose events are missing gives no events: its
    part stays unexplained. Without `elsewhere` (the thread is pinned), the whole interval on its CPU."""
    if not elsewhere:
        return [(events, start_ns, end_ns, None)]
    cpus = dict(elsewhere)
    if events:
        cpus[events[0].cpu] = events
    found = moves([e for evs in cpus.values() for e in evs], start_ns, end_ns, measuring)
    if not found:
        return [(events, start_ns, end_ns, None)]
    bounds = [start_ns] + [t for t, _, _ in found] + [end_ns]
    on = [found[0][1]] + [dest for _, _, dest in found]
    made = [None] + [(orig, dest) for _, orig, dest in found]
    return [(cpus.get(on[k], []), bounds[k], bounds[k + 1], made[k]) for k in range(len(on))]


def _finishing_move(slices: list[tuple[int, int, tuple, bool]], measuring: int) -> list[int]:
    """The slices right after a move, on its destination, of the task that made it (current there at the move:
    the scheduler pulling the thread in, or the idle task) until the thread's switch-in: the move's own time.
    Interrupts inside it stay theirs."""
    mover, out = None, []
    for j, (_, _, (what, who), _) in enumerate(slices):
        if what not in TASK_OWNERS:
            continue
        if who == measuring or (mover is not None and who != mover):
            break
        mover = who
        out.append(j)
    return out


def _cause(causes: dict[tuple, _Cause], what: str, who, names: dict[int, str], prios: dict[int, int]) -> _Cause:
    """The cause a slice's owner is, made on its first slice."""
    if what in ("task", "boosted", "rt_throttled", "vm_thread"):
        kind = {"task": "thread", "boosted": "pi_boost"}.get(what, what)
        key: tuple = (kind, who)
        if key not in causes:
            causes[key] = _Cause(kind, names.get(who, "?"), pid=who, prio=prios.get(who))
    else:
        kind, name, irq = who
        key = (kind, name, irq)
        if key not in causes:
            causes[key] = _Cause(kind, name, irq=irq)
    return causes[key]


@dataclass
class Interference:
    """What the OS took from a VM (a process of several threads, e.g. the BEAM's schedulers) on one CPU during
    [start, end]: `causes` (interrupt contexts at any time; other tasks while one of the VM's threads was
    runnable on the CPU; `vm_thread`: another thread of the VM while the measuring one waited for the CPU — a
    scheduler spinning for work, +sbwt, or running other processes, a dirty scheduler, an aux thread), their
    exact `spans` [(from, to, cause index)] in absolute ns, the time a VM thread ran (`vm_spans`), and
    `elsewhere_ns`: time the VM did not want this CPU (idle, or other tasks while its threads slept) — no
    cause."""
    causes: list[dict]
    spans: list[tuple[int, int, int]]
    vm_spans: list[tuple[int, int]]
    elsewhere_ns: int


def interference(events: list[Event], start_ns: int, end_ns: int, vm: set[int], cpu: int,
                 origin_ns: int | None = None, running: set[int] = frozenset()) -> Interference:
    """The OS's interference with the `vm` threads on `cpu` during [start_ns, end_ns] (its events, sorted,
    beginning before start_ns). The threads `running` (those that ran the measured code at start_ns) are taken
    as runnable until the events say otherwise. `origin_ns`: what the causes' kept intervals are relative to
    (default start_ns)."""
    slices, prios, _ = _slices(events, start_ns, end_ns, frozenset(vm), cpu, frozenset(running))
    # the same slices, and whether a thread `running` waited in each (slicing does not depend on the set asked)
    mine = _slices(events, start_ns, end_ns, frozenset(running), cpu, frozenset(running))[0] if running else []
    waited = [w for *_, w in mine] or [False] * len(slices)
    names = _task_names(events)
    causes: dict[tuple, _Cause] = {}
    index: dict[int, int] = {}
    spans: list[tuple[int, int, int]] = []
    vm_spans: list[tuple[int, int]] = []
    elsewhere = 0
    for (a, b, (what, who), vm_waits), running_waits in zip(slices, waited):
        if what in TASK_OWNERS and who in vm and (who in running or not running_waits):
            vm_spans.append((a, b))
        elif what in TASK_OWNERS and (who == 0 or not vm_waits):
            elsewhere += b - a
        else:   # an interrupt; another task; another thread of the VM while the measuring one waited (vm_thread)
            c = _cause(causes, "vm_thread" if who in vm else what, who, names, prios)
            c.add(a, b, start_ns if origin_ns is None else origin_ns)
            spans.append((a, b, index.setdefault(id(c), len(index))))
    by_index = sorted(causes.values(), key=lambda c: index[id(c)])
    return Interference([c.to_json() for c in by_index], spans, vm_spans, elsewhere)


def _task_names(events: list[Event]) -> dict[int, str]:
    """pid -> comm, from the events' own fields first (the line prefix may say <...>)."""
    names: dict[int, str] = {}
    for e in events:
        if e.comm and e.comm != "<...>":
            names.setdefault(e.pid, e.comm)
    for e in events:
        if e.name == "sched_switch":
            sw = _switch(e.rest)
            if sw:
                for comm, pid, _ in sw:
                    names[pid] = comm
        elif e.name == "sched_wakeup":
            m = re.match(r"comm=(.*?) pid=(\d+)", e.rest)
            if m:
                names[int(m[2])] = m[1]
    names[0] = "idle"
    return names
