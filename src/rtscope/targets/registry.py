"""Defined targets: `[targets.NAME]` tables (a spec's, or $RTSCOPE_TARGETS's), URLs, and the built-in `local`.

    [targets.pi3]
    url = "ssh://root@192.168.1.50:22"
    identity = "~/.ssh/id_ed25519"      # optional: agent / default keys otherwise
    known_hosts = "~/.ssh/known_hosts"  # optional; host keys are verified, never accepted blindly
    workdir = "/var/tmp/rtscope"         # optional
    session = false                      # optional: a channel per command instead of the session agent
    keepalive_s = 10                     # optional: seconds between keepalives
    silent_after_s = 30                  # optional: a board silent this long is hung (its connection closed)
    description = "Raspberry Pi 3B, Raspberry Pi OS, PREEMPT_RT 6.6"

A fleet names several of them (`rtscope monitor --target lab` watches every board of it):

    [fleets]
    lab = ["pi3", "bbb", "imx8"]

A definition is only data (definition.py); `make()` builds a fresh Target object from it
(one per experiment, opened once and reused by every run on it).
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from typing import Any, Callable

from ..errors import UsageError, choices
from ..fileio import read_toml_table
from .base import Target, parse_url
from .definition import SECRET_LINE, SECRET_SHOWN, TargetDefinition, redact_table
from .local import LOCAL, LocalTarget

FILE_VAR = "RTSCOPE_TARGETS"  # a TOML file with a [targets] table, read on first use
SYSFS_ROOT_VAR = "RTSCOPE_SYSFS_ROOT"  # the local target's /proc and /sys root (a fake tree in tests)
NAME_RE = re.compile(r"^[A-Za-z0-9_.-]+$")
COMMON_KEYS = ("kind", "url", "description", "workdir", "sysfs_root")
SSH_KEYS = ("identity", "known_hosts")
SESSION_KEY = "session"  # ssh and labgrid: false for a channel per command instead of the session agent (ssh_session)
BOUND_KEYS = ("keepalive_s", "silent_after_s")  # ssh: seconds between keepalives, of silence before a board is hung
COOKIE_KEYS = ("cookie", "cookie_file")


@dataclass(frozen=True)
class Kind:
    name: str
    help: str
    keys: tuple[str, ...]                       # keys its table takes besides COMMON_KEYS
    factory: Callable[[TargetDefinition], Target]
    schemes: tuple[str, ...] = ()               # URL schemes that select it
    check: Callable[[TargetDefinition], None] | None = None  # the table's values (UsageError), at definition


def _local(d: TargetDefinition) -> Target:
    return LocalTarget(d.name, d.description or "this machine",
                       sysfs_root=d.options.get("sysfs_root") or os.environ.get(SYSFS_ROOT_VAR) or "/",
                       workdir=d.options.get("workdir"))


def _ssh(d: TargetDefinition) -> Target:
    from .ssh import SshTarget  # paramiko (and its cryptography) is loaded only for remote targets
    o = d.options
    return SshTarget(d.name, d.url, identity=o.get("identity"), known_hosts=o.get("known_hosts"),
                     workdir=o.get("workdir"), description=d.description, sysfs_root=o.get("sysfs_root"),
                     session=o.get(SESSION_KEY, True), keepalive_s=o.get("keepalive_s"),
                     silent_after_s=o.get("silent_after_s"))


def _qemu(d: TargetDefinition) -> Target:
    from .qemu import QemuTarget  # the VM machinery is loaded only for VM targets
    return QemuTarget(d)


def _check_qemu(d: TargetDefinition) -> None:
    from .qemu import check_table
    check_table(d)


def _labgrid(d: TargetDefinition) -> Target:
    from .labgrid import LabgridTarget
    return LabgridTarget(d)


def _check_labgrid(d: TargetDefinition) -> None:
    from .labgrid import check_table
    check_table(d)


def _erlang(d: TargetDefinition) -> Target:
    from .beam_node import ErlangNodeTarget, read_cookie
    o = d.options
    return ErlangNodeTarget(d.name, d.url, cookie=read_cookie(o, f"[targets.{d.name}]"), workdir=o.get("workdir"),
                            description=d.description, sysfs_root=o.get("sysfs_root"))


def _check_erlang(d: TargetDefinition) -> None:
    from .beam_node import parse_node_url
    if not d.url:
        raise UsageError(f"[targets.{d.name}]: an erlang target needs url = \"erlang://NAME@HOST\"")
    parse_node_url(d.url)


def _nerves_ssh(d: TargetDefinition) -> Target:
    from .nerves_ssh import NervesSshTarget
    o = d.options
    return NervesSshTarget(d.name, d.url, identity=o.get("identity"), known_hosts=o.get("known_hosts"),
                           workdir=o.get("workdir"), description=d.description, sysfs_root=o.get("sysfs_root"))


def _check_nerves_ssh(d: TargetDefinition) -> None:
    from .nerves_ssh import parse_nerves_url
    if not d.url:
        raise UsageError(f"[targets.{d.name}]: a nerves_ssh target needs url = \"nerves+ssh://HOST:PORT\"")
    parse_nerves_url(d.url)


KINDS: dict[str, Kind] = {
    "local": Kind("local", "this machine (the default)", (), _local),
    "ssh": Kind("ssh", "a board or host over SSH", (*SSH_KEYS, SESSION_KEY, *BOUND_KEYS), _ssh, ("ssh",)),
    "qemu": Kind("qemu", "a VM rtscope boots with QEMU: a kernel of your choice, x86_64 or a virtual Raspberry Pi 3",
                 ("arch", "kernel", "cpus", "memory", "accel", "pin", "kernel_args", "disk", "packages"), _qemu,
                 check=_check_qemu),
    "labgrid": Kind("labgrid", "a board of a labgrid place, reached through its NetworkService with SSH",
                    ("coordinator", "power_cycle", *SSH_KEYS, SESSION_KEY), _labgrid, ("labgrid",), check=_check_labgrid),
    "erlang": Kind("erlang", "a running BEAM node (a Nerves device, an Elixir service) over Erlang distribution",
                   COOKIE_KEYS, _erlang, ("erlang",), check=_check_erlang),
    "nerves_ssh": Kind("nerves_ssh", "a running BEAM node through its nerves_ssh daemon (Elixir exec, SFTP)",
                       SSH_KEYS, _nerves_ssh, ("nerves+ssh",), check=_check_nerves_ssh),
}

TARGETS: dict[str, TargetDefinition] = {LOCAL: TargetDefinition(LOCAL, "local", description="this machine")}
FLEETS: dict[str, tuple[str, ...]] = {}  # [fleets] NAME = ["target", ...]: several boards under one name


def redact_spec(text: str, raw: dict) -> tuple[str, dict]:
    """A spec's text and parsed tables without the secrets of its [targets] tables, as stored."""
    tables = raw.get("targets")
    if isinstance(tables, dict):
        raw = {**raw, "targets": {n: redact_table(t) if isinstance(t, dict) else t for n, t in tables.items()}}
    return SECRET_LINE.sub(lambda m: m.group(1) + f'"{SECRET_SHOWN}"', text), raw


def make(definition: TargetDefinition) -> Target:
    """A fresh Target object for a definition (one per experiment, opened once and reused by every run on it)."""
    return KINDS[definition.kind].factory(definition)


def register_kind(kind: Kind) -> Kind:
    KINDS[kind.name] = kind
    return kind


def _kind_of_url(url: str, where: str) -> str:
    scheme = url.partition("://")[0] if "://" in url else ""
    for k in KINDS.values():
        if scheme in k.schemes:
            return k.name
    schemes = sorted(s for k in KINDS.values() for s in k.schemes)
    raise UsageError(f"{where}: url {url!r} has no known scheme; valid: {choices(s + '://...' for s in schemes)}")


def define(name: str, table: dict, where: str = "", *, replace: bool = False) -> TargetDefinition:
    """Validate and register one target definition; `target = NAME` then selects it."""
    place = where or f"[targets.{name}]"
    if not isinstance(name, str) or not NAME_RE.match(name):
        raise UsageError(f"{place}: invalid target name {name!r}: use letters, digits, '_', '.', '-'")
    if name == LOCAL:
        raise UsageError(f"{place}: target name {LOCAL!r} is built in (this machine); choose another name")
    if not isinstance(table, dict):
        raise UsageError(f"{place}: must be a table, e.g. url = \"ssh://root@192.168.1.50\"")
    url = table.get("url")
    if url is not None and not isinstance(url, str):
        raise UsageError(f"{place}: url must be a string")
    kind_name = table.get("kind") or (_kind_of_url(url, place) if url else None)
    if kind_name is None:
        raise UsageError(f"{place}: give url = \"ssh://user@host:port\" (or kind = one of {choices(KINDS)})")
    if kind_name not in KINDS:
        raise UsageError(f"{place}: unknown target kind {kind_name!r}; valid kinds: {choices(KINDS)}")
    kind = KINDS[kind_name]
    valid = COMMON_KEYS + kind.keys
    extra = sorted(set(table) - set(valid))
    if extra:
        raise UsageError(f"{place}: unknown key {extra[0]!r} for a {kind_name} target; valid keys: "
                         f"{choices(valid)}")
    for key in ("workdir", "sysfs_root"):
        if key in table and (not isinstance(table[key], str) or not table[key].startswith("/")):
            raise UsageError(f"{place}: {key} must be an absolute path on the target, got {table[key]!r}")
    for key in (*SSH_KEYS, *COOKIE_KEYS, "description", "kernel", "memory", "arch", "accel", "kernel_args", "coordinator"):
        if key in table and not isinstance(table[key], str):
            raise UsageError(f"{place}: {key} must be a string")
    if SESSION_KEY in table and not isinstance(table[SESSION_KEY], bool):
        raise UsageError(f"{place}: {SESSION_KEY} must be true or false, got {table[SESSION_KEY]!r}")
    for key in BOUND_KEYS:
        value = table.get(key)
        if key in table and (isinstance(value, bool) or not isinstance(value, (int, float)) or value <= 0):
            raise UsageError(f"{place}: {key} must be a number of seconds > 0, got {value!r}")
    if kind_name == "labgrid" and url and not url.startswith("labgrid://"):
        raise UsageError(f"{place}: a labgrid target's url is labgrid://PLACE, got {url!r}")
    if kind_name == "ssh":
        if not url:
            raise UsageError(f"{place}: an ssh target needs url = \"ssh://user@host:port\"")
        try:
            parse_url(url)
        except UsageError as e:
            raise UsageError(f"{place}: {e}") from None
    options = {k: v for k, v in table.items() if k not in ("kind", "url", "description")}
    d = TargetDefinition(name, kind_name, url, str(table.get("description", "")), options)
    if kind.check is not None:
        try:
            kind.check(d)
        except UsageError as e:
            raise UsageError(f"{place}: {str(e).split(']: ', 1)[-1]}") from None
    old = TARGETS.get(name)
    if old is not None and old != d and not replace:
        raise UsageError(f"{place}: target {name!r} is defined twice with different definitions")
    TARGETS[name] = d
    return d


def load_table(table: Any, source: str = "<spec>", *, replace: bool = False) -> list[TargetDefinition]:
    if not isinstance(table, dict):
        raise UsageError(f"{source}: [targets] must be a table of tables, e.g. "
                         "[targets.pi3] url = \"ssh://root@192.168.1.50\"")
    return [define(name, body, f"{source}, [targets.{name}]", replace=replace) for name, body in table.items()]


def load_file(path: str | os.PathLike, *, replace: bool = False) -> list[TargetDefinition]:
    """Targets from a TOML file with a [targets] table ($RTSCOPE_TARGETS), and its [fleets] when it has them."""
    defined = load_table(read_toml_table(path, "targets", "targets"), str(path), replace=replace)
    load_fleets(read_toml_table(path, "fleets", "targets", optional=True), str(path))
    return defined


def load_fleets(table: Any, source: str) -> None:
    """`[fleets] NAME = ["target", ...]`: each member a defined target (or a URL), each fleet named once."""
    if table is None:
        return
    if not isinstance(table, dict):
        raise UsageError(f'{source}: [fleets] must be a table of lists, e.g. lab = ["pi3", "bbb"]')
    for name, members in table.items():
        place = f"{source}, [fleets] {name}"
        if not NAME_RE.match(name):
            raise UsageError(f"{place}: invalid fleet name {name!r}: use letters, digits, '_', '.', '-'")
        if name in TARGETS:
            raise UsageError(f"{place}: {name!r} is a target's name too; give the fleet another name")
        if not isinstance(members, list) or not members or not all(isinstance(m, str) for m in members):
            raise UsageError(f'{place}: a fleet is a non-empty list of target names, e.g. {name} = ["pi3", "bbb"]')
        for m in members:
            if m not in TARGETS and "://" not in m:
                raise UsageError(f"{place}: unknown target {m!r}; defined: {choices(sorted(TARGETS))}")
        if len(set(members)) != len(members):
            raise UsageError(f"{place}: a target is listed twice")
        FLEETS[name] = tuple(members)


def expand(names: list[str]) -> list[str]:
    """Target names with every fleet replaced by its members, each once, in the order given."""
    load_env_file()
    out: list[str] = []
    for n in names:
        for m in FLEETS.get(n, (n,)):
            if m not in out:
                out.append(m)
    return out


_file_loaded: str | None = None


def load_env_file() -> None:
    """The targets of $RTSCOPE_TARGETS, once per value of the variable."""
    global _file_loaded
    path = os.environ.get(FILE_VAR)
    if path and path != _file_loaded:
        _file_loaded = path
        load_file(path, replace=True)


def resolve(value: Any) -> TargetDefinition:
    """The definition a `target` value names: a defined name, or a URL (defined on the fly, named by it)."""
    text = str(value).strip()
    load_env_file()
    if text in TARGETS:
        return TARGETS[text]
    if "://" in text:
        return _define_url(text)
    raise ValueError(f"unknown target {text!r}; defined: {choices(sorted(TARGETS))}; or a URL such as "
                     "ssh://user@host:port")


def _define_url(url: str) -> TargetDefinition:
    kind = _kind_of_url(url, f"target {url!r}")
    if kind == "ssh":
        parse_url(url)
    if KINDS[kind].check is not None:
        KINDS[kind].check(TargetDefinition(url, kind, url))
    d = TargetDefinition(url, kind, url, f"{url} (no table)")
    TARGETS.setdefault(url, d)
    return TARGETS[url]


def parse_target(value: Any) -> str:
    """Setting `target`: the name of a defined target (or a URL, which is its own name)."""
    try:
        return resolve(value).name
    except UsageError as e:
        raise ValueError(str(e)) from None
