"""Runtime `beam`: the BEAM harness (beam/, an Elixir Mix project) in a fresh Erlang VM per run.

The VM is started the way docs/beam.md describes:

    env -u ERL_FLAGS -u ERL_AFLAGS -u ERL_ZFLAGS -u ELIXIR_ERL_OPTIONS ERL_CRASH_DUMP_SECONDS=0 \
      elixir [--erl VM_FLAGS] -pa beam/_build/prod/lib/rtscope/ebin -e 'RtScope.CLI.main(System.argv())' -- \
      WORKLOAD VARIANT [--param value ...] [spawn options] [--vm-flags VM_FLAGS] --output RUN.rts

The VM flags come from setting `vm_flags` only (the user's ERL_FLAGS and friends are cleared so a run
records what it was asked for), validated against beam/priv/vm_flags.json before any VM starts; the
harness checks again that they are in force and records them. A VM that dies (out of memory, a bad
flag) exits non-zero with its message on stderr, which the runner reports; nothing is stored.

Settings of this runtime: the measuring process's spawn options (fullsweep_after, min_heap_size,
priority, message_queue_data), vm_flags, and model for workload tasks. They and workload msgq (which
only this runtime runs) are registered here, with the adapter that understands them; so are the three
BEAM variants of workload timer.
"""

from __future__ import annotations

import dataclasses
import json
import os
import re
import shutil
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Any

from .. import paths
from ..errors import RtscopeError, UsageError, choices
from ..options import Option, integer, one_of
from ..settings import SETTINGS, Setting
from ..settings import register as register_setting
from ..workloads import WORKLOADS, Workload, check_task_request
from ..workloads import register as register_workload
from ..targets import Target
from .base import RunRequest, Runtime, Site, register

BUILD_HINT = "cd beam && MIX_ENV=prod mix compile (or: make beam)"
CLEARED_ENV = ("ERL_FLAGS", "ERL_AFLAGS", "ERL_ZFLAGS", "ELIXIR_ERL_OPTIONS")
MAX_SMALL = (1 << 59) - 1  # the VM's largest small integer (64-bit): its limit for spawn option values

SPAWN_SETTINGS = ("fullsweep_after", "min_heap_size", "priority", "message_queue_data")
BEAM_TIMER_VARIANTS = ("send_after", "receive_after", "timer_sleep")


# --- where things are ---------------------------------------------------------------------------------

def ebin() -> Path:
    """The compiled harness: $RTSCOPE_BEAM_EBIN, else the checkout's prod build."""
    if os.environ.get("RTSCOPE_BEAM_EBIN"):
        path = Path(os.environ["RTSCOPE_BEAM_EBIN"])
        if not (path / "rtscope.app").is_file():
            raise RtscopeError(f"RTSCOPE_BEAM_EBIN={path} holds no rtscope.app (a compiled BEAM harness)")
        return path
    path = paths.repo_file("beam", "_build", "prod", "lib", "rtscope", "ebin")
    if not (path / "rtscope.app").is_file():
        raise RtscopeError(f"the BEAM harness is not built: run `{BUILD_HINT}`")
    return path


def elixir() -> str:
    found = shutil.which("elixir")
    if found is None:
        raise RtscopeError("elixir is not installed: sudo apt-get install -y elixir erlang-dev")
    return found


# --- VM flags: the allowlist shared with the harness (beam/priv/vm_flags.json) --------------------------

@lru_cache(maxsize=1)
def vm_flag_allowlist() -> dict[str, dict]:
    path = paths.repo_file("beam", "priv", "vm_flags.json")
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


# --- registry entries of this runtime -------------------------------------------------------------------

BEAM_SETTINGS = (
    Setting("fullsweep_after", integer(0, MAX_SMALL), "an integer >= 0 (minor collections)",
            "beam: full-sweep GC after this many minor collections (VM default 65535)"),
    Setting("min_heap_size", integer(0, MAX_SMALL), "an integer >= 0 (words)",
            "beam: minimum heap of the measuring process; the VM rounds up to its next heap size (default 233)"),
    Setting("priority", one_of("low", "normal", "high", "max"), "one of low, normal, high, max",
            "beam: process priority of the measuring process"),
    Setting("message_queue_data", one_of("on_heap", "off_heap"), "on_heap or off_heap",
            "beam: where the measuring/receiving process keeps its message queue"),
    Setting("vm_flags", parse_vm_flags,
            "Erlang VM flags from beam/priv/vm_flags.json, e.g. '+sbwt none +hmqd off_heap'",
            "beam: flags the VM is started with (elixir --erl); see docs/beam.md"),
)

MSGQ = Workload(
    name="msgq",
    help="message passing with the receiver's queue on_heap or off_heap (study 3): pmap = Task.async/await "
         "parallel map, fan_in = many senders, one busy receiver; runtime beam; see docs/beam.md",
    variants=("pmap", "fan_in"),
    params=(
        Option("elements", integer(1), "an integer >= 1", "pmap: list length (one task per element)"),
        Option("iterations", integer(1), "an integer >= 1",
               "pmap: recorded pmap calls (one more warms up); fan_in: rounds, each sender sends `messages` per round"),
        Option("senders", integer(1), "an integer >= 1", "fan_in: sending processes"),
        Option("messages", integer(1), "an integer >= 1", "fan_in: messages per sender"),
        Option("message_words", integer(0), "an integer >= 0", "fan_in: payload words per message"),
        Option("work", integer(0), "an integer >= 0", "fan_in: receiver work per message (sum 1..work)"),
        Option("send_interval_ms", integer(0), "an integer >= 0", "fan_in: pause of a sender between messages"),
        Option("queue_sample_every", integer(1), "an integer >= 1",
               "fan_in: read the receiver's queue length and memory every N messages"),
    ),
    variant_defaults={
        "pmap": {"elements": 10_000, "iterations": 10},
        "fan_in": {"senders": 100, "messages": 100, "iterations": 1, "message_words": 16, "work": 1000,
                   "send_interval_ms": 0, "queue_sample_every": 100},
    },
)
MSGQ_PARAMS = {"pmap": ("elements", "iterations"),
               "fan_in": ("senders", "messages", "iterations", "message_words", "work", "send_interval_ms",
                          "queue_sample_every")}

for _s in BEAM_SETTINGS:
    if _s.name not in SETTINGS:
        register_setting(_s)
if "msgq" not in WORKLOADS:
    register_workload(MSGQ)
if "timer" in WORKLOADS and not set(BEAM_TIMER_VARIANTS) <= set(WORKLOADS["timer"].variants):
    _timer = WORKLOADS["timer"]
    register_workload(dataclasses.replace(_timer, variants=_timer.variants + tuple(
        v for v in BEAM_TIMER_VARIANTS if v not in _timer.variants)))


# --- the adapter --------------------------------------------------------------------------------------

def _flag(name: str) -> str:
    return "--" + name.replace("_", "-")


def _whole(value: Any, what: str) -> int:
    if float(value) != int(value):
        raise UsageError(f"runtime beam takes whole numbers for {what}, got {value}")
    return int(value)


def harness_args(req: RunRequest) -> list[str]:
    """The harness's argv after `--`, without --output (checked by prepare())."""
    p, s = req.params, req.settings
    argv = [req.workload, req.variant]
    if req.workload == "tasks":
        argv += ["--model", s["model"]]
        argv += [a for name, value in p.items() for a in (_flag(name), str(value))]
    elif req.workload == "exec":
        argv += ["--iterations", str(p["iterations"]), "--pause-ms", str(_whole(p["pause_ms"], "pause_ms"))]
        if "n" in p:
            argv += ["--n", str(p["n"])]
    elif req.workload == "timer":
        argv += ["--interval-ms", str(_whole(p["interval_us"] / 1000, "interval_us (whole ms, ERTS timers)")),
                 "--cycles", str(p.get("loops", 10_000))]
    elif req.workload == "msgq":
        argv += [a for name in MSGQ_PARAMS[req.variant] for a in (_flag(name), str(p[name]))]
    for name in SPAWN_SETTINGS:
        if name in s:
            argv += [_flag(name), str(s[name])]
    if s.get("vm_flags"):
        argv += ["--vm-flags", s["vm_flags"]]
    return argv


@dataclass
class Beam(Runtime):
    def unavailable(self, target: Target | None = None) -> str | None:
        try:
            if target is None or target.is_local:
                elixir()
            elif target.which("elixir") is None:
                return (f"elixir is not installed on target {target.name}: sudo apt-get install -y elixir "
                        "(the harness needs only elixir/erl there; rtscope copies its compiled modules)")
            ebin()
        except RtscopeError as e:
            return str(e)
        return None

    def prepare(self, req: RunRequest) -> None:
        p, s = req.params, req.settings
        if req.workload == "tasks":
            check_task_request(req, "beam")
            spawn = sorted(set(s) & set(SPAWN_SETTINGS))
            if spawn:
                raise UsageError(f"setting {spawn[0]} does not apply to tasks on runtime beam (it sets the "
                                 f"measuring process of exec, timer and msgq); tasks takes: model, vm_flags")
        elif "model" in s:
            raise UsageError("setting model applies to workload tasks only")
        if req.workload == "exec":
            _whole(p["pause_ms"], "pause_ms")
        if req.workload == "timer":
            unsupported = sorted({"duration_s", "threads", "histogram_us"} & set(p))
            if unsupported:
                raise UsageError(f"parameter {unsupported[0]} is not supported by runtime beam (one process, "
                                 "every wake-up kept); it takes interval_us and loops")
            if p["interval_us"] < 1000 or float(p["interval_us"]) % 1000:
                raise UsageError(f"runtime beam takes interval_us in whole ms (ERTS timers have ms resolution): "
                                 f"1000, 2000, ...; got {p['interval_us']}")
        if req.workload == "msgq":
            extra = sorted(set(p) - set(MSGQ_PARAMS[req.variant]))
            if extra:
                raise UsageError(f"parameter {extra[0]} does not apply to msgq {req.variant}; "
                                 f"its parameters: {choices(MSGQ_PARAMS[req.variant])}")
        harness_args(req)

    def command(self, req: RunRequest, out: str, site: Site) -> list[str]:
        env = ["env", *(a for name in CLEARED_ENV for a in ("-u", name)), "ERL_CRASH_DUMP_SECONDS=0"]
        vm = ["--erl", req.settings["vm_flags"]] if req.settings.get("vm_flags") else []
        exe = elixir() if site.target.is_local else "elixir"
        harness = site.tool("beam_ebin", lambda target: ebin(), tree=True)  # BEAM files run on any arch
        return [*env, exe, *vm, "-pa", harness, "-e", "RtScope.CLI.main(System.argv())", "--",
                *harness_args(req), "--output", out]

    def version(self, site: Site | None = None) -> str | None:
        try:
            app = (ebin() / "rtscope.app").read_text()
        except (OSError, RtscopeError):
            return None
        m = re.search(r'\{vsn,\s*"([^"]+)"\}', app)
        return f"rtscope-beam {m.group(1)}" if m else None


register(Beam(
    name="beam",
    help=f"BEAM harness in a fresh Erlang VM per run (build: {BUILD_HINT})",
    workloads={"exec": ("sum", "fib", "sleep", "nothing"), "timer": BEAM_TIMER_VARIANTS,
               "msgq": ("pmap", "fan_in"), "tasks": ("memory", "switch")},
    settings=(*SPAWN_SETTINGS, "vm_flags", "model"),
))
