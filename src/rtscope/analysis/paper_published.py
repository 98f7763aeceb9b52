"""A study's own table layout and its published figures (a spec's `[paper]` table and its claims' `published`).

`rtscope report` of a study's experiment opens with the study's table, the published figure beside each
measured one (report/paper_view.py). The layout names the table's columns; the published figures are keyed by the
configuration they belong to (NAME = VALUE items, as a claim's sides select) and a figure name. They come from
two places, the `[[paper.published]]` rows first: a claim's `published` gives its baseline's and its cell's
figure of its metric (docs/spec.md, "Paper").

| layout    | the study                        | columns                                                  |
| --------- | -------------------------------- | -------------------------------------------------------- |
| stats     | 000 (nerves-rt)                  | AVG MAX VAR STDEV per configuration                      |
| latency   | 001 (kernels, kernel-latency)    | min avg max per configuration, above the histograms      |
| benchee   | 002 (msgq)                       | ips average deviation median 99th %                      |
| storage   | 003 (storage)                    | mean time per pass: modes × environments                 |
| tasks     | 004 (tasks)                      | memory per task (slope), intercept, r, r²                |

Published figures come from other hardware: they are shown, never tested (the claims test what can be).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from .claims import UNITS, Claim

# layout -> its columns: (figure, heading)
LAYOUTS: dict[str, tuple[tuple[str, str], ...]] = {
    "stats": (("mean", "AVG"), ("max", "MAX"), ("var", "VAR"), ("stdev", "STDEV")),
    "latency": (("min", "min"), ("mean", "avg"), ("max", "max")),
    "benchee": (("ips", "ips"), ("mean", "average"), ("deviation", "deviation"), ("median", "median"),
                ("p99", "99th %")),
    "storage": (("mean", "mean time per pass"),),
    "tasks": (("memory_per_task", "memory per task (slope)"), ("intercept", "intercept"), ("r", "r"),
              ("r2", "r²")),
}
# Figures without the measured quantity's unit: ips per second, deviation in % of the mean, r and r² none.
UNITLESS = {"ips": "1/s", "deviation": "%", "r": "", "r2": ""}
FIGURES = tuple(dict.fromkeys(["min", "mean", "median", "p99", "max", "var", "stdev", "tail", "ips", "deviation",
                               "memory_per_task", "intercept", "r", "r2"]))


@dataclass(frozen=True)
class Published:
    """One published figure of one configuration."""

    items: tuple[tuple[str, str], ...]   # NAME=VALUE texts selecting the configuration
    figure: str                          # a FIGURES name
    value: float
    unit: str = ""                       # a UNITS name (the figure's stored unit: value × factor), or none

    @property
    def stored(self) -> float:
        """The value in the stored unit (ns, bytes); a variance scales with the unit's square."""
        if self.figure in UNITLESS or self.unit not in UNITS:
            return self.value
        factor = UNITS[self.unit][1]
        return self.value * factor * factor if self.figure == "var" else self.value * factor


@dataclass
class Paper:
    """A spec's `[paper]` table."""

    layout: str
    source: str = ""
    hardware: str = ""
    unit: str = ""                      # the unit its figures are printed in (us, ms, B, ...)
    published: list[Published] = field(default_factory=list)


def published_figures(paper: Paper | None, claims: list[Claim]) -> list[Published]:
    """Every published figure of a spec: its `[[paper.published]]` rows first, then its claims' (a claim's
    baseline and cell, for its metric)."""
    out = list(paper.published) if paper else []
    for c in claims:
        pub = c.published or {}
        for side in ("baseline", "cell") if c.two_sided else ("cell",):
            if isinstance(pub.get(side), (int, float)):
                items = (*c.where, *(c.cell if side == "cell" else c.baseline))
                out.append(Published(items, c.metric, float(pub[side]), str(pub.get("unit") or "")))
    return out


def hardware_of(paper: Paper | None, claims: list[Claim]) -> str:
    """The hardware the published figures were measured on: the paper's, else its claims' (each once)."""
    if paper and paper.hardware:
        return paper.hardware
    return "; ".join(dict.fromkeys(str(c.published["hardware"]) for c in claims
                                   if (c.published or {}).get("hardware")))
