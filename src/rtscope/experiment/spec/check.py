"""Checking a spec: every key, value, axis and rule, each problem collected with its line, the cells built."""

from __future__ import annotations

import itertools
import json
import re
import tomllib
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ... import targets
from ...errors import RtscopeError, UsageError, choices, did_you_mean
from ...runtimes import RUNTIMES
from ...runtimes.base import RunRequest
from ...settings import environments
from ...settings.registry import SETTINGS, system_settings
from ...workloads import WORKLOADS
from .claim_table import check_claims, dimension_names
from .paper_table import check_paper
from .locate import Locator
from .model import DESIGNS as DESIGN_NAMES, Cell, Problem, Spec, cell_key
from .request import build_request
from .tune import check_range, check_tune

TOP_KEYS = ("name", "description", "tags", "repetitions", "seed", "order", "on_unavailable", "timeout_s",
            "scale", "environments", "targets", "target", "workload", "tune", "baseline", "claim", "paper",
            "design", "block")
BLOCK_KEYS = ("name", "variants", "runtime", "params", "settings", "exclude", "repetitions", "tags",
              "on_unavailable", "timeout_s", "scale", "target")
SCALE_KEYS = ("repetitions", "timeout_s", "params")
ORDERS = ("random", "shuffle", "sequential")
ON_UNAVAILABLE = ("fail", "skip")
DEFAULT_SCALE = "quick"
DEFAULT_RUNTIME = "native"
MAX_SEED = 2**63 - 1


def _kind(value: Any) -> str:
    return {bool: "a boolean", int: "an integer", float: "a number", str: "a string", list: "a list",
            dict: "a table"}.get(type(value), type(value).__name__)


def _toml(value: Any) -> str:
    """A value as it looks in TOML (true, not True), for messages."""
    return json.dumps(value, default=str, ensure_ascii=False)


@dataclass
class _Axis:
    """One matrix axis of a block: its name, kind and (raw, parsed, path) values."""

    name: str
    kind: str                      # variant | runtime | param | setting
    values: list[tuple[Any, Any, tuple]]
    path: tuple
    range: Any = None              # a tune spec's range table (model.Range): values are then its two ends


class Checker:
    def __init__(self, text: str, source: str, scale: str | None, target_override: list[str] | None = None):
        self.text, self.source, self.want_scale = text, source, scale
        self.target_override = target_override
        self.problems: list[Problem] = []
        self.warnings: list[Problem] = []
        self.scale_used: set[str] = set()  # spec-wide [scale.NAME.params] keys that reached a block
        self.loc: Locator | None = None
        self.tuning = False                     # a [tune] table: range tables are axes (spec/tune.py)
        self.block_axes: dict[int, list[_Axis]] = {}
        # A block left out for its problems: the matrix lacks its cells, so what claims, paper rows and the
        # baseline select in it is not checked (each would only repeat the block's problem).
        self.matrix_incomplete = False

    # helpers
    def error(self, path: tuple, message: str) -> None:
        p = Problem(self.loc.line(path) if self.loc else None, message)
        if p not in self.problems:
            self.problems.append(p)

    def warn(self, path: tuple, message: str) -> None:
        p = Problem(self.loc.line(path) if self.loc else None, message)
        if p not in self.warnings:
            self.warnings.append(p)

    def unknown_keys(self, table: dict, allowed, path: tuple, where: str) -> None:
        for key in table:
            if key not in allowed:
                self.error(path + (key,), f"unknown key {key!r} in {where}{did_you_mean(key, allowed)}; valid keys: "
                           f"{choices(sorted(allowed))}")

    def typed(self, table: dict, key: str, path: tuple, kind: str, default: Any = None) -> Any:
        """table[key] if present and of `kind` (str, int, number, table, strings), else default (+ a problem)."""
        if key not in table:
            return default
        v, p = table[key], path + (key,)
        ok = {"str": isinstance(v, str), "int": isinstance(v, int) and not isinstance(v, bool),
              "number": isinstance(v, (int, float)) and not isinstance(v, bool), "table": isinstance(v, dict),
              "strings": isinstance(v, str) or (isinstance(v, list) and all(isinstance(x, str) for x in v))}[kind]
        if not ok:
            want = {"str": "a string", "int": "an integer", "number": "a number", "table": "a table",
                    "strings": "a string or a list of strings"}[kind]
            self.error(p, f"{key} must be {want}, not {_kind(v)} ({_toml(v)})")
            return default
        return [v] if kind == "strings" and isinstance(v, str) else v

    def positive(self, table: dict, key: str, path: tuple, kind: str, default: Any = None) -> Any:
        v = self.typed(table, key, path, kind, None)
        if v is None:
            return default
        if v < 1 if kind == "int" else v <= 0:
            self.error(path + (key,), f"{key} must be {'>= 1' if kind == 'int' else '> 0'}, not {v}")
            return default
        return v

    def one_of(self, table: dict, key: str, path: tuple, valid: tuple, default: str) -> str:
        v = self.typed(table, key, path, "str", None)
        if v is None:
            return default
        if v not in valid:
            self.error(path + (key,), f"unknown {key} {v!r}; valid: {choices(valid)}")
            return default
        return v

    # the document
    def run(self) -> Spec:
        try:
            raw = tomllib.loads(self.text)
        except tomllib.TOMLDecodeError as e:
            m = re.search(r"\(at line (\d+), column \d+\)", str(e))
            line = int(m.group(1)) if m else (self.text.count("\n") + 1 if "end of document" in str(e) else None)
            msg = re.sub(r"\s*\(at (line \d+, column \d+|end of document)\)", "", str(e))
            self.problems.append(Problem(line, f"not valid TOML: {msg}"))
            return self._spec({}, None, (), None, "random")
        self.loc = Locator(self.text)
        self.unknown_keys(raw, TOP_KEYS, (), "the spec (top level)")
        name = self.typed(raw, "name", (), "str", Path(self.source).stem) or Path(self.source).stem
        self.typed(raw, "description", (), "str")
        seed = self.typed(raw, "seed", (), "int")
        if seed is not None and not 0 <= seed <= MAX_SEED:
            self.error(("seed",), f"seed must be 0..{MAX_SEED}, not {seed}")
            seed = None
        order = self.one_of(raw, "order", (), ORDERS, "random")
        self.design = self.one_of(raw, "design", (), DESIGN_NAMES, "runs")
        self.block_samples = self.positive(raw, "block", (), "int")
        self.positive(raw, "repetitions", (), "int")
        self.positive(raw, "timeout_s", (), "number")
        self.one_of(raw, "on_unavailable", (), ON_UNAVAILABLE, "fail")
        self.typed(raw, "tags", (), "strings")
        if "environments" in raw:
            self.definitions(raw, "environments", environments.load_environments)
        if "targets" in raw:
            self.definitions(raw, "targets", targets.load_table)
        scales, scale = self.scales(raw)
        blocks = raw.get("workload")
        if "workload" not in raw:
            self.error((), "no [[workload]] block; a spec needs at least one")
            blocks = []
        elif not isinstance(blocks, list) or not all(isinstance(b, dict) for b in blocks) or not blocks:
            self.error(("workload",), "workload must be [[workload]] tables (an array of tables), at least one")
            blocks = []
        cells: list[Cell] = []
        self.tuning = "tune" in raw
        self.check_scale_keys(raw, blocks, scales)
        for i, block in enumerate(blocks):
            cells += self.block(raw, block, i, scale)
        self.duplicates(cells)
        top = raw.get("scale", {}).get(scale) if scale and isinstance(raw.get("scale"), dict) else None
        overrides = top.get("params") if isinstance(top, dict) else None
        for key in (overrides if isinstance(overrides, dict) and cells else ()):
            if key not in self.scale_used:
                self.warn(("scale", scale, "params", key), f"[scale.{scale}.params] {key} applies to no block: "
                          "no block sets it and it is not a default of every variant of a block")
        baseline = self.baseline(raw, blocks, cells) if "baseline" in raw else []
        claims = check_claims(self, raw, blocks, cells, scale, scales) if "claim" in raw else []
        paper = check_paper(self, raw, dimension_names(blocks), cells, scale, scales) if "paper" in raw else None
        tune, knobs = None, []
        if self.tuning:
            w = WORKLOADS.get(blocks[0].get("name")) if blocks and isinstance(blocks[0].get("name"), str) else None
            tune, knobs = check_tune(self, raw, blocks, self.block_axes.get(0, []),
                                     lambda key: w.param(key), lambda key: SETTINGS[key])
        return self._spec(raw, scale, scales, seed, order, name=name, cells=cells, tune=tune, knobs=knobs,
                          baseline=baseline, claims=claims, paper=paper)

    def baseline(self, raw: dict, blocks: list, cells: list[Cell]) -> list[str]:
        """The spec's `baseline = { NAME = VALUE, ... }`: the configuration `compare` and `report` compare the
        others with when no --baseline is given. NAME: a setting, a parameter, workload, variant or runtime;
        VALUE "" matches a configuration without that setting. Returns NAME=VALUE items (Baseline.parse's)."""
        from ...analysis.select import CORE_DIMENSIONS, value_matches, value_text
        table = self.typed(raw, "baseline", (), "table", None)
        if table is None:
            return []
        if not table:
            self.error(("baseline",), "baseline is an empty table; name the baseline configuration, e.g. "
                       "baseline = { cpu = 1 }")
            return []
        params = {p.name for b in blocks if isinstance(b, dict) and isinstance(b.get("name"), str)
                  and b["name"] in WORKLOADS for p in WORKLOADS[b["name"]].params}
        items = []
        for key, value in table.items():
            path = ("baseline", key)
            if key not in SETTINGS and key not in params and key not in CORE_DIMENSIONS:
                self.error(path, f"baseline names {key!r}, not a setting, parameter or {'/'.join(CORE_DIMENSIONS)} "
                           f"of this spec; valid names: {choices(sorted({*CORE_DIMENSIONS, *params, *SETTINGS}))}")
                continue
            if isinstance(value, (dict, list)):
                self.error(path, f"baseline {key} must be one value, not {_kind(value)} ({_toml(value)})")
                continue
            if key in SETTINGS and value != "":
                try:
                    SETTINGS[key].value(value)
                except UsageError as e:
                    self.error(path, f"baseline: {e}")
                    continue
            items.append((key, value_text(value)))
        if len(items) < len(table) or not cells:
            return [f"{k}={v}" for k, v in items]

        def get(req, key):
            core = {"workload": req.workload, "variant": req.variant, "runtime": req.runtime}
            return core[key] if key in core else req.settings.get(key, req.params.get(key))

        if not self.matrix_incomplete and not any(all(value_matches(get(c.request, k), v) for k, v in items)
                                                  for c in cells):
            self.error(("baseline",), "baseline " + " ".join(f"{k}={v}" for k, v in items) + " matches no "
                       "configuration of this spec; its configurations: " + "; ".join(c.key for c in cells))
        return [f"{k}={v}" for k, v in items]

    def _spec(self, raw, scale, scales, seed, order, name=None, cells=(), tune=None, knobs=(), baseline=(),
              claims=(), paper=None) -> Spec:
        self.problems.sort(key=lambda p: p.line or 0)
        return Spec(name=name or Path(self.source).stem, description=str(raw.get("description", "")),
                    source=self.source, text=self.text, raw=raw, scale=scale, scales=tuple(scales), seed=seed,
                    order=order, cells=list(cells), problems=self.problems, warnings=self.warnings,
                    locator=self.loc, tune=tune, knobs=list(knobs), baseline=list(baseline), claims=list(claims),
                    paper=paper, design=getattr(self, "design", "runs"), block=getattr(self, "block_samples", None))

    def definitions(self, raw: dict, key: str, load) -> None:
        """`[environments.NAME]` / `[targets.NAME]` tables, each defined through its module's loader
        (docs/environments.md, docs/targets.md); every bad table is one problem at its line."""
        table = self.typed(raw, key, (), "table", {})
        for name, definition in table.items():
            try:
                load({name: definition}, self.source)
            except RtscopeError as e:
                msg = str(e).removeprefix(f"{self.source}, ").removeprefix(f"{self.source}: ")
                self.error((key, name), msg)

    def scales(self, raw: dict) -> tuple[list[str], str | None]:
        names: list[str] = []
        top = self.typed(raw, "scale", (), "table", {})
        tables = [(("scale",), top)]
        blocks = raw.get("workload")
        for i, b in enumerate(blocks if isinstance(blocks, list) else []):
            if isinstance(b, dict) and "scale" in b:
                tables.append((("workload", i, "scale"), self.typed(b, "scale", ("workload", i), "table", {})))
        for path, table in tables:
            for s, overrides in table.items():
                if not isinstance(overrides, dict):
                    self.error(path + (s,), f"scale {s!r} must be a table ([scale.{s}]) of overrides, "
                               f"not {_kind(overrides)}")
                elif s not in names:
                    names.append(s)
        if self.want_scale is not None:
            if self.want_scale not in names:
                self.error(("scale",), f"unknown scale {self.want_scale!r}; "
                           + (f"valid scales: {choices(names)}" if names else "this spec defines no [scale.NAME] tables"))
                return names, None
            return names, self.want_scale
        return names, (DEFAULT_SCALE if DEFAULT_SCALE in names else names[0] if names else None)

    def check_scale_keys(self, raw: dict, blocks: list, scales: list[str]) -> None:
        """Keys of every [scale.NAME] table (top level and per block); parameters are checked per block."""
        known: dict[str, list[str]] = {}
        for b in blocks:
            w = WORKLOADS.get(b.get("name")) if isinstance(b.get("name"), str) else None
            if w:
                known[w.name] = [p.name for p in w.params]
        params = {p for ps in known.values() for p in ps}
        tables = [(("scale",), raw.get("scale"), "[scale.{}]")]
        tables += [(("workload", i, "scale"), b.get("scale"), f"[workload.scale.{{}}] of workload block {i + 1}")
                   for i, b in enumerate(blocks)]
        for path, top, where in tables:
            for s, table in (top.items() if isinstance(top, dict) else ()):
                if not isinstance(table, dict):
                    continue
                for key in table:
                    if key not in SCALE_KEYS:
                        hint = f" (parameter overrides go in [scale.{s}.params])" if key in params else ""
                        self.error(path + (s, key), f"unknown key {key!r} in {where.format(s)}; valid keys: "
                                   f"{choices(SCALE_KEYS)}{hint}")
                self.positive(table, "repetitions", path + (s,), "int")
                self.positive(table, "timeout_s", path + (s,), "number")
                overrides = self.typed(table, "params", path + (s,), "table", {})
                if path != ("scale",) or not known:
                    continue
                for key in overrides:
                    if key not in params:
                        listed = "; ".join(f"{w}: {', '.join(ps)}" for w, ps in known.items())
                        self.error(path + (s, "params", key), f"unknown parameter {key!r} in [scale.{s}.params]: "
                                   f"not a parameter of this spec's workloads ({listed})")

    # one [[workload]] block
    def block(self, raw: dict, block: dict, i: int, scale: str | None) -> list[Cell]:
        path = ("workload", i)
        where = f"workload block {i + 1}"
        self.unknown_keys(block, BLOCK_KEYS, path, where)
        wname = self.typed(block, "name", path, "str")
        if "name" not in block:
            self.error(path, f"{where}: missing key 'name' (the workload; valid workloads: {choices(sorted(WORKLOADS))})")
        if wname is None:
            self.matrix_incomplete = True
            return []
        if wname not in WORKLOADS:
            self.matrix_incomplete = True
            self.error(path + ("name",), f"unknown workload {wname!r}{did_you_mean(wname, WORKLOADS)}; valid workloads: {choices(sorted(WORKLOADS))}")
            return []
        w = WORKLOADS[wname]
        def scale_table(owner: dict, path: tuple) -> tuple[dict, tuple]:
            t = owner.get("scale") if scale else None
            t = t.get(scale) if isinstance(t, dict) else None
            return (t if isinstance(t, dict) else {}), path + ("scale", scale)

        scale_top, sp_top = scale_table(raw, ())
        scale_blk, sp_blk = scale_table(block, path)
        for key in scale_blk.get("params", {}) if isinstance(scale_blk.get("params"), dict) else ():
            if key not in {p.name for p in w.params}:
                self.error(sp_blk + ("params", key), f"unknown {wname} parameter {key!r} in scale {scale!r} of "
                           f"{where}; valid {wname} parameters: {choices(p.name for p in w.params)}")

        def setting(key, kind, default, check):
            for table, p in ((scale_blk, sp_blk), (scale_top, sp_top), (block, path), (raw, ())):
                if key in table:
                    return check(table, key, p, kind, default)
            return default

        reps = setting("repetitions", "int", 1, self.positive)
        timeout = setting("timeout_s", "number", None, self.positive)
        on_unavailable = (self.one_of(block, "on_unavailable", path, ON_UNAVAILABLE, "fail") if "on_unavailable" in block
                          else self.one_of(raw, "on_unavailable", (), ON_UNAVAILABLE, "fail"))
        tags = tuple(self.typed(raw, "tags", (), "strings", []) + self.typed(block, "tags", path, "strings", []))

        bad = len(self.problems)
        axes: list[_Axis] = []
        if "variants" not in block:
            self.error(path, f"{where}: missing key 'variants' (valid {wname} variants: {choices(w.variants)})")
        else:
            axes.append(self.axis(block["variants"], path + ("variants",), "variant", "variant",
                                  lambda v: _member(v, w.variants, f"{wname} variant")))
        runtimes_raw = block.get("runtime", DEFAULT_RUNTIME)
        rt_axis = self.axis(runtimes_raw, path + ("runtime",), "runtime", "runtime",
                            lambda v: _member(v, sorted(RUNTIMES), "runtime"))
        axes.append(rt_axis)
        runtimes = [parsed for _, parsed, _ in rt_axis.values]

        params = dict(self.typed(block, "params", path, "table", {}))
        param_paths = {k: path + ("params", k) for k in params}
        variants = [parsed for _, parsed, _ in axes[0].values] if axes and axes[0].kind == "variant" else []
        for table, p in ((scale_top, sp_top), (scale_blk, sp_blk)):  # the block's scale wins over the spec's
            overrides = table.get("params")
            for key, value in (overrides.items() if isinstance(overrides, dict) else ()):
                if not any(o.name == key for o in w.params):
                    continue
                # A spec-wide override reaches every block whose workload has the parameter, except that a
                # parameter only some variants take (msgq's `iterations` is pmap's, not fan_in's) reaches
                # only blocks that set it or whose every variant takes it.
                specific = key in {k for d in w.variant_defaults.values() for k in d} and all(
                    o.default is None for o in w.params if o.name == key)
                if table is scale_top and specific and key not in params and not (
                        variants and all(key in w.defaults(v) for v in variants)):
                    continue
                params[key], param_paths[key] = value, p + ("params", key)
                self.scale_used.add(key)
        for key, value in params.items():
            try:
                option = w.param(key)
            except UsageError as e:
                self.error(param_paths[key], str(e))
                continue
            axes.append(self.axis(value, param_paths[key], key, "param", lambda v, o=option: o.value(v)))

        settings = dict(self.typed(block, "settings", path, "table", {}))
        setting_paths = {k: path + ("settings", k) for k in settings}
        if "target" in settings:
            self.error(path + ("settings", "target"), "target is chosen with `target = ...` in the block or at "
                       "the top of the spec (or --target), not in [workload.settings]")
            settings.pop("target")
        chosen = self.target_override if self.target_override is not None else \
            block.get("target", raw.get("target"))
        if chosen is not None:
            settings["target"] = chosen
            setting_paths["target"] = (path + ("target",) if "target" in block else ("target",))
        for key, value in settings.items():
            sp = setting_paths[key]
            if key not in SETTINGS:
                self.error(sp, f"unknown setting {key!r}{did_you_mean(key, SETTINGS)}; valid settings"
                           + (f" for runtime {'/'.join(runtimes)}: {choices(_accepted(runtimes))}" if runtimes
                              else f": {choices(sorted(SETTINGS))}"))
                continue
            s = SETTINGS[key]
            refusing = [rt for rt in runtimes if s.scope != "system" and key not in RUNTIMES[rt].settings]
            if refusing:
                able = sorted(n for n, r in RUNTIMES.items() if key in r.settings)
                self.error(sp, f"setting {key!r} is not understood by runtime {', '.join(refusing)} "
                           f"(runtimes that take it: {choices(able) or 'none'}; valid settings for "
                           f"{refusing[0]}: {choices(_accepted(refusing[:1]))}); put such runs in a block of their own")
                continue
            axes.append(self.axis(value, sp, key, "setting", lambda v, s=s: s.value(v)))
            self.clamped(s, axes[-1])

        excludes = self.excludes(block, path, axes, w)
        self.block_axes[i] = axes
        if len(self.problems) > bad:
            self.matrix_incomplete = True
            return []  # values are wrong: combinations would only repeat the same problems

        cells: list[Cell] = []
        used = [False] * len(excludes)
        for combo in itertools.product(*(a.values for a in axes)):
            values = {a.name: v for a, v in zip(axes, combo)}
            hit = [j for j, rule in enumerate(excludes) if all(values[k][1] in vs for k, vs in rule.items())]
            for j in hit:
                used[j] = True
            if hit:
                continue
            ps = {a.name: values[a.name][0] for a in axes if a.kind == "param"}
            ss = {a.name: values[a.name][0] for a in axes if a.kind == "setting"}
            try:
                req = build_request(wname, values["variant"][1], values["runtime"][1], ps, ss, tags)
                _prepare(req)
            except UsageError as e:
                msg = str(e)
                if "cannot run" in msg:
                    msg += " (exclude the combination: [[workload.exclude]] with variant and runtime)"
                self.error(values["runtime"][2], msg)
                continue
            cells.append(Cell(cell_key(req), i, req, reps, timeout, on_unavailable, self.loc.line(path)))
        for j, rule in enumerate(excludes):
            if not used[j]:
                self.warn(path + ("exclude", j), f"exclude rule {j + 1} of {where} matches no combination")
        if not cells and len(self.problems) == bad:
            self.error(path, f"{where}: every combination is excluded; the block has no runs")
        return cells

    def axis(self, value: Any, path: tuple, name: str, kind: str, parse) -> _Axis:
        key = path[-1]  # as written in the spec ("variants" for the variant axis)
        if isinstance(value, dict) and self.tuning and kind in ("setting", "param"):
            knob_range, ends = check_range(self, value, path, key, parse)
            return _Axis(name, kind, ends, path, knob_range)
        raw_values = value if isinstance(value, list) else [value]
        paths = [path + (j,) for j in range(len(raw_values))] if isinstance(value, list) else [path]
        if not raw_values:
            self.error(path, f"{key} is an empty list: a matrix axis needs at least one value")
        out, seen = [], []
        for raw, p in zip(raw_values, paths):
            if isinstance(raw, dict):
                self.error(p, f"invalid value for {key}: a table ({raw!r}); give a value or a list of values"
                           + (" (a range table { min, max } is a tune axis: add a [tune] table and use rtscope tune)"
                              if isinstance(value, dict) and kind in ("setting", "param") else ""))
                continue
            try:
                parsed = parse(raw)
            except UsageError as e:
                self.error(p, str(e))
                continue
            if parsed in seen:
                self.error(p, f"{key} value {raw!r} is listed twice")
                continue
            seen.append(parsed)
            out.append((raw, parsed, p))
        return _Axis(name, kind, out, path)

    def clamped(self, setting, axis: _Axis) -> None:
        """A warning for each value the runtime will not put in force as asked (known before running)."""
        from ...analysis.select import setting_text
        if setting.clamped is None or axis.range is not None:
            return
        for _, parsed, p in axis.values:
            ran = setting.clamped(parsed)
            if ran is not None:
                self.warn(p, f"{setting.name} {parsed} is beyond the runtime's limits: its runs will have {ran} in "
                          f"force, shown as {setting_text(setting.name, parsed, {setting.name: ran})}")

    def excludes(self, block: dict, path: tuple, axes: list[_Axis], w) -> list[dict[str, list]]:
        if "exclude" not in block:
            return []
        rules = block["exclude"]
        rules = [rules] if isinstance(rules, dict) else rules
        if not isinstance(rules, list):
            self.error(path + ("exclude",), f"exclude must be a list of tables ([[workload.exclude]]), "
                       f"not {_kind(rules)}")
            return []
        by_name = {a.name: a for a in axes}
        out = []
        for j, rule in enumerate(rules):
            rp = path + ("exclude", j)
            if not isinstance(rule, dict) or not rule:
                self.error(rp, "an exclude rule must be a non-empty table of axis = value(s), "
                           "e.g. { variant = \"sleep\", runtime = \"beam\" }")
                continue
            parsed_rule = {}
            for key, value in rule.items():
                key_name = "variant" if key == "variants" else key
                if key_name not in by_name:
                    self.error(rp + (key,), f"exclude key {key!r} is not a matrix axis of this block; "
                               f"axes: {choices(by_name)}")
                    continue
                parse = _axis_parser(by_name[key_name], w)
                vs = []
                for raw in value if isinstance(value, list) else [value]:
                    try:
                        vs.append(parse(raw))
                    except UsageError as e:
                        self.error(rp + (key,), f"exclude: {e}")
                parsed_rule[key_name] = vs
            out.append(parsed_rule)
        return out

    def duplicates(self, cells: list[Cell]) -> None:
        first: dict[str, Cell] = {}
        for c in cells:
            if c.key in first and first[c.key].block != c.block:
                self.error(("workload", c.block), f"workload block {c.block + 1} repeats configuration {c.key} of "
                           f"block {first[c.key].block + 1} (line {first[c.key].line}); give each configuration "
                           "once and use repetitions")
            first.setdefault(c.key, c)


def _member(value: Any, valid, kind: str) -> str:
    if not isinstance(value, str) or value not in valid:
        raise UsageError(f"unknown {kind} {value!r}; valid {kind.split()[-1]}s: {choices(valid)}")
    return value


def _axis_parser(axis: _Axis, w):
    if axis.kind == "variant":
        return lambda v: _member(v, w.variants, f"{w.name} variant")
    if axis.kind == "runtime":
        return lambda v: _member(v, sorted(RUNTIMES), "runtime")
    if axis.kind == "param":
        return w.param(axis.name).value
    return SETTINGS[axis.name].value


def _prepare(req: RunRequest) -> None:
    """The runtime's own checks beyond the registries (cross-parameter rules). Only usage errors count
    here: a runtime that is not installed is a question for the machine that runs the spec, not the spec."""
    try:
        RUNTIMES[req.runtime].prepare(req)
    except UsageError:
        raise
    except RtscopeError:
        pass


def _accepted(runtimes: list[str]) -> list[str]:
    probe = sorted({n for rt in runtimes if rt in RUNTIMES for n in RUNTIMES[rt].settings})
    return probe + sorted(system_settings())
