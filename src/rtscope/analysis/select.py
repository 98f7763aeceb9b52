"""Which stored runs to analyse, and which of them are repetitions of one configuration.

A configuration is what a run measured and under which knobs: workload,
variant, runtime, the settings, the workload's parameters (except those that
only say how long to measure, COUNT_PARAMS) and the primary column (name and
unit). Runs of one configuration are repetitions of each other.

Selection criteria combine with AND; `where` criteria naming the same setting
twice combine with OR (`--where governor=performance --where governor=powersave`).
A value matches when its text is the same, or both parse as equal numbers
(`65535` matches 65535.0); an empty value matches runs that do not have the
setting at all.

What ran is what is shown: a run records the settings it asked for and, where
the runtime reports them, the values in force (the BEAM harness's header
`process`: what `Process.info/2` gave the measuring process). A setting whose
value in force differs (the VM clamps `fullsweep_after` to 16 bits and rounds
`min_heap_size` up to a heap size) is part of the configuration's identity
(`not_in_force`), every label says it (`min_heap_size=34 (in force: 233)`,
made here and nowhere else: `setting_text`), and `ran_as` tells two
configurations that ran the same apart from what they asked for.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Iterable


from ..errors import UsageError, choices
from ..options import boolean, parse_assignment
from ..store import Run, Store

# Parameters that set how many samples a run takes, not what it measures: runs
# that differ only in these are still repetitions of one configuration.
COUNT_PARAMS = frozenset({"iterations", "loops", "duration_s", "repetitions"})
CORE_DIMENSIONS = ("workload", "variant", "runtime")
# A parameter whose bare name reads like something else in a label: exec's `n` (the problem size: sum 1..n,
# fib(n), ...) beside a sample count `n`. The label says `size n=4000`; `--where n=4000` still selects it.
PARAM_WORDS = {"n": "size n"}


def value_text(value: Any) -> str:
    """The canonical text of a setting or parameter value (as typed on a command line)."""
    if value is None:
        return ""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    return str(value)


def value_matches(stored: Any, text: str) -> bool:
    """Does a stored value equal the value a user typed?"""
    text = text.strip()
    if text == "":
        return stored is None
    if stored is None:
        return False
    if isinstance(stored, bool):
        try:
            return boolean(text) == stored
        except ValueError:
            return False
    if value_text(stored) == text:
        return True
    try:
        return float(text) == float(stored)
    except (TypeError, ValueError):
        return False


def not_in_force(run: Run) -> tuple[tuple[str, Any, Any], ...]:
    """(setting, requested, in force) for each setting of the run whose value in force, as the run recorded it
    (the header's `process` object), differs from the value it asked for."""
    observed = run.header.get("process") if isinstance(run.header, dict) else None
    if not isinstance(observed, dict):
        return ()
    return tuple((k, _hashable(v), _hashable(observed[k])) for k, v in sorted(run.settings.items())
                 if k in observed and observed[k] is not None and not value_matches(v, value_text(observed[k])))


def setting_text(name: str, value: Any, in_force: dict[str, Any] | None = None) -> str:
    """`name=value`, and what was in force instead when the run did not get it: `min_heap_size=34 (in force:
    233)`. The one place a setting is put in words for a label."""
    text = f"{name}={value_text(value)}"
    if in_force and name in in_force:
        text += f" (in force: {value_text(in_force[name])})"
    return text


def not_in_force_text(items: Iterable[tuple[str, Any, Any]]) -> str:
    """`fullsweep_after 131071 requested, 65535 in force; ...` (empty when every setting was in force)."""
    return "; ".join(f"{k} {value_text(r)} requested, {value_text(f)} in force" for k, r, f in items)


def in_force_label(label: str, run: Run) -> str:
    """A label made elsewhere of `name=value` words (a spec cell's key) with what `run` had in force instead
    (setting_text), and its parameters named as every label names them (`size n=4000`)."""
    words = label.split(" ")
    for k, r, f in not_in_force(run):
        words = [setting_text(k, r, {k: f}) if w == f"{k}={value_text(r)}" else w for w in words]
    # a parameter named as Configuration labels name it (PARAM_WORDS: exec's problem size `size n=4000`)
    words = [f"{PARAM_WORDS[k]}={v}" if eq and k in PARAM_WORDS and k in run.params else w
             for w in words for k, eq, v in [w.partition("=")]]
    return " ".join(words)


@dataclass(frozen=True)
class Configuration:
    """The identity of a cell: runs with equal Configuration are repetitions."""

    workload: str
    variant: str
    runtime: str
    settings: tuple[tuple[str, Any], ...]
    params: tuple[tuple[str, Any], ...]
    measure: str   # primary column name
    unit: str      # primary column unit
    # (setting, requested, in force) for the settings the runs did not get (not_in_force()): runs that asked
    # for the same but got different values are different configurations.
    not_in_force: tuple[tuple[str, Any, Any], ...] = ()

    @classmethod
    def of(cls, run: Run) -> "Configuration":
        primary = run.primary
        return cls(run.workload, run.variant, run.runtime,
                   tuple(sorted((k, _hashable(v)) for k, v in run.settings.items())),
                   tuple(sorted((k, _hashable(v)) for k, v in run.params.items() if k not in COUNT_PARAMS)),
                   primary["name"], primary.get("unit", ""), not_in_force(run))

    @property
    def in_force(self) -> dict[str, Any]:
        """The settings whose value in force differs from the one asked for: name -> value in force."""
        return {k: f for k, _, f in self.not_in_force}

    @property
    def settings_in_force(self) -> dict[str, Any]:
        """The settings as they were in force (the requested value where nothing else was recorded)."""
        return {**self.settings_dict, **self.in_force}

    def ran_as(self, other: "Configuration") -> bool:
        """Whether the two ran the same (same workload, parameters, measure and settings in force), whatever
        they asked for: a comparison of the two is an A/A comparison, not one of a setting."""
        def norm(d: dict) -> dict:
            return {k: value_text(v) for k, v in d.items()}
        return (self.workload, self.variant, self.runtime, self.params, self.measure, self.unit) == \
            (other.workload, other.variant, other.runtime, other.params, other.measure, other.unit) and \
            norm(self.settings_in_force) == norm(other.settings_in_force)

    @property
    def settings_dict(self) -> dict[str, Any]:
        return dict(self.settings)

    @property
    def params_dict(self) -> dict[str, Any]:
        return dict(self.params)

    def get(self, name: str) -> Any:
        """The value of a dimension: workload/variant/runtime, a setting, or a parameter (None when unset)."""
        if name in CORE_DIMENSIONS:
            return getattr(self, name)
        s = self.settings_dict
        return s[name] if name in s else self.params_dict.get(name)

    @property
    def label(self) -> str:
        knobs = " ".join(setting_text(k, v, self.in_force) for k, v in self.settings) or "defaults"
        return f"{self.workload} {self.variant} ({self.runtime}) {knobs}"

    def key(self) -> dict:
        """JSON form."""
        return {"workload": self.workload, "variant": self.variant, "runtime": self.runtime,
                "settings": dict(self.settings), "params": dict(self.params), "measure": self.measure,
                "unit": self.unit,
                "not_in_force": self.not_in_force_json}

    @property
    def not_in_force_json(self) -> list[dict]:
        """`[{"setting", "requested", "in_force"}]`: what `--json` says of the settings the runs did not get."""
        return [{"setting": k, "requested": r, "in_force": f} for k, r, f in self.not_in_force]


def _hashable(v: Any) -> Any:
    if isinstance(v, list):
        return tuple(_hashable(x) for x in v)
    if isinstance(v, dict):
        return tuple(sorted((k, _hashable(x)) for k, x in v.items()))
    return v


def short_labels(configs: Iterable[Configuration]) -> dict[Configuration, str]:
    """Labels that show only what varies among `configs` (all of it when there is one)."""
    configs = list(dict.fromkeys(configs))
    if len(configs) <= 1:
        return {c: c.label for c in configs}
    varying_core = [d for d in CORE_DIMENSIONS if len({getattr(c, d) for c in configs}) > 1]
    if len({(c.measure, c.unit) for c in configs}) > 1:
        varying_core.append("measure")
    setting_names = sorted({k for c in configs for k, _ in c.settings})
    param_names = sorted({k for c in configs for k, _ in c.params})

    kinds = {(c.workload, c.variant, c.runtime) for c in configs}

    def varying(names, of, count_absent: bool) -> list[str]:
        """Names that take different values; unset counts as a value across workloads and runtimes only with
        count_absent (within one workload, variant and runtime it always does: set on some of its configurations
        only, such as a governor, it tells them apart)."""
        return [n for n in names
                if len({value_text(of(c).get(n)) for c in configs if count_absent or n in of(c)}) > 1
                or any(len({n in of(c) for c in configs if (c.workload, c.variant, c.runtime) == k}) > 1
                       for k in kinds)]

    def labels(count_absent: bool) -> dict[Configuration, str]:
        varying_settings = varying(setting_names, lambda c: c.settings_dict, count_absent)
        varying_params = varying(param_names, lambda c: c.params_dict, count_absent)
        out = {}
        for c in configs:
            parts = [getattr(c, d) if d != "runtime" else f"({c.runtime})" for d in varying_core]
            s, p = c.settings_dict, c.params_dict
            parts += [setting_text(n, s[n], c.in_force) for n in varying_settings if n in s]
            parts += [f"{PARAM_WORDS.get(n, n)}={value_text(p[n])}" for n in varying_params if n in p]
            if varying_settings and not any(n in s for n in varying_settings):
                parts.append("defaults")
            out[c] = " ".join(parts) or c.label
        return out

    # First only what takes different values where it is set, or is set on some configurations of one workload,
    # variant and runtime only (a runtime's own settings, such as the BEAM's recorded defaults, do not tell a native and a BEAM
    # configuration apart: the runtime does); then also what is set on some configurations only; distinct
    # configurations must never share a label.
    for count_absent in (False, True):
        out = labels(count_absent)
        if len(set(out.values())) == len(out):
            return out
    return {c: c.label for c in configs}


@dataclass
class Selection:
    """What to analyse. Empty criteria select every run in the store."""

    experiment: str | None = None          # id or name (a name used twice: the latest)
    workload: str | None = None
    variant: str | None = None
    runtime: str | None = None
    tags: list[str] = field(default_factory=list)           # a run must carry all of them
    where: list[tuple[str, str]] = field(default_factory=list)  # setting/parameter NAME=VALUE
    run_ids: list[int] = field(default_factory=list)

    @classmethod
    def from_cli(cls, experiment=None, workload=None, variant=None, runtime=None, tags=None, where=None,
                 run_ids=None) -> "Selection":
        return cls(experiment, workload, variant, runtime, list(tags or []),
                   [parse_assignment(w) for w in where or []], list(run_ids or []))

    def describe(self) -> str:
        parts = [f"experiment {self.experiment}"] if self.experiment else []
        parts += [f"{k} {getattr(self, k)}" for k in CORE_DIMENSIONS if getattr(self, k)]
        parts += [f"tag {t}" for t in self.tags] + [f"{n}={v}" for n, v in self.where]
        if self.run_ids:
            parts.append("runs " + ",".join(map(str, self.run_ids)))
        return ", ".join(parts) or "all runs"


def experiment_id(store: Store, ref: str) -> int:
    """An experiment id from an id or a name."""
    rows = store.experiment_names()
    ref = str(ref).strip()
    if ref.isdigit() and any(i == int(ref) for i, _ in rows):
        return int(ref)
    named = [i for i, name in rows if name == ref]
    if named:
        return named[-1]
    known = [f"{i} ({name})" for i, name in rows]
    raise UsageError(f"no experiment {ref!r} in store {store.url}; "
                     + (f"valid experiments: {choices(known)}" if known else "it holds no experiments yet"))


def experiment_note(store: Store, ref: str) -> str:
    """What experiment_id made of a name shared by several experiments ("" for an id or a name used once)."""
    ref = str(ref).strip()
    rows = store.experiment_names()
    if ref.isdigit() and any(i == int(ref) for i, _ in rows):
        return ""
    named = [i for i, name in rows if name == ref]
    if len(named) < 2:
        return ""
    return (f"{len(named)} experiments are named {ref!r} ({', '.join(map(str, named))}): using the latest, "
            f"experiment {named[-1]} (--experiment ID for another)")


def select_runs(store: Store, sel: Selection) -> list[Run]:
    """The runs that meet every criterion; a UsageError naming the valid values when none do."""
    exp = experiment_id(store, sel.experiment) if sel.experiment else None
    runs = store.runs(experiment_id=exp, ids=sel.run_ids or None)
    pool = runs
    if sel.run_ids:
        missing = sorted(set(sel.run_ids) - {r.id for r in runs})
        if missing:
            raise UsageError(f"no run {missing[0]} in store {store.url} (see `rtscope runs`)")
    for dim in CORE_DIMENSIONS:
        want = getattr(sel, dim)
        if want:
            _check_known(dim, want, {r[dim] for r in pool})
            runs = [r for r in runs if r[dim] == want]
    for tag in sel.tags:
        _check_known("tag", tag, {t for r in pool for t in r.tags})
        runs = [r for r in runs if tag in r.tags]
    wanted: dict[str, list[str]] = {}
    for name, value in sel.where:
        wanted.setdefault(name, []).append(value)
    for name, values in wanted.items():
        known_names = {k for r in pool for k in (*r.settings, *r.params)}
        _check_known("setting or parameter", name, known_names)
        runs = [r for r in runs if any(value_matches(_lookup(r, name), v) for v in values)]
        if not runs:
            present = sorted({value_text(_lookup(r, name)) for r in pool} - {""})
            raise UsageError(f"no run with {name}={' or '.join(values)} in the selection; "
                             f"values of {name}: {choices(present)}")
    if not runs:
        raise UsageError(f"no runs match ({sel.describe()}) in store {store.url}; see `rtscope runs`")
    return runs


def _lookup(run: Run, name: str) -> Any:
    return run.settings[name] if name in run.settings else run.params.get(name)


def _check_known(kind: str, value: str, known: set) -> None:
    if value not in known:
        raise UsageError(f"no run with {kind} {value!r} in the selection; "
                         f"valid: {choices(sorted(map(str, known))) or '(none)'}")


def group_runs(runs: Iterable[Run]) -> dict[Configuration, list[Run]]:
    """Runs grouped by configuration, in order of first appearance (run id order)."""
    out: dict[Configuration, list[Run]] = {}
    for r in runs:
        out.setdefault(Configuration.of(r), []).append(r)
    return out
