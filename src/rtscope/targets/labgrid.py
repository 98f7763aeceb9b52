"""Target kind `labgrid`: a board of a lab managed by labgrid, reached through its place's NetworkService.

    [targets.lab-pi]
    url = "labgrid://pi3-rt"            # the place
    coordinator = "lab.example:20408"   # optional: $LG_COORDINATOR otherwise
    power_cycle = true                  # optional: power-cycle the board first (the place needs a power port)
    identity = "~/.ssh/lab_ed25519"     # as for ssh targets
    known_hosts = "~/.ssh/known_hosts"

open() acquires the place (for this experiment only), optionally
power-cycles the board, reads the address, port and user of the place's
NetworkService and connects as an SSH target. close() releases the place.
A place held by someone else is an error naming the holder, unless rtscope
may wait for it (`rtscope run --wait-for-place SECONDS`).

Releasing on every exit path: close() runs on success, errors, Ctrl-C and
SIGTERM; for `kill -9` a small watchdog process (`python -m
rtscope.targets.labgrid release-on-exit`) holds a pipe from rtscope and
releases the place when the pipe closes without rtscope having said "done".
rtscope drives labgrid through its `labgrid-client` command (labgrid is an
optional dependency: `pip install 'rtscope[lab]'`).
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path

from ..errors import RtscopeError
from .definition import TargetDefinition
from .ssh import SshTarget

POLL_S = 2.0  # between attempts while waiting for a place


def client() -> str:
    """labgrid-client: beside this Python (a virtualenv), else on the PATH."""
    beside = Path(sys.executable).with_name("labgrid-client")
    found = str(beside) if beside.exists() else shutil.which("labgrid-client")
    if not found:
        raise RtscopeError("labgrid is not installed: pip install 'rtscope[lab]' (or pip install labgrid)")
    return found


def _labgrid(coordinator: str, place: str, *args: str, timeout: float = 120) -> subprocess.CompletedProcess:
    env = {**os.environ, "LG_COORDINATOR": coordinator}
    try:
        return subprocess.run([client(), "-p", place, *args], capture_output=True, text=True, timeout=timeout, env=env)
    except subprocess.TimeoutExpired:
        raise RtscopeError(f"labgrid coordinator {coordinator} did not answer within {timeout:.0f} s "
                           f"(labgrid-client -p {place} {' '.join(args)})") from None


def _said(proc: subprocess.CompletedProcess) -> str:
    return (proc.stderr or proc.stdout).strip().removeprefix("labgrid-client: Error: ")[-600:]


def network_service(show: str) -> dict:
    """address, port and username of the acquired place's NetworkService, from `labgrid-client show`."""
    m = re.search(r"\(([^)]*/NetworkService/[^)]*)\):\s*(\{.*?\})\s*$", show, re.S | re.M)
    block = m.group(2) if m else ""
    found = {}
    for key in ("address", "username"):
        k = re.search(rf"'{key}':\s*'([^']*)'", block)
        if k:
            found[key] = k.group(1)
    port = re.search(r"'port':\s*(\d+)", block)
    if port:
        found["port"] = int(port.group(1))
    return found


class LabgridTarget(SshTarget):
    def __init__(self, d: TargetDefinition):
        o = d.options
        self.place = d.url.removeprefix("labgrid://").strip("/")
        self.coordinator = o.get("coordinator") or os.environ.get("LG_COORDINATOR")
        self.power_cycle = bool(o.get("power_cycle", False))
        self.wait_for_place = 0.0
        self._watchdog: subprocess.Popen | None = None
        self._acquired = False
        super().__init__(d.name, "ssh://root@127.0.0.1:1", identity=o.get("identity"),
                         known_hosts=o.get("known_hosts"), workdir=o.get("workdir"),
                         description=d.description or f"labgrid place {self.place}", sysfs_root=o.get("sysfs_root"),
                         kind="labgrid", session=o.get("session", True))

    def _where(self) -> str:
        return f"target {self.name} (labgrid place {self.place} at {self.coordinator})"

    def open(self) -> None:
        if self._acquired:
            return super().open()
        if not self.coordinator:
            raise RtscopeError(f"target {self.name}: no labgrid coordinator: set LG_COORDINATOR or coordinator = "
                               "\"host:port\" in its table")
        self._acquire()
        try:
            if self.power_cycle:
                done = _labgrid(self.coordinator, self.place, "power", "cycle")
                if done.returncode != 0:
                    raise RtscopeError(f"{self._where()}: power cycle failed: {_said(done)}")
            shown = _labgrid(self.coordinator, self.place, "show")
            service = network_service(shown.stdout)
            if "address" not in service:
                raise RtscopeError(f"{self._where()}: the place has no NetworkService resource (the board's "
                                   "address for SSH); add one to its exporter")
            self.host, self.port = service["address"], service.get("port", 22)
            self.user = service.get("username") or self.user
            self.facts = {"labgrid_place": self.place, "labgrid_coordinator": self.coordinator}
            self._connect_after_boot(60.0 if self.power_cycle else 0.0)
        except BaseException:
            self.close()
            raise

    def _connect_after_boot(self, patience: float) -> None:
        deadline = time.monotonic() + patience
        while True:
            try:
                return SshTarget.open(self)
            except RtscopeError:
                if time.monotonic() > deadline:
                    raise
                time.sleep(POLL_S)

    def _acquire(self) -> None:
        deadline = time.monotonic() + self.wait_for_place
        while True:
            done = _labgrid(self.coordinator, self.place, "acquire")
            if done.returncode == 0:
                break
            said = _said(done)
            held = re.search(r"already acquired by (\S+?)\.?(\s|$)", said)
            if held and time.monotonic() < deadline:
                time.sleep(POLL_S)
                continue
            if held:
                wait = (f" (waited {self.wait_for_place:.0f} s)" if self.wait_for_place else
                        "; wait for it with `rtscope run --wait-for-place SECONDS`")
                raise RtscopeError(f"{self._where()}: the place is held by {held.group(1)}{wait}")
            raise RtscopeError(f"{self._where()}: cannot acquire the place: {said}")
        self._acquired = True
        self._watchdog = subprocess.Popen(
            [sys.executable, "-m", "rtscope.targets.labgrid", "release-on-exit", self.coordinator, self.place],
            stdin=subprocess.PIPE, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True,
            text=True)

    def close(self) -> None:
        super().close()
        if self._acquired:
            done = _labgrid(self.coordinator, self.place, "release")
            self._acquired = False
            if self._watchdog is not None:
                try:
                    self._watchdog.communicate("done\n", timeout=10)
                except (subprocess.TimeoutExpired, OSError):
                    self._watchdog.kill()
                self._watchdog = None
            if done.returncode != 0:
                raise RtscopeError(f"{self._where()}: could not release the place: {_said(done)}")


def check_table(d: TargetDefinition) -> None:
    from ..errors import UsageError
    if not d.url or not d.url.removeprefix("labgrid://").strip("/"):
        raise UsageError(f"[targets.{d.name}]: a labgrid target needs url = \"labgrid://PLACE\"")
    if "power_cycle" in d.options and not isinstance(d.options["power_cycle"], bool):
        raise UsageError(f"[targets.{d.name}]: power_cycle must be true or false")


def _release_on_exit(coordinator: str, place: str) -> int:
    """The watchdog: release the place when rtscope's pipe closes without "done" (rtscope was killed)."""
    said = sys.stdin.read()
    if "done" not in said:
        _labgrid(coordinator, place, "release")
    return 0


if __name__ == "__main__":
    if len(sys.argv) == 4 and sys.argv[1] == "release-on-exit":
        sys.exit(_release_on_exit(sys.argv[2], sys.argv[3]))
    print("usage: python -m rtscope.targets.labgrid release-on-exit COORDINATOR PLACE  (used by rtscope itself)",
          file=sys.stderr)
    sys.exit(2)
