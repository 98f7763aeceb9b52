"""System setting `load`: background load on every CPU while a run measures.

(The module is `loadgen`, not `load`: `rtscope.load` is the notebook API, rtscope/api.py.)

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

import ctypes
import os
import shutil
import signal
import subprocess
import sys
import time
from contextlib import contextmanager, nullcontext
from pathlib import Path
from typing import Iterator

from . import sysinfo
from .errors import RtscopeError
from .options import one_of
from .settings import RunContext, Setting, register
from .signals import held_signals

LOADS = ("none", "cpu", "io", "vm", "hackbench")
PACKAGES = {"stress-ng": "stress-ng", "hackbench": "rt-tests"}
SPAWN_WAIT_S = 10.0  # for the generator to start its workers (slow on a busy board)
SETTLE_S = 0.25      # then: the load is spread over the CPUs before measuring starts
TERM_WAIT_S = 2.0    # after SIGTERM, before SIGKILL
KILL_WAIT_S = 30.0   # after SIGKILL: a worker in uninterruptible I/O dies when the I/O ends
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


def session_members(sid: int) -> list[int]:
    """Live (non-zombie) processes of session `sid`, from /proc."""
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            stat = Path(f"/proc/{entry}/stat").read_text()
        except OSError:
            continue
        # Fields after the command name (which may hold spaces and parentheses).
        fields = stat[stat.rindex(")") + 2:].split()
        if int(fields[3]) == sid and fields[0] != "Z":
            found.append(int(entry))
    return found


def _die_with_parent() -> None:
    """In the child: get SIGKILL if rtscope dies without stopping the load (kill -9)."""
    try:
        ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG
    except (OSError, AttributeError):
        pass


class Load:
    """One running load generator: start() it, stop() it (idempotent), in its own session."""

    def __init__(self, kind: str, workdir: Path, ncpus: int | None = None):
        self.kind = kind
        self.workdir = Path(workdir)
        self.ncpus = ncpus or len(sysinfo.online_cpus(Path("/")))
        self.argv = command(kind, self.ncpus, self.workdir)
        self.proc: subprocess.Popen | None = None
        self.log = self.workdir / f"load-{kind}.log"

    def start(self) -> None:
        missing = load_unavailable(self.kind)
        if missing:
            raise RtscopeError(missing)
        self.workdir.mkdir(parents=True, exist_ok=True)
        with open(self.log, "wb") as log:  # a file, not a pipe: a full pipe would stall the load
            try:
                self.proc = subprocess.Popen(self.argv, stdin=subprocess.DEVNULL, stdout=log, stderr=log,
                                             cwd=self.workdir, start_new_session=True,
                                             preexec_fn=_die_with_parent)
            except OSError as e:
                raise RtscopeError(f"cannot start load {self.kind} ({self.argv[0]}): {e.strerror}") from None
        try:
            self._wait_for_workers()
            time.sleep(SETTLE_S)
        except BaseException:
            self.stop()
            raise
        if self.proc.poll() is not None:
            said = self._log_tail()
            self.stop()
            raise RtscopeError(f"load {self.kind}: {' '.join(self.argv)} exited at once with code "
                               f"{self.proc.returncode}: {said or 'no output'}")

    def _wait_for_workers(self) -> None:
        """Until the generator has at least one worker per CPU (or has exited)."""
        deadline = time.monotonic() + SPAWN_WAIT_S
        while (time.monotonic() < deadline and self.proc.poll() is None
               and len(session_members(self.proc.pid)) < self.ncpus + 1):
            time.sleep(0.05)

    def _log_tail(self, chars: int = 600) -> str:
        try:
            return self.log.read_text(errors="replace").strip()[-chars:]
        except OSError:
            return ""

    def stop(self) -> None:
        """Signal the whole session (SIGTERM, then SIGKILL); raise if any process survives."""
        if self.proc is None:
            return
        sid = self.proc.pid
        with held_signals():
            for sig, wait in ((signal.SIGTERM, TERM_WAIT_S), (signal.SIGKILL, KILL_WAIT_S)):
                for pid in session_members(sid):
                    try:
                        os.kill(pid, sig)
                    except (ProcessLookupError, PermissionError):
                        pass
                deadline = time.monotonic() + wait
                while time.monotonic() < deadline:
                    try:
                        self.proc.wait(0.05)  # reap the leader, so it is not counted as alive
                    except subprocess.TimeoutExpired:
                        pass
                    if self.proc.poll() is not None and not session_members(sid):
                        return
            left = session_members(sid)
            if left:
                raise RtscopeError(f"load {self.kind}: processes {', '.join(map(str, left))} of session {sid} "
                                   "survived SIGKILL")

    @property
    def running(self) -> bool:
        return self.proc is not None and self.proc.poll() is None


@contextmanager
def running_load(kind: str, ctx: RunContext) -> Iterator[Load]:
    """Start the load, yield while the run measures, always stop it."""
    load = Load(kind, Path(ctx.workdir) / "load")
    load.start()
    ctx.notes.append(f"load {kind}: {' '.join(load.argv)} (on {load.ncpus} CPUs, started before measuring)")
    try:
        yield load
    finally:
        died = load.proc.poll() if load.proc is not None else None
        load.stop()
        if died is not None:
            # The run is stored by now; say so rather than hide it.
            print(f"rtscope: warning: load {kind} exited with code {died} before the run ended; "
                  f"the run was partly measured without it ({load._log_tail(200)})", file=sys.stderr)


def load_unavailable(kind: str) -> str | None:
    """Why load `kind` cannot run here (its tool is not installed), or None."""
    if kind == "none":
        return None
    tool = command(kind, 1, Path("."))[0]
    if shutil.which(tool) is None:
        return f"load {kind} needs {tool}, which is not installed: sudo apt-get install -y {PACKAGES[tool]}"
    return None


def apply(value: str, ctx: RunContext):
    return nullcontext() if value == "none" else running_load(value, ctx)


register(Setting("load", one_of(*LOADS), f"one of {', '.join(LOADS)}",
                 "background load on every CPU during the run: stress-ng cpu/io/vm, rt-tests hackbench",
                 "none", scope="system", apply=apply, unavailable=load_unavailable))
