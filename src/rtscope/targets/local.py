"""Target `local`: the machine rtscope runs on (the default; it behaves as rtscope always has)."""

from __future__ import annotations

import os
import platform
import shutil
import signal
import subprocess
import tempfile
import threading
import time
from pathlib import Path

from ..errors import ProbeError
from ..signals import die_with_parent, held_signals, raise_if_lost, raised
from .base import CommandTimedOut, Completed, Target, TargetError

TERM_WAIT_S = 2.0    # after SIGTERM, before SIGKILL
KILL_WAIT_S = 30.0   # after SIGKILL: a process in uninterruptible I/O dies when the I/O ends
LOCAL = "local"


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


def stop_session(proc: subprocess.Popen, what: str) -> None:
    """Signal every process of proc's session, SIGTERM then SIGKILL; raise if any survives."""
    sid = proc.pid
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
                    proc.wait(0.05)  # reap the leader, so it is not counted as alive
                except subprocess.TimeoutExpired:
                    pass
                if proc.poll() is not None and not session_members(sid):
                    return
        left = session_members(sid)
        if left:
            raise TargetError(f"{what}: processes {', '.join(map(str, left))} of session {sid} survived SIGKILL")


class LocalProcess:
    """A background process in its own session on this machine."""

    def __init__(self, argv: list[str], cwd: str, log: str):
        self.argv, self.log = argv, log
        Path(cwd).mkdir(parents=True, exist_ok=True)
        before = raised()
        with open(log, "wb") as out:  # a file, not a pipe: a full pipe would stall the process
            try:
                self.proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=out, stderr=out, cwd=cwd,
                                             start_new_session=True, preexec_fn=die_with_parent)
            except OSError as e:
                raise TargetError(f"cannot start {argv[0]}: {e.strerror}") from None
        try:
            raise_if_lost(before)  # a Ctrl-C or SIGTERM during the fork
        except BaseException:
            _kill_group(self.proc)
            raise

    def running(self) -> bool:
        return self.proc.poll() is None

    def exit_code(self) -> int | None:
        return self.proc.poll()

    def members(self) -> int:
        return len(session_members(self.proc.pid))

    def stop(self) -> None:
        stop_session(self.proc, f"{Path(self.argv[0]).name}")

    def log_tail(self, chars: int = 600) -> str:
        try:
            return Path(self.log).read_text(errors="replace").strip()[-chars:]
        except OSError:
            return ""


def _kill_group(proc: subprocess.Popen) -> None:
    """Stop a command and everything it started (it runs in its own process group)."""
    if proc.poll() is not None:
        return
    for sig, wait in ((signal.SIGTERM, 5), (signal.SIGKILL, 5)):
        try:
            os.killpg(proc.pid, sig)
        except ProcessLookupError:
            return
        try:
            proc.wait(wait)
            return
        except subprocess.TimeoutExpired:
            continue


class LocalTarget(Target):
    def __init__(self, name: str = LOCAL, description: str = "this machine", sysfs_root: str | None = None,
                 workdir: str | None = None):
        super().__init__(name=name, description=description, kind="local",
                         sysfs_root=sysfs_root or "/", workdir=workdir or tempfile.gettempdir())
        self._running: set[subprocess.Popen] = set()
        self._lock = threading.Lock()

    def run(self, argv, *, timeout=None, stdin=None, cwd=None, binary=False) -> Completed:
        before = raised()
        try:
            proc = subprocess.Popen(argv, stdin=subprocess.PIPE if stdin is not None else subprocess.DEVNULL,
                                    stdout=subprocess.PIPE, stderr=subprocess.PIPE, cwd=cwd,
                                    start_new_session=True, preexec_fn=die_with_parent)  # no probe outlives kill -9
        except OSError as e:
            raise ProbeError(f"cannot start {argv[0]}: {e.strerror}") from None
        with self._lock:
            self._running.add(proc)
        try:
            raise_if_lost(before)  # a Ctrl-C or SIGTERM during the fork
            out, err = proc.communicate(input=stdin, timeout=timeout)
        except subprocess.TimeoutExpired:
            _kill_group(proc)
            raise CommandTimedOut(f"{Path(argv[0]).name} did not finish within {timeout:.0f} s; stopped") from None
        except BaseException:
            _kill_group(proc)
            raise
        finally:
            with self._lock:
                self._running.discard(proc)
            # Also reap anything the command left behind in its group (for example a VM's helpers).
            try:
                os.killpg(proc.pid, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                pass
        text_err = err.decode(errors="replace")
        return Completed(list(argv), proc.returncode, out if binary else out.decode(errors="replace"), text_err)

    def interrupt(self) -> None:
        with self._lock:
            running = list(self._running)
        for proc in running:
            _kill_group(proc)

    def spawn(self, argv, *, cwd, log) -> LocalProcess:
        return LocalProcess(argv, cwd, log)

    def put(self, local_path, remote_path, mode=0o644) -> None:
        shutil.copyfile(local_path, remote_path)
        os.chmod(remote_path, mode)

    def get(self, remote_path, local_path) -> None:
        shutil.copyfile(remote_path, local_path)

    def read_files(self, paths):
        out = {}
        for p in paths:
            try:
                out[p] = Path(p).read_text(errors="replace")
            except OSError:
                out[p] = None
        return out

    def write_file(self, path, text) -> None:
        with open(path, "w") as f:
            f.write(text)

    def which(self, command):
        return shutil.which(command)

    def mkdtemp(self, prefix="rtscope-run-", parent=None):
        return tempfile.mkdtemp(prefix=prefix, dir=parent)

    def remove_tree(self, path) -> None:
        shutil.rmtree(path, ignore_errors=True)

    def free_bytes(self, path):
        st = os.statvfs(path)
        return st.f_bavail * st.f_frsize

    def uname(self):
        u = platform.uname()
        return {"sysname": u.system, "nodename": u.node, "release": u.release, "version": u.version,
                "machine": u.machine}
