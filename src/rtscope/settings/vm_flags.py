"""Erlang VM flags a run may ask for (setting `vm_flags`): the allowlist shared with the BEAM harness
(beam/priv/vm_flags.json) and the parser of a setting's value, with the same rules as RtScope.VmFlags."""

from __future__ import annotations

import json
import re
from functools import lru_cache
from typing import Any

from .. import paths
from ..errors import RtscopeError


@lru_cache(maxsize=1)
def vm_flag_allowlist() -> dict[str, dict]:
    path = paths.shipped("beam/vm_flags.json")
    try:
        data = json.loads(path.read_text())
    except (OSError, ValueError) as e:
        raise RtscopeError(f"cannot read the VM flag allowlist {path}: {e}") from None
    return {f["flag"]: f for f in data["flags"]}


def _describe(spec: dict) -> str:
    if "values" in spec:
        return f"valid values are {', '.join(spec['values'])}"
    return f"the value must match {spec['pattern']} ({spec['doc']})"


def parse_vm_flags(raw: Any) -> str:
    """'+sbwt none  +sbt db' -> '+sbwt none +sbt db'; ValueError naming the bad flag and the valid ones.
    The same rules as RtScope.VmFlags.parse/1: one value per flag, as a separate word, no repeats."""
    if not isinstance(raw, str):
        raise ValueError("not a string of VM flags")
    allow = vm_flag_allowlist()
    words, pairs, seen = raw.split(), [], set()
    i = 0
    while i < len(words):
        flag = words[i]
        if flag not in allow:
            raise ValueError(f"unknown VM flag {flag!r}; valid flags: {', '.join(allow)}")
        spec = allow[flag]
        if i + 1 >= len(words) or words[i + 1].startswith("+"):
            raise ValueError(f"VM flag {flag} needs a value: {_describe(spec)}")
        value = words[i + 1]
        ok = value in spec["values"] if "values" in spec else re.fullmatch(spec["pattern"], value) is not None
        if not ok:
            raise ValueError(f"invalid value {value!r} for VM flag {flag}: {_describe(spec)}")
        if flag in seen:
            raise ValueError(f"VM flag {flag} given twice")
        seen.add(flag)
        pairs.append(f"{flag} {value}")
        i += 2
    return " ".join(pairs)
