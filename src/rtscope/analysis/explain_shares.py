"""The causes of a run's explained samples, summed up: what share of the excess time each kind and culprit took.

A sample's *excess* is what it took beyond a reference (the run's median for `rtscope explain` and `show`;
the baseline's p99 for `compare`). Its causes are charged against its excess largest first, each up to what
is left, and what no cause covers is `unexplained`: so the shares of a run add up to 100 % of its excess.
"""

from __future__ import annotations

from dataclasses import dataclass

from ..store import Store

UNEXPLAINED = "unexplained"


def culprit(cause: dict) -> str:
    """How a cause is named: `thread rtprobe/1234`, `irq local_timer (236)`, `softirq TIMER`, `gc major`."""
    if cause["kind"] == "scheduled_out":
        return "scheduled out"
    who = cause.get("name") or "?"
    if cause.get("pid") is not None:
        who += f"/{cause['pid']}"
    elif cause.get("irq") is not None and cause["kind"] == "irq":
        who += f" ({cause['irq']})"
    return f"{cause['kind']} {who}"


def priority(kernel_prio: int | None) -> str | None:
    """A thread's kernel priority (sched_switch's prio) as `chrt` speaks of it: below 100 a real-time priority
    99 - prio (`FIFO 90` is kernel prio 9; the trace does not tell SCHED_RR from SCHED_FIFO), 100..139 a normal
    thread's nice prio - 120 (`nice 0` is 120), below 0 SCHED_DEADLINE."""
    if kernel_prio is None:
        return None
    if kernel_prio < 0:
        return "DEADLINE"
    return f"FIFO {99 - kernel_prio}" if kernel_prio < 100 else f"nice {kernel_prio - 120}"


def shown_cause(cause: dict) -> dict:
    """A stored cause as `explain --json` gives it: the kernel's prio as `kernel_prio`, beside it `priority`,
    the user's terms (see priority); its intervals as `intervals_ns`."""
    out = {k: v for k, v in cause.items() if k not in ("prio", "intervals")}
    if "prio" in cause:
        out = {**{k: v for k, v in out.items() if k != "duration_ns"}, "kernel_prio": cause["prio"],
               "priority": priority(cause["prio"]), "duration_ns": cause.get("duration_ns")}
    return out | {"intervals_ns": cause.get("intervals", [])}


@dataclass
class Share:
    by: str                 # "kind" or "culprit"
    kind: str
    name: str | None
    pid: int | None
    irq: int | None
    excess_ns: int
    share: float            # of the excess of the samples above the reference
    samples: int            # samples in which it took part of the excess

    def to_json(self) -> dict:
        return {"by": self.by, "kind": self.kind, "name": self.name, "pid": self.pid, "irq": self.irq,
                "excess_ns": self.excess_ns, "share": self.share, "samples": self.samples}

    @property
    def label(self) -> str:
        if self.by == "kind":
            return self.kind
        return UNEXPLAINED if self.kind == UNEXPLAINED else culprit(self.to_json())


def shares(explained: list[dict], reference: float) -> list[Share]:
    """Share of the excess above `reference` per cause kind and per culprit, over the explained samples that
    exceed it (kind rows first, each list largest first). Samples whose window was not traced are left out."""
    kinds: dict[str, list] = {}
    culprits: dict[tuple, list] = {}
    total = 0
    for s in explained:
        if s.get("note") or s["value_ns"] <= reference:
            continue
        left = s["value_ns"] - reference
        total += left
        for c in sorted(s.get("causes", []), key=lambda c: -c["duration_ns"]):
            take = min(left, c["duration_ns"])
            if take <= 0:
                break
            left -= take
            for table, key in ((kinds, c["kind"]), (culprits, (c["kind"], c.get("name"), c.get("pid"), c.get("irq")))):
                table.setdefault(key, [0, 0])
                table[key][0] += take
                table[key][1] += 1
        if left > 0:
            for table, key in ((kinds, UNEXPLAINED), (culprits, (UNEXPLAINED, None, None, None))):
                table.setdefault(key, [0, 0])
                table[key][0] += left
                table[key][1] += 1
    if total <= 0:
        return []
    rows = [Share("kind", k, None, None, None, round(v[0]), v[0] / total, v[1]) for k, v in kinds.items()]
    rows.sort(key=lambda r: -r.excess_ns)
    more = [Share("culprit", k[0], k[1], k[2], k[3], round(v[0]), v[0] / total, v[1]) for k, v in culprits.items()]
    more.sort(key=lambda r: -r.excess_ns)
    return rows + more


def steal(run, explained: list[dict], reference: float) -> dict | None:
    """The hypervisor's part of the unexplained time: the steal time /proc/stat counted on the traced CPUs
    over the whole run (explain.steal in its trailer), beside the unexplained excess of its explained samples
    above `reference`. The steal may have fallen anywhere in the run, so it bounds the hypervisor's part of
    that unexplained time: at most the smaller of the two. None when the run recorded no steal counter."""
    got = (run.trailer.get("explain") or {}).get("steal")
    if got is None:
        return None
    unexplained = next((r.excess_ns for r in shares(explained, reference)
                        if r.by == "kind" and r.kind == UNEXPLAINED), 0)
    return {"steal_ns": got["ns"], "per_cpu_ns": got.get("per_cpu_ns", {}), "unexplained_excess_ns": unexplained,
            "hypervisor_at_most_ns": min(got["ns"], unexplained)}


def non_primary_explained_column(run) -> str | None:
    """The column a run's explained samples measure when it is not the run's primary one (a gpio blink's
    lateness, beside its primary period: docs/gpio.md), else None."""
    column = (run.trailer.get("explain") or {}).get("column")
    return column if column and column != run.primary["name"] else None


def column_quantile(store: Store, runs, q: float) -> float | None:
    """The pooled q-th percentile of the runs' explained column when they explain one other than their primary
    (the reference their excess is measured from), else None: the runs' own statistics apply."""
    columns = {non_primary_explained_column(r) for r in runs}
    if len(columns) != 1 or None in columns:
        return None
    from . import stats
    name = columns.pop()
    values = [v for r in runs if len(v := store.samples(r.id, [name]).get(name, ())) > 0]
    return stats.summarize(values).get(f"p{q:g}") if values else None


def run_median(store: Store, run) -> float | None:
    from . import distribution
    other = column_quantile(store, [run], 50)
    if other is not None:
        return other
    dist = distribution.of_run(store, run)
    return dist.stats.get("p50") if dist else None


def top_line(store: Store, run, most: int = 3) -> str | None:
    """One line for `show`: the run's largest culprits by share of the excess above its median."""
    explained = store.causes(run.id)
    if not explained:
        return None
    median = run_median(store, run)
    rows = [r for r in shares(explained, median or 0) if r.by == "culprit"][:most]
    traced = sum(1 for s in explained if not s.get("note"))
    head = f"{traced} of {len(explained)} worst samples explained"
    if not rows:
        return head + "; none above the median"
    return head + "; excess above the median: " + ", ".join(f"{r.label} {r.share:.0%}" for r in rows)


@dataclass
class ConfigShares:
    """The cause shares of one configuration's explained samples above its comparison's reference."""

    label: str
    reference_ns: float     # the baseline's pooled p99 (compare), or the configuration's median
    samples: int            # explained samples above it
    kinds: list[Share]
    reference: str = "baseline p99"

    def per_sample_ns(self, kind: str) -> float:
        """The excess time of `kind` per explained sample above the reference (0 when none)."""
        row = next((r for r in self.kinds if r.kind == kind), None)
        return row.excess_ns / self.samples if row and self.samples else 0.0

    def to_json(self) -> dict:
        return {"configuration": self.label, "reference": {"what": self.reference, "value_ns": self.reference_ns},
                "samples": self.samples, "kinds": [r.to_json() for r in self.kinds]}


def cell_shares(store: Store, cells, labels) -> list[ConfigShares]:
    """Per configuration with explained samples: their cause shares above the configuration's own median."""
    out = []
    for cell in cells:
        samples = [s for r in cell.runs for s in store.causes(r.id)]
        median = column_quantile(store, cell.runs, 50) or cell.stats.get("p50")
        if not samples or median is None:
            continue
        above = [s for s in samples if not s.get("note") and s["value_ns"] > median]
        rows = [r for r in shares(samples, median) if r.by == "kind"]
        out.append(ConfigShares(labels[cell.config], median, len(above), rows, "median"))
    return out


def comparison_shares(store: Store, cs) -> list[ConfigShares]:
    """Per compared configuration and its baseline: the cause shares of the explained samples above the
    baseline's p99 (`compare`: "the tail got shorter because GC time in it fell from X to Y")."""
    explained = {r.id: store.causes(r.id) for c in cs.cells for r in c.runs}
    if not any(explained.values()):
        return []
    labels = cs.labels
    out: list[ConfigShares] = []
    seen = set()
    for k in cs.comparisons:
        reference = column_quantile(store, k.base.runs, 99) or k.base.stats.get("p99")
        if reference is None:
            continue
        for cell in (k.base, k.cell):
            key = (cell.config, k.base.config)
            if key in seen:
                continue
            seen.add(key)
            samples = [s for r in cell.runs for s in explained[r.id]]
            above = [s for s in samples if not s.get("note") and s["value_ns"] > reference]
            rows = [r for r in shares(samples, reference) if r.by == "kind"]
            out.append(ConfigShares(labels[cell.config], reference, len(above), rows))
    return out
