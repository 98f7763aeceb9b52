"""BEAM node targets: a running Erlang VM (a Nerves device, a production Elixir service) measured in place.

    [targets.nerves]
    url = "erlang://rtscope@nerves-1234.local"    # Erlang distribution
    cookie_file = "~/.rtscope/nerves.cookie"       # or cookie = "..."

A node has no shell: it runs runtime `beam` only. On open() rtscope loads
the harness's object code into the node (RtScope.Remote and the workloads;
nothing is installed there), runs each harness command line in the node
(`RtScope.CLI.execute`, whose output comes back as text), fetches the sample
file it wrote, and on close() removes every module it loaded, which stops
any process still running them. A guard process on the node does the same
when rtscope's connection goes away, so a killed rtscope leaves nothing
behind either. The node itself is never stopped or restarted.

Reads and writes of files (/proc, /sys, a governor) go through the node, so
the governor setting works on a device without a shell, with its undo.

This module has what both ways to a node share (`BeamNodeTarget`) and the
Erlang-distribution way (`ErlangNodeTarget`, through the local relay node
RtScope.Relay); nerves_ssh.py has the SSH way.
"""

from __future__ import annotations

import base64
import json
import os
import posixpath
import queue
import re
import secrets
import shutil
import signal
import subprocess
import tempfile
import threading
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from .. import paths
from ..errors import UsageError
from .base import Completed, Spawned, Target, TargetError

HARNESS = "rtscope-beam"   # argv[0] of the one command a node runs: the harness's command line
NODE_WORKDIR = "/tmp/rtscope"  # sample files while a run lasts (Nerves keeps /tmp in RAM)
CALL_TIMEOUT = 120.0       # seconds for a call that is not a run (file reads, loading the harness)
NAME_RE = re.compile(r"^[A-Za-z0-9_-]+$")
CLEARED_ENV = ("ERL_FLAGS", "ERL_AFLAGS", "ERL_ZFLAGS", "ELIXIR_ERL_OPTIONS")
RELAY_PREFIX = "rtscope-relay: "


def parse_node_url(url: str, scheme: str = "erlang") -> str:
    """erlang://NAME@HOST -> "NAME@HOST", the node's name."""
    parts = urlsplit(url)
    example = "erlang://rtscope@nerves-1234.local"
    if parts.scheme != scheme or "@" not in parts.netloc:
        raise UsageError(f"invalid BEAM node url {url!r}: write {scheme}://NAME@HOST, e.g. {example}")
    name, _, host = parts.netloc.partition("@")
    if not NAME_RE.match(name) or not host or ":" in host:
        raise UsageError(f"invalid BEAM node url {url!r}: NAME is letters, digits, '_' and '-', HOST a host "
                         f"name without a port (the node's port comes from epmd), e.g. {example}")
    if parts.path not in ("", "/") or parts.query or parts.fragment:
        raise UsageError(f"BEAM node url {url!r} must not have a path, query or fragment")
    return parts.netloc


def read_cookie(options: dict, where: str) -> str:
    """The node's cookie: `cookie`, else the file `cookie_file`, else ~/.erlang.cookie (as erl does)."""
    if "cookie" in options and "cookie_file" in options:
        raise UsageError(f"{where}: give cookie or cookie_file, not both")
    if "cookie" in options:
        cookie = options["cookie"]
    else:
        path = Path(os.path.expanduser(options.get("cookie_file") or "~/.erlang.cookie"))
        try:
            cookie = path.read_text().strip()
        except OSError as e:
            raise UsageError(f"{where}: cannot read the cookie file {path}: {e.strerror}; set cookie_file = PATH "
                             "(or cookie = \"...\")") from None
    if not isinstance(cookie, str) or not cookie or any(c.isspace() for c in cookie):
        raise UsageError(f"{where}: the cookie must be a non-empty string without spaces")
    return cookie


class BeamNodeTarget(Target):
    """What every way to a running node shares; subclasses provide the calls into the node."""

    runtimes = ("beam",)

    def __init__(self, name: str, node: str, *, description: str = "", workdir: str | None = None,
                 sysfs_root: str | None = None, kind: str):
        super().__init__(name, description=description, workdir=workdir or NODE_WORKDIR,
                         sysfs_root=sysfs_root or "/", kind=kind)
        self.node = node
        self.facts = {"node": node}
        # Run directories go below it; the node's guard removes it with the modules.
        self.session_dir = posixpath.join(self.workdir, f"rtscope-{secrets.token_hex(5)}")
        self._uname: dict[str, str] | None = None

    # -- what a subclass provides
    def call(self, fun: str, *args: Any, timeout: float | None = CALL_TIMEOUT) -> Any:
        """RtScope.Remote.fun(*args) on the node; TargetError naming the node when it fails."""
        raise NotImplementedError

    # -- commands: the harness only
    def run(self, argv, *, timeout=None, stdin=None, cwd=None, binary=False) -> Completed:
        if argv[:1] != [HARNESS]:
            raise TargetError(f"target {self.name} is a running BEAM node ({self.node}): it runs the BEAM "
                              f"harness (runtime beam) only, not `{argv[0] if argv else ''}`")
        res = self.call("harness", list(argv[1:]), timeout=timeout)
        stderr = res["stderr"]
        if "VM flags not in force" in stderr:
            stderr = (f"a running node's VM flags cannot change: setting vm_flags on target {self.name} must "
                      f"be exactly the flags the node runs with. {stderr}")
        return Completed(list(argv), res["status"], res["stdout"], stderr)

    def spawn(self, argv, *, cwd, log) -> Spawned:
        raise TargetError(f"target {self.name} is a running BEAM node ({self.node}): it cannot start programs "
                          "such as load generators; use an ssh target for the board's Linux")

    # -- files
    def put(self, local_path, remote_path, mode=0o644) -> None:
        raise TargetError(f"target {self.name} is a running BEAM node: rtscope installs nothing there (only "
                          "programs a run needs, into the session's directory: place_program)")

    def place_program(self, local: Path) -> str:
        """`local` (a static program: the GPIO port program) in this session's directory on the node, which
        the node's guard removes with the modules; once per session."""
        key = ("program", str(local))
        if key not in self.deployed:
            remote = posixpath.join(self.session_dir, "bin", local.name)
            self._send_program(local, remote)
            self.deployed[key] = remote
        return self.deployed[key]

    def _send_program(self, local: Path, remote: str) -> None:
        self.call("place_program", remote, base64.b64encode(local.read_bytes()).decode())

    def read_files(self, paths: list[str]) -> dict[str, str | None]:
        return self.call("read_files", list(paths))

    def write_file(self, path: str, text: str) -> None:
        self.call("write_file", path, text)

    def unwritable(self, paths: list[str]) -> list[str]:
        return self.call("unwritable", list(paths))

    def which(self, command: str) -> str | None:
        return None

    def mkdtemp(self, prefix="rtscope-run-", parent=None) -> str:
        return self.call("mkdtemp", parent or self.session_dir, prefix)

    def remove_tree(self, path: str) -> None:
        self.call("remove_tree", path)

    def free_bytes(self, path: str) -> int | None:
        return None

    def uname(self) -> dict[str, str]:
        if self._uname is None:
            self._uname = self.call("uname")
        return self._uname


class Relay:
    """The local hidden node RtScope.Relay: rtscope's end of Erlang distribution, one JSON line per request."""

    def __init__(self, ebin: Path, where: str):
        self.where = where
        self.home = tempfile.mkdtemp(prefix="rtscope-relay-")  # its HOME: erl writes a cookie file there
        env = {k: v for k, v in os.environ.items() if k not in CLEARED_ENV}
        env.update(HOME=self.home, ERL_CRASH_DUMP_SECONDS="0")
        self.stderr = open(os.path.join(self.home, "stderr"), "w+b")
        # Its own session: the terminal's Ctrl-C reaches rtscope, which then unloads in order.
        self.proc = subprocess.Popen(
            [paths.elixir(), "--erl", "-hidden -dist_listen false", "-pa", str(ebin), "-e",
             "RtScope.Relay.main()"], stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=self.stderr,
            env=env, start_new_session=True)
        self.replies: queue.Queue[str | None] = queue.Queue()
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        for raw in self.proc.stdout:
            line = raw.decode(errors="replace")
            if line.startswith(RELAY_PREFIX):
                self.replies.put(line[len(RELAY_PREFIX):])
        self.replies.put(None)

    def request(self, op: str, timeout: float | None, **fields: Any) -> Any:
        try:
            self.proc.stdin.write((json.dumps({"op": op, **fields}) + "\n").encode())
            self.proc.stdin.flush()
        except (BrokenPipeError, ValueError):
            raise TargetError(f"{self.where}: the relay node has exited: {self.said()}") from None
        try:
            line = self.replies.get(timeout=timeout)
        except queue.Empty:
            self.kill()  # the node's guard then removes what was loaded, which stops the call
            raise TargetError(f"{self.where}: no answer within {timeout:.0f} s") from None
        except BaseException:
            self.kill()  # Ctrl-C, SIGTERM: an answer still owed would be taken for the next one's
            raise
        if line is None:
            raise TargetError(f"{self.where}: the relay node has exited: {self.said()}")
        reply = json.loads(line)
        if "error" in reply:
            raise TargetError(f"{self.where}: {reply['error']}")
        return reply["ok"]

    def said(self) -> str:
        self.stderr.seek(0)
        return self.stderr.read().decode(errors="replace").strip()[-600:] or "no output"

    def kill(self) -> None:
        if self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGKILL)
        self.proc.wait()

    def close(self) -> None:
        """Ends the relay: stdin closed, it unloads what is left and exits; killed if it does not."""
        try:
            self.proc.stdin.close()
        except OSError:
            pass
        try:
            self.proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            self.kill()
        self.stderr.close()
        shutil.rmtree(self.home, ignore_errors=True)


class ErlangNodeTarget(BeamNodeTarget):
    """A node reached over Erlang distribution (erlang://NAME@HOST), through a local relay node."""

    def __init__(self, name: str, url: str, *, cookie: str, **kw):
        super().__init__(name, parse_node_url(url), kind="erlang", **kw)
        self._cookie = cookie
        self._relay: Relay | None = None
        self.facts["node_access"] = "erlang distribution"

    def open(self) -> None:
        if self._relay is not None:
            return
        where = f"target {self.name} ({self.node})"
        self._relay = Relay(paths.beam_ebin(), where)
        try:
            self._relay.request("connect", CALL_TIMEOUT, node=self.node, cookie=self._cookie)
            self._relay.request("load", CALL_TIMEOUT, ebin=str(paths.beam_ebin()), session_dir=self.session_dir)
        except BaseException:
            self.close()
            raise

    def call(self, fun: str, *args: Any, timeout: float | None = CALL_TIMEOUT) -> Any:
        if self._relay is None:
            self.open()
        # erpc's own timeout ends the call on the node side; ours waits a little longer for its answer.
        return self._relay.request("call", None if timeout is None else timeout + 30, fun=fun, args=list(args),
                                   timeout_ms=None if timeout is None else int(timeout * 1000))

    def get(self, remote_path: str, local_path: str) -> None:
        if self._relay is None:
            self.open()
        self._relay.request("get", CALL_TIMEOUT, remote=remote_path, local=str(local_path))

    def interrupt(self) -> None:
        if self._relay is not None:
            self._relay.kill()

    def close(self) -> None:
        relay, self._relay = self._relay, None
        if relay is None:
            return
        left = []
        try:
            left = relay.request("unload", CALL_TIMEOUT) if relay.proc.poll() is None else []
        except TargetError:
            relay.kill()  # a node that is gone has nothing loaded; one that is not: its guard unloads
        finally:
            relay.close()
        if left:
            raise TargetError(f"target {self.name}: modules still loaded on {self.node}: {', '.join(left)}")
