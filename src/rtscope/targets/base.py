"""The target interface: where a run executes (labgrid's model: a small class that knows how it is reached).

A target runs commands (each in its own process group, with a timeout and a
kill that reaches every child), starts background processes (load
generators), moves files and answers the machine questions. Nothing else in
rtscope knows how a target is reached: runtimes, settings, the machine record
and deployment all go through these methods.
"""

from __future__ import annotations

import posixpath
import shlex
import threading
import time
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import ClassVar, Protocol
from urllib.parse import urlsplit

from .. import sysinfo
from ..errors import ProbeError, RtscopeError, UsageError
from ..sysinfo import ARCHES

OUTPUT_TAIL = 2000  # characters of a failed command's output kept in errors

# Commands a layer above asks every target to run as it connects (name -> argv), registered with at_open(): a
# kind that connects with a request of its own (an SSH target's first request to its session agent) runs them
# in it, so that they cost no round trip; the layer takes the answer with Target.opened() and runs the command
# itself when there is none (another kind, an older connection, a failure).
AT_OPEN: dict[str, list[str]] = {}


def at_open(name: str, argv: list[str]) -> None:
    """Run `argv` on every target as it connects, where that is free; its answer: Target.opened(name)."""
    AT_OPEN[name] = list(argv)

def parse_url(url: str) -> tuple[str | None, str, int]:
    """ssh://[user@]host[:port] -> (user, host, port)."""
    parts = urlsplit(url)
    if parts.scheme != "ssh" or not parts.hostname:
        raise UsageError(f"invalid SSH target url {url!r}: write ssh://[user@]host[:port], e.g. "
                         "ssh://root@192.168.1.50:22")
    try:
        port = parts.port or 22
    except ValueError:
        raise UsageError(f"invalid port in SSH target url {url!r}") from None
    if parts.path not in ("", "/") or parts.query or parts.fragment:
        raise UsageError(f"SSH target url {url!r} must not have a path, query or fragment")
    return parts.username, parts.hostname, port


class TargetError(RtscopeError):
    """The target cannot be reached or used; the message names the target."""


class TargetLost(TargetError):
    """The connection to the target ended under a command (a reboot, a power cut, the network): reconnect()
    may bring it back."""


class TargetSilent(TargetError):
    """The target stopped answering while its connection stays open (a hung board): the connection was closed;
    the message says for how long it was silent."""


class CommandTimedOut(ProbeError):
    """A command (a run's probe) did not finish within its deadline while the target answered: it was stopped."""


RECONNECT_FOR_S = 180.0  # default of --reconnect-for: how long a target that went away is tried again
RECONNECT_EVERY_S = 2.0  # between two attempts


@dataclass
class Completed:
    """A finished command: its exit status and output (bytes when asked for, else text)."""

    argv: list[str]
    returncode: int
    stdout: str | bytes
    stderr: str
    read_first: dict[str, str | None] | None = None  # run(read_first=...): those files, read just before it
    brought: dict[str, bytes | None] | None = None   # run(bring_back=...): those files' bytes after it (None: absent)

    def said(self) -> str:
        out = self.stderr.strip() or (self.stdout.strip() if isinstance(self.stdout, str) else "")
        return out[-OUTPUT_TAIL:] or "no output"


@dataclass
class ProbeRun:
    """What run_probe returns: the command's result, and the machine state read just before it started."""

    proc: Completed
    state: dict[str, str | None]  # the state_paths() files
    state_at: datetime            # when (this host's clock)


class Spawned(Protocol):
    """A background process group on a target (a load generator)."""

    argv: list[str]

    def running(self) -> bool: ...
    def exit_code(self) -> int | None: ...
    def members(self) -> int: ...        # live processes of its session (the generator and its workers)
    def stop(self) -> None: ...          # every process of the group, TERM then KILL; raise if any survives
    def log_tail(self, chars: int = 600) -> str: ...


@dataclass
class Target:
    """Base class of the target kinds. `name` is how specs and tables call it."""

    name: str
    description: str = ""
    workdir: str = "/var/tmp/rtscope"   # on the target: run directories and the deploy cache
    sysfs_root: str = "/"               # where /proc and /sys are read and written (a fake tree in tests)
    kind: str = "local"
    runtimes: ClassVar[tuple[str, ...] | None] = None  # the runtimes it can run; None: any
    facts: dict = field(default_factory=dict)  # extra machine-record facts of this kind (a VM's host side)
    deployed: dict = field(default_factory=dict)  # what deploy.py has placed there during this connection
    # The machine record as last read whole (snapshot()): what cannot change during a connection is taken from
    # it for each run, with the state read at that run (run_probe); a kind that reconnects clears it.
    record: dict | None = field(default=None, repr=False)
    # The answers of the AT_OPEN commands run as this connection was made (by name), until taken.
    answers: dict = field(default_factory=dict, repr=False)
    halted: threading.Event = field(default_factory=threading.Event, repr=False)  # interrupt(): no reconnecting

    # -- lifecycle
    def open(self) -> None:
        """Connect (or boot) once; idempotent."""

    def close(self) -> None:
        """Disconnect (or shut down); idempotent."""

    def interrupt(self) -> None:
        """From another thread: stop whatever runs on the target now (the fleet's Ctrl-C), a reconnect() too."""
        self.halted.set()

    boot_id: str | None = None  # the target's boot id as read at connection (None: this kind cannot tell)

    def reconnect(self, within_s: float) -> bool:
        """After TargetLost: connect again, tried every RECONNECT_EVERY_S until `within_s` has passed (then the
        last error, naming the target, is raised). True when the target came back from a reboot (a new boot id):
        what this connection had deployed or learnt is forgotten, and checked again on the target."""
        old = self.boot_id
        deadline = time.monotonic() + within_s
        while True:
            try:
                self.close()
            except RtscopeError:
                pass
            try:
                self.open()
                break
            except TargetError as e:
                if time.monotonic() + RECONNECT_EVERY_S > deadline:
                    raise TargetError(f"{e} (tried again for {within_s:g} s: --reconnect-for)") from None
                if self.halted.wait(RECONNECT_EVERY_S):
                    raise TargetError(f"{e} (no longer tried again: interrupted)") from None
        rebooted = old is not None and self.boot_id is not None and old != self.boot_id
        if rebooted:
            self.deployed.clear()  # the deploy cache is looked for again by content; the settings checked again
        return rebooted

    def __enter__(self) -> "Target":
        self.open()
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def cannot_run(self, runtime: str) -> str | None:
        """Why this target cannot run `runtime` at all (a BEAM node has no shell), else None."""
        if self.runtimes is None or runtime in self.runtimes:
            return None
        return f"target {self.name} ({self.kind}) runs runtime {', '.join(self.runtimes)} only, not {runtime}"

    def opened(self, name: str) -> "Completed | None":
        """The answer of the AT_OPEN command `name` run as this connection was made (once), else None."""
        return self.answers.pop(name, None)

    # -- commands
    def run(self, argv: list[str], *, timeout: float | None = None, stdin: bytes | None = None,
            cwd: str | None = None, binary: bool = False) -> Completed:
        raise NotImplementedError

    def spawn(self, argv: list[str], *, cwd: str, log: str) -> Spawned:
        raise NotImplementedError

    def check(self, argv: list[str], what: str, *, timeout: float | None = 120, stdin: bytes | None = None,
              binary: bool = False) -> Completed:
        """run(), raising TargetError naming the target and `what` when the command fails."""
        proc = self.run(argv, timeout=timeout, stdin=stdin, binary=binary)
        if proc.returncode != 0:
            raise TargetError(f"target {self.name}: {what} failed: `{shlex.join(argv)}` exited "
                              f"{proc.returncode}: {proc.said()}")
        return proc

    # -- files
    def put(self, local_path: str, remote_path: str, mode: int = 0o644) -> None:
        raise NotImplementedError

    def get(self, remote_path: str, local_path: str) -> None:
        raise NotImplementedError

    def read_files(self, paths: list[str]) -> dict[str, str | None]:
        """Text of each file (None when it cannot be read), in as few round trips as the kind allows."""
        raise NotImplementedError

    def write_file(self, path: str, text: str) -> None:
        """Write `text` to an existing file such as a sysfs attribute (no temp file, no rename)."""
        raise NotImplementedError

    def unwritable(self, paths: list[str]) -> list[str]:
        """Those of `paths` this connection may not write."""
        return self.run(["sh", "-c", 'for f; do test -w "$f" || echo "$f"; done', "sh", *paths],
                        timeout=60).stdout.split()

    def which(self, command: str) -> str | None:
        raise NotImplementedError

    def mkdtemp(self, prefix: str = "rtscope-run-", parent: str | None = None) -> str:
        raise NotImplementedError

    def remove_tree(self, path: str) -> None:
        raise NotImplementedError

    def free_bytes(self, path: str) -> int | None:
        raise NotImplementedError

    # -- machine questions
    def uname(self) -> dict[str, str]:
        """sysname, nodename, release, version, machine."""
        raise NotImplementedError

    def online_cpus(self) -> list[int]:
        """The CPUs online on the target ([0] when the kernel does not say)."""
        online = self.sys_path("sys/devices/system/cpu/online")
        return sysinfo.parse_cpu_list(self.read_files([online])[online]) or [0]

    @property
    def arch(self) -> str:
        machine = self.uname()["machine"]
        return ARCHES.get(machine, machine)

    def snapshot(self, probe_version: str | None = None) -> dict:
        """The machine record, read whole from the target (one or two round trips on a remote one)."""
        ahead = self.record_files()

        def read_many(rels: list[str]) -> dict[str, str | None]:
            where = self._machine_paths(rels)
            missing = [p for p in where.values() if p not in ahead]
            got = {**ahead, **(self.read_files(missing) if missing else {})}
            return {r: got.get(p) for r, p in where.items()}

        rec = sysinfo.record(read_many, self.uname(), probe_version)
        rec.update({"target": self.name, "target_kind": self.kind, **self.facts})
        if not self.is_local or self.name != "local":  # a target the user defined: say which, as they wrote it
            rec["target_description"] = self.description
        if not self.is_local:
            rec["python_version"] = None  # rtscope's Python runs on the host, not on the target
        self.record = rec
        return rec

    def record_files(self) -> dict[str, str | None]:
        """The machine record's files read in one go where the kind can (every CPU's governor found by a glob on
        the target: SshTarget), by path as read_files gives them; {}: snapshot() reads them in two batches."""
        return {}

    def _machine_paths(self, rels: list[str]) -> dict[str, str]:
        # Governors are read where the governor setting writes them (a fake tree in tests).
        return {r: self.sys_path(r) if "cpufreq" in r else "/" + r for r in rels}

    def state_paths(self) -> list[str]:
        """The files (as read_files takes them) of what can change between runs: load, CPUs online, governors."""
        if self.record is None:
            self.snapshot()
        return list(self._machine_paths(sysinfo.state_files(self.record)).values())

    def record_for_run(self, probe: ProbeRun, probe_version: str | None = None) -> dict:
        """The machine record of one run: what cannot change, read once per connection, with the state
        run_probe read just before the run. Read whole again when the CPUs online changed."""
        if self.record is not None:
            where = self._machine_paths(sysinfo.state_files(self.record))
            rec = sysinfo.with_state(self.record, {r: probe.state.get(p) for r, p in where.items()}, probe.state_at)
            if rec is not None:
                return {**rec, "probe_version": probe_version}
        return self.snapshot(probe_version)

    def run_probe(self, argv: list[str], *, timeout: float | None, cwd: str, outputs: list[str],
                  into: Path) -> ProbeRun:
        """Run a run's command in `cwd`: the machine state read just before it (for record_for_run), and the
        files `outputs` (paths on the target) copied into the local directory `into` after it (an absent one
        is left out: collect() judges). A remote kind does it all in one round trip (SshTarget); this
        default uses the methods above in turn."""
        state = self.read_files(self.state_paths())
        when = datetime.now(timezone.utc)
        proc = self.run(argv, timeout=timeout, cwd=cwd)
        for remote in outputs if proc.returncode == 0 else ():  # a failed command's error comes first
            try:
                self.get(remote, str(into / posixpath.basename(remote)))
            except TargetError as e:
                if "No such file" not in str(e):
                    raise  # a missing optional output is for collect() to judge; a lost connection is not
        return ProbeRun(proc, state, when)

    def sys_path(self, rel: str) -> str:
        """A /proc or /sys path below this target's sysfs root."""
        return posixpath.join(self.sysfs_root, rel.lstrip("/"))

    @property
    def is_local(self) -> bool:
        return self.kind == "local"

    def describe(self) -> str:
        return f"{self.name} ({self.kind}{': ' + self.description if self.description else ''})"
