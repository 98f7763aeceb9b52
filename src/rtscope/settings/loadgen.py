"""System setting `load`: background load on every CPU while a run measures.

(The module is `loadgen`, not `load`: `rtscope.load` is the notebook API, api.py.)

Study 2 measured timer latency while `cat /dev/zero > /dev/null` ran on every
core; rtscope starts a well-kept load generator instead:

  none       no load
  cpu        stress-ng --cpu N          (compute on every CPU)
  io         stress-ng --iomix N        (mixed file I/O, sync and cache drops)
  vm         stress-ng --vm N           (memory allocation and page faults)
  hackbench  hackbench -g N (rt-tests)  (scheduler and IPC stress)

with N the number of online CPUs. The load is started before the probe and
stopped after it, also on error, Ctrl-C and SIGTERM (the runner undoes system
settings in an ExitStack). It runs in its own session: stopping signals every
process of that session, SIGTERM then SIGKILL, and checks that none is left.
"""

from __future__ import annotations

import posixpath
import sys
import time
from contextlib import contextmanager, nullcontext
from pathlib import Path
from typing import Iterator

from .. import sysinfo
from ..errors import RtscopeError
from ..options import one_of
from ..targets import LocalTarget, Target
from ..targets.base import Spawned
from ..targets.local import session_members  # noqa: F401  (the tests count a load's processes with it)
from .base import RunContext, Setting

LOADS = ("none", "cpu", "io", "vm", "hackbench")
PACKAGES = {"stress-ng": "stress-ng", "hackbench": "rt-tests"}
SPAWN_WAIT_S = 10.0  # for the generator to start its workers (slow on a busy board)
SETTLE_S = 0.25      # then: the load is spread over the CPUs before measuring starts
VM_BYTES = "64m"     # per vm worker: noticeable pressure without endangering a small board
IOMIX_BYTES = "16m"  # per io worker


def command(kind: str, ncpus: int, workdir: Path) -> list[str]:
    """The load generator's argv for `kind` on `ncpus` CPUs."""
    n = str(ncpus)
    if kind == "cpu":
        return ["stress-ng", "--cpu", n, "--timeout", "0"]
    if kind == "io":
        return ["stress-ng", "--iomix", n, "--iomix-bytes", IOMIX_BYTES, "--temp-path", str(workdir),
                "--timeout", "0"]
    if kind == "vm":
        return ["stress-ng", "--vm", n, "--vm-bytes", VM_BYTES, "--timeout", "0"]
    if kind == "hackbench":
        # Loops enough to outlast any run; it is stopped by signal. (Its long options need "=".)
        return ["hackbench", "-g", n, "-l", "2000000000", "-s", "512"]
    raise ValueError(f"no command for load {kind!r}")


class Load:
    """One running load generator on a target: start() it, stop() it (idempotent), in its own session."""

    def __init__(self, kind: str, workdir: Path | str, ncpus: int | None = None, target: Target | None = None):
        self.kind = kind
        self.target = target or LocalTarget()
        self.workdir = str(workdir)
        self.ncpus = ncpus or self._online_cpus()
        self.argv = command(kind, self.ncpus, Path(self.workdir))
        self.process: Spawned | None = None
        self.log = posixpath.join(self.workdir, f"load-{kind}.log")

    def _online_cpus(self) -> int:
        online = self.target.sys_path("sys/devices/system/cpu/online")
        return len(sysinfo.parse_cpu_list(self.target.read_files([online])[online])) or 1

    @property
    def proc(self):
        """The generator's process on this machine (local target), for the tests' process accounting."""
        return getattr(self.process, "proc", None)

    def start(self) -> None:
        missing = load_unavailable(self.kind, self.target)
        if missing:
            raise RtscopeError(missing)
        self.process = self.target.spawn(self.argv, cwd=self.workdir, log=self.log)
        try:
            self._wait_for_workers()
            time.sleep(SETTLE_S)
        except BaseException:
            self.stop()
            raise
        if not self.process.running():
            said = self.process.log_tail()
            code = self.process.exit_code()
            self.stop()
            raise RtscopeError(f"load {self.kind}: {' '.join(self.argv)} exited at once with code "
                               f"{code}: {said or 'no output'}")

    def _wait_for_workers(self) -> None:
        """Until the generator has at least one worker per CPU (or has exited)."""
        deadline = time.monotonic() + SPAWN_WAIT_S
        while (time.monotonic() < deadline and self.process.running()
               and self.process.members() < self.ncpus + 1):
            time.sleep(0.05)

    def stop(self) -> None:
        """Signal the whole session (SIGTERM, then SIGKILL); raise if any process survives."""
        if self.process is None:
            return
        try:
            self.process.stop()
        except RtscopeError as e:
            raise RtscopeError(f"load {self.kind}: {e}") from None

    @property
    def running(self) -> bool:
        return self.process is not None and self.process.running()


@contextmanager
def running_load(kind: str, ctx: RunContext) -> Iterator[Load]:
    """Start the load on the run's target, yield while the run measures, always stop it."""
    load = Load(kind, posixpath.join(str(ctx.run_dir or ctx.workdir), "load"), target=ctx.target)
    load.start()
    where = "" if load.target.is_local else f" on target {load.target.name}"
    ctx.notes.append(f"load {kind}: {' '.join(load.argv)} (on {load.ncpus} CPUs{where}, started before measuring)")
    try:
        yield load
    finally:
        died = load.process.exit_code() if load.process is not None else None
        load.stop()
        if died is not None:
            # The run is stored by now; say so rather than hide it.
            print(f"rtscope: warning: load {kind} exited with code {died} before the run ended; "
                  f"the run was partly measured without it ({load.process.log_tail(200)})", file=sys.stderr)


def load_unavailable(kind: str, target: Target | None = None) -> str | None:
    """Why load `kind` cannot run on the target (its tool is not installed there), or None."""
    if kind == "none":
        return None
    target = target or LocalTarget()
    tool = command(kind, 1, Path("."))[0]
    if target.which(tool) is None:
        where = "" if target.is_local else f" on target {target.name}"
        return f"load {kind} needs {tool}, which is not installed{where}: sudo apt-get install -y {PACKAGES[tool]}"
    return None


def apply(value: str, ctx: RunContext):
    return nullcontext() if value == "none" else running_load(value, ctx)


SETTINGS = (Setting("load", one_of(*LOADS), f"one of {', '.join(LOADS)}",
                 "background load on every CPU during the run: stress-ng cpu/io/vm, rt-tests hackbench",
                 "none", scope="system", apply=apply, unavailable=load_unavailable),)
