"""Experiment specs (TOML): which runs to make.

A spec names an experiment and lists workload blocks. In a block, `variants`
and `runtime` may be lists, and each setting may be a list of values: they
expand as a Cartesian product into one run request per combination.

    name = "demo"

    [[workload]]
    name = "exec"
    variants = ["sum", "fib", "sleep"]
    runtime = "native"
    [workload.params]
    iterations = 300
    [workload.settings]
    rt_priority = [50, 90]
"""

from __future__ import annotations

import itertools
import tomllib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .errors import UsageError
from .runner import build_request
from .runtimes.base import RunRequest

TOP_KEYS = {"name", "description", "workload"}
BLOCK_KEYS = {"name", "variants", "runtime", "params", "settings", "tags"}


@dataclass
class Spec:
    name: str
    description: str
    requests: list[RunRequest] = field(default_factory=list)
    raw: dict[str, Any] = field(default_factory=dict)
    path: str | None = None


def _as_list(value: Any) -> list:
    return value if isinstance(value, list) else [value]


def _unknown(keys, allowed, where) -> None:
    extra = sorted(set(keys) - allowed)
    if extra:
        raise UsageError(f"unknown key {extra[0]!r} in {where}; valid keys: {', '.join(sorted(allowed))}")


def parse(text: str, source: str = "<spec>") -> Spec:
    try:
        raw = tomllib.loads(text)
    except tomllib.TOMLDecodeError as e:
        raise UsageError(f"{source}: not valid TOML: {e}") from None
    _unknown(raw, TOP_KEYS, source)
    blocks = raw.get("workload")
    if not isinstance(blocks, list) or not blocks:
        raise UsageError(f"{source}: no [[workload]] block; a spec needs at least one")
    spec = Spec(str(raw.get("name", Path(source).stem)), str(raw.get("description", "")), raw=raw, path=source)
    for i, block in enumerate(blocks, 1):
        where = f"{source}, workload block {i}"
        _unknown(block, BLOCK_KEYS, where)
        if "name" not in block:
            raise UsageError(f"{where}: missing key 'name' (the workload)")
        settings = block.get("settings", {})
        names = list(settings)
        for variant, runtime, *values in itertools.product(
                _as_list(block.get("variants", [])) or [None], _as_list(block.get("runtime", "native")),
                *(_as_list(settings[n]) for n in names)):
            if variant is None:
                raise UsageError(f"{where}: 'variants' is empty or missing")
            spec.requests.append(build_request(block["name"], variant, runtime, block.get("params", {}),
                                               dict(zip(names, values)), tuple(block.get("tags", [])), where))
    return spec


def load(path: str | Path) -> Spec:
    try:
        text = Path(path).read_text()
    except OSError as e:
        raise UsageError(f"cannot read spec {path}: {e.strerror}") from None
    return parse(text, str(path))
