"""Target kind `ssh`: a board or host reached over SSH (paramiko), one connection per target per experiment.

Why paramiko: rtscope's runner is synchronous (one thread per target in a
fleet), and paramiko's blocking client, SFTP and host-key API fit it without
an event loop; asyncssh would have to be bridged into every call.

Host keys are verified against `known_hosts` (the target's, else
~/.ssh/known_hosts) and an unknown or changed key is refused with the
fingerprint to check, never accepted.

Every command runs under a small POSIX-sh supervisor (ssh_shell.SUPERVISE_FUNCTION): the command gets its
own session (setsid), and the supervisor kills that whole process group when its standard input closes or
says "stop". rtscope does that to stop a command (timeout, Ctrl-C, SIGTERM), and sshd closes it when the
connection drops (rtscope killed with -9, network gone), so nothing is left running on the target in any of
these cases. No polling crosses the network while a command runs: the supervisor waits and reports its end.

Round trips and the login shell's start-up are what a remote command costs, so every command goes through
one channel kept for the whole connection, the session agent (ssh_session.py): the login shell starts once,
and a command costs one round trip. A run is one command (run_probe): the run directory is made at its head
(mkdtemp and remove_tree only note what to do, see `_pending` and `_later`; with the session the directory
was made ahead, after the previous request's reply, and the previous one is removed after this one's), the
machine's state is read just before the probe starts, and the probe's output files come back after it ends
(ssh_shell.BATCH_FUNCTION). Background processes (spawn: load generators, PM QoS holders) are jobs of the
agent (SessionJob), started, asked and stopped by requests. The commands other layers ask for at connection
(base.AT_OPEN: the check for a killed rtscope's settings) run in the request that connects, and the last run
directory is removed by a request sent as the target closes and not waited for. Where the agent cannot run
(a login shell that is not POSIX, no `env`), or with `session = false` in the target's table, each command
and each background process opens a channel of its own as before, with a warning.
"""

from __future__ import annotations

import logging
import os
import posixpath
import re
import secrets
import shlex
import socket
import sys
import threading
import time
from contextlib import contextmanager
from datetime import datetime, timezone
from pathlib import Path
from typing import Callable, Iterator, NoReturn

import paramiko

from .. import sysinfo
from . import ssh_session
from .base import AT_OPEN, CommandTimedOut, Completed, ProbeRun, Target, TargetError, TargetLost, TargetSilent, \
    parse_url
from .owners import RUN_DIR_PREFIX, owned_name, owner_of
from .ssh_shell import BATCH, MEMBERS_FUNCTION, READ_FUNCTION, SUPERVISOR, parse_read, printf_format, unbatch

# paramiko's transport thread logs a failed handshake (a reset during the banner) with its traceback, which Python
# prints to stderr when no handler is configured; rtscope reports every such failure itself (connect's fail()).
logging.getLogger("paramiko").addHandler(logging.NullHandler())

CHANNEL_OPEN_TIMEOUT_S = 60.0  # a target that does not open a channel in this time is not answering
CONNECT_TIMEOUT = 15.0  # seconds for TCP, banner and authentication
STOP_WAIT = 15.0        # seconds for a stopped command's supervisor to report back
KEEPALIVE_S = 10.0      # seconds between keepalives (keepalive@openssh.com, answered: OpenSSH's ServerAliveInterval)
SILENT_AFTER_S = 30.0   # a target that has answered none for this long is hung: its connection is closed
BOOT_ID = "/proc/sys/kernel/random/boot_id"  # new at every boot: a reconnected target that rebooted has another
RUN_DIRS = "rtscope-run-dirs"  # the answer, at connection, listing the run directories in the workdir


EXIT_DRAIN = 2.0        # seconds without output after a command's exit status before its output counts as whole
INLINE_STDIN = 4096     # bytes of a command's stdin the session writes in the command's own request (more: SFTP)
JOB_FDS = range(4, 10)  # the session agent's fds for its background jobs (a POSIX sh has 0..9; 3 is supervise's)
JOB_FRESH = 0.1         # seconds a background job's state from a reply is taken as current


def _fingerprint(key: paramiko.PKey) -> str:
    return f"{key.get_name()} SHA256:{key.fingerprint.split(':', 1)[-1]}" if hasattr(key, "fingerprint") else \
        f"{key.get_name()} {key.get_base64()[:24]}..."


class _Refuse(paramiko.MissingHostKeyPolicy):
    """Refuse unknown host keys, remembering the key offered so the error can show its fingerprint."""

    def __init__(self):
        self.offered: paramiko.PKey | None = None

    def missing_host_key(self, client, hostname, key):
        self.offered = key
        raise paramiko.SSHException(f"unknown host key for {hostname}")


def connect(fail: Callable[[str], TargetError], host: str, port: int, user: str | None, identity: str | None,
            known_hosts: str | None, timeout: float = CONNECT_TIMEOUT) -> paramiko.SSHClient:
    """An SSH connection whose host key is verified against known_hosts (never accepted blindly), each of its
    steps (TCP, banner, authentication) within `timeout` seconds; every failure is fail(message)."""
    client = paramiko.SSHClient()
    policy = _Refuse()
    client.set_missing_host_key_policy(policy)
    known = known_hosts or os.path.expanduser("~/.ssh/known_hosts")
    try:
        client.load_host_keys(known)
    except FileNotFoundError:
        raise fail(f"known_hosts file {known} does not exist; host keys are verified, never accepted "
                   "blindly: add the target's key first (check its fingerprint on the target)") from None
    except (OSError, paramiko.SSHException) as e:
        raise fail(f"cannot read known_hosts file {known}: {e}") from None
    if identity and not os.path.isfile(identity):
        raise fail(f"identity file {identity} does not exist")
    try:
        client.connect(host, port, username=user, key_filename=identity,
                       timeout=timeout, banner_timeout=timeout, auth_timeout=timeout,
                       allow_agent=identity is None, look_for_keys=identity is None)
    except paramiko.BadHostKeyException as e:
        client.close()
        raise fail(f"the host key CHANGED: it offers {_fingerprint(e.key)}, but {known} records "
                   f"{_fingerprint(e.expected_key)}; if the target was reinstalled, remove the old key "
                   f"(ssh-keygen -R '[{host}]:{port}' -f {known}) and add the new one after "
                   "checking it on the target") from None
    except paramiko.AuthenticationException:
        client.close()
        raise fail(f"authentication failed for user {user or os.environ.get('USER', '?')} "
                   f"({'key ' + identity if identity else 'agent and default keys'})") from None
    except paramiko.SSHException as e:
        client.close()
        if policy.offered is not None:
            raise fail(f"unknown host key ({_fingerprint(policy.offered)}): it is not in {known}; "
                             "host keys are verified, never accepted blindly: check the fingerprint on the "
                             f"target, then add it (ssh-keyscan -p {port} {host} >> {known})") from None
        raise fail(f"SSH failed: {e}") from None
    except (socket.timeout, TimeoutError):
        client.close()
        raise fail(f"unreachable: no answer within {timeout:g} s") from None
    except (OSError, paramiko.ssh_exception.NoValidConnectionsError) as e:
        client.close()
        reason = getattr(e, "strerror", None) or str(e)
        if isinstance(e, paramiko.ssh_exception.NoValidConnectionsError):
            reason = "connection refused"
        raise fail(f"unreachable: {reason}") from None
    transport = client.get_transport()
    try:
        # Without it, Nagle's algorithm holds a small SSH packet until the delayed ACK of the one before:
        # about 40 ms on every channel.
        transport.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    except (OSError, AttributeError):
        pass  # not a TCP socket (a proxy command)
    return client


class Heartbeat:
    """The connection's keepalives: a global request with a reply every `every` seconds from a thread of its own
    (as OpenSSH's ServerAliveInterval), and when the target last answered one. A board that hangs (its kernel
    stalled, every process stopped) keeps its TCP connection open, and only this notices it."""

    def __init__(self, transport: paramiko.Transport, every: float):
        self.transport, self.every = transport, every
        self.heard = time.monotonic()
        self.done = threading.Event()
        threading.Thread(target=self._beat, name="rtscope-ssh-keepalive", daemon=True).start()

    def _beat(self) -> None:
        while not self.done.wait(self.every):
            try:
                # OpenSSH answers an unknown request with a failure: an answer all the same. It returns when
                # answered, or when the connection is closed.
                self.transport.global_request("keepalive@openssh.com", wait=True)
            except (paramiko.SSHException, OSError, EOFError):
                return
            if not self.transport.is_active():
                return
            self.heard = time.monotonic()

    def silent_for(self) -> float:
        return time.monotonic() - self.heard

    def stop(self) -> None:
        self.done.set()


class SshTarget(Target):
    def __init__(self, name: str, url: str, *, identity: str | None = None, known_hosts: str | None = None,
                 workdir: str | None = None, description: str = "", sysfs_root: str | None = None,
                 password_env: str | None = None, kind: str = "ssh", session: bool = True,
                 keepalive_s: float | None = None, silent_after_s: float | None = None):
        super().__init__(name=name, description=description, kind=kind,
                         workdir=workdir or "/var/tmp/rtscope", sysfs_root=sysfs_root or "/")
        self.url = url
        self.user, self.host, self.port = parse_url(url)
        self.identity = str(Path(identity).expanduser()) if identity else None
        self.known_hosts = str(Path(known_hosts).expanduser()) if known_hosts else None
        self._client: paramiko.SSHClient | None = None
        self._sftp: paramiko.SFTPClient | None = None
        self._uname: dict | None = None
        self._channels: set[paramiko.Channel] = set()
        self._lock = threading.Lock()
        # Shell commands owed to the target, sent with the next command rather than in a round trip of their own:
        # at its head what must come first (make a run directory), after its reply what need not delay it
        # (remove the last run directory, make the next one ahead: `_spare`); close() sends what is left.
        self._pending: list[str] = []
        self._later: list[str] = []
        self._spare: str | None = None  # a run directory made ahead, mkdtemp's next answer
        self._job_fds: set[int] = set()  # the session agent's fds that hold its background jobs
        self._which: dict[str, str | None] = {}
        self.use_session = session
        self._session: ssh_session.Session | None = None
        self._record_ahead: dict[str, str | None] | None = None  # the machine record's files, read at open
        self.keepalive_s = keepalive_s or KEEPALIVE_S
        self.silent_after_s = silent_after_s or SILENT_AFTER_S
        self._heartbeat: Heartbeat | None = None

    @property
    def session(self) -> ssh_session.Session | None:
        """The session agent's channel, None without one (a channel per command)."""
        return self._session

    @property
    def where(self) -> str:
        return f"{self.user + '@' if self.user else ''}{self.host}:{self.port}"

    def _fail(self, message: str) -> TargetError:
        return TargetError(f"target {self.name} ({self.where}): {message}")

    # -- lifecycle
    def open(self) -> None:
        if self._client is not None and self._client.get_transport() and self._client.get_transport().is_active():
            return
        # A board that answers no step of the connection for as long as it may be silent is not answering.
        client = connect(self._fail, self.host, self.port, self.user, self.identity, self.known_hosts,
                         min(CONNECT_TIMEOUT, self.silent_after_s))
        self._client = client
        if self._heartbeat is not None:
            self._heartbeat.stop()
        self._heartbeat = Heartbeat(client.get_transport(), self.keepalive_s)
        # Another connection: maybe a rebooted or reinstalled board.
        self._pending, self._uname, self.record, self._which, self._record_ahead = [], None, None, {}, None
        self._later, self._spare, self._job_fds, self.answers = [], None, set(), {}
        self._session = None
        basics, token = self._basics_command()
        checked = self._start_session(basics) if self.use_session else None
        self._check_basics(checked or self._exec_plain(basics), token)
        self._remove_stale_run_dirs()

    def _remove_stale_run_dirs(self) -> None:
        """The run directories an rtscope of this host left when it was killed (-9: it could not remove its own),
        removed with the next command sent; those of a live rtscope, or of another host, are left alone."""
        listed = self.answers.pop(RUN_DIRS, None)
        gone = []
        for name in (listed.stdout.split() if listed is not None else []):
            found = owner_of(RUN_DIR_PREFIX, name)
            if found is not None and found.gone:
                gone.append(shlex.quote(posixpath.join(self.workdir, name)))
        if gone:
            with self._lock:
                self._later.append(f"rm -rf -- {' '.join(gone)}; ")

    def _start_session(self, first: str) -> Completed | None:
        """The agent on its channel, running the helper `first` at once (its result); where the agent cannot
        run, a warning, None, and a channel per command from then on."""
        try:
            self._session, (out, err, rc) = ssh_session.Session.start(self.transport, first)
            self._session.silence = self._check_silence
        except ssh_session.Unavailable as e:
            self.use_session = False
            print(f"rtscope: warning: target {self.name} ({self.where}): the session agent cannot run there: {e}; "
                  "each command opens its own SSH channel instead, starting the login shell each time (slower)",
                  file=sys.stderr)
            return None
        return Completed(["sh", "-c", first], rc, out.decode(errors="replace"), err.decode(errors="replace"))

    def _basics_command(self) -> tuple[str, str]:
        """The check of the target (setsid there, the workdir writable), uname and the machine record's files,
        then the commands of AT_OPEN and the list of run directories (each framed by the token; its status after
        it); the check's status."""
        record, token = self._record_command()
        listing = ["sh", "-c", 'cd "$1" 2>/dev/null && for d in rtscope-run-*; do [ -d "$d" ] && echo "$d"; done; true',
                   "sh", self.workdir]
        extra = "".join(f"printf '\\n@@%s:%s\\n' {token} {shlex.quote(name)}; {shlex.join(argv)} 2>/dev/null; "
                        f"printf '\\n@@%s;%s\\n' {token} $?; "
                        for name, argv in [*AT_OPEN.items(), (RUN_DIRS, listing)])
        return ("{ command -v setsid >/dev/null && command -v mktemp >/dev/null && "
                f"mkdir -p {shlex.quote(self.workdir)} && test -w {shlex.quote(self.workdir)} "
                "&& echo ok && uname -s && uname -n && uname -r && uname -v && uname -m && " + record
                + "; }; rc=$?; " + extra + "exit $rc"), token

    def _check_basics(self, proc: Completed, token: str) -> None:
        """_basics_command's answer: uname, the record's files and the AT_OPEN answers kept, or a clear error."""
        text, _, extra = proc.stdout.partition(f"\n@@{token}:")
        for name, out, rc in re.findall(rf"(.*?)\n(.*?)\n@@{token};(\d+)\n(?:\n@@{token}:|$)", extra, re.S):
            self.answers[name] = Completed(AT_OPEN.get(name, []), int(rc), out, "")
        proc = Completed(proc.argv, proc.returncode, text, proc.stderr)
        head, mark, _ = proc.stdout.partition(f"\n@@{token} ")
        if mark:
            self._record_ahead = self._record_parse(proc.stdout, token)
            self.boot_id = (self._record_ahead.pop(BOOT_ID, None) or "").strip() or None
        lines = head.splitlines()
        if proc.returncode == 0 and len(lines) == 6 and lines[0] == "ok":
            self._uname = dict(zip(("sysname", "nodename", "release", "version", "machine"), lines[1:]))
        if proc.returncode != 0 or "ok" not in proc.stdout:
            has = self._exec_plain("command -v setsid")
            if has.returncode != 0:
                raise self._fail("the target has no setsid (util-linux or busybox), which rtscope needs to stop "
                                 "what it starts there: sudo apt-get install -y util-linux")
            raise self._fail(f"workdir {self.workdir} cannot be created or is not writable for "
                             f"{self.user or 'this user'}: {proc.said()}; set workdir in the target's table")

    def close(self) -> None:
        # What is owed: the last run directory removed (a directory owed at a head was never made).
        with self._lock:
            last = "".join(self._later) + (f"rm -rf -- {shlex.quote(self._spare)}; " if self._spare else "")
            self._pending, self._later, self._spare = [], [], None
        if last and self._session is None and self._client is not None and self._client.get_transport() \
                and self._client.get_transport().is_active():
            self._exec_quietly(last)
        with self._lock:
            if self._session is not None:
                self._session.close(last)  # sent, not waited for: no round trip
                self._session = None
            if self._sftp is not None:
                try:
                    self._sftp.close()
                except (OSError, EOFError, paramiko.SSHException):
                    pass
                self._sftp = None
            if self._client is not None:
                self._client.close()
                self._client = None
            if self._heartbeat is not None:
                self._heartbeat.stop()
                self._heartbeat = None

    def reconnect(self, within_s: float) -> bool:
        """Target.reconnect, keeping what is owed to the target (the interrupted run's directory removed) for the
        new connection: a board that rebooted keeps its disk."""
        with self._lock:
            owed = "".join(self._later) + (f"rm -rf -- {shlex.quote(self._spare)}; " if self._spare else "")
            self._later, self._spare = [], None
        rebooted = super().reconnect(within_s)
        if owed:
            with self._lock:
                self._later.append(owed)
        return rebooted

    def _check_silence(self) -> None:
        """Raise ssh_session.Silent when the target has answered no keepalive for longer than its bound."""
        beat = self._heartbeat
        if beat is not None and beat.silent_for() > self.silent_after_s:
            raise ssh_session.Silent(beat.silent_for())

    def _silent(self, seconds: float, what: str) -> TargetSilent:
        """The connection of a target that stopped answering closed at once (nothing can be sent to it); the
        error says for how long it was silent. What runs there is killed by its supervisor once it answers again
        (it reads the end of its connection), or was lost with a reboot."""
        since = time.strftime("%H:%M:%S", time.localtime(time.time() - seconds))
        with self._lock:
            self._session, self._sftp, client, self._client = None, None, self._client, None
            self._pending, self._later, self._spare = [], [], None
        if self._heartbeat is not None:
            self._heartbeat.stop()
            self._heartbeat = None
        if client is not None:
            client.close()
        return TargetSilent(f"target {self.name} ({self.where}) is not answering: silent for {seconds:.0f} s "
                            f"(since {since}; no answer to the keepalives sent every {self.keepalive_s:g} s) while "
                            f"running {what}; its connection is closed, and what ran there is killed when it "
                            "answers again (bound: silent_after_s in the target's table, "
                            f"{self.silent_after_s:g} s)")

    def interrupt(self) -> None:
        super().interrupt()
        session = self._session
        if session is not None:
            session.stop()  # the agent's supervisor stops the command's whole group
        with self._lock:
            chans = list(self._channels)
        for chan in chans:
            try:
                chan.shutdown_write()  # the supervisor stops the command's whole group
            except (OSError, EOFError, paramiko.SSHException):
                pass

    @property
    def transport(self) -> paramiko.Transport:
        if self._client is None:
            self.open()
        t = self._client.get_transport()
        if t is None or not t.is_active():
            raise TargetLost(f"target {self.name} ({self.where}): the connection was lost")
        return t

    def sftp(self) -> paramiko.SFTPClient:
        if self._pending:  # a file may go into a run directory not made yet
            self._exec_plain(":")
        if self._sftp is None:
            try:
                self._sftp = self._client.open_sftp() if self._client else (self.open() or self._client.open_sftp())
                self._sftp.get_channel().settimeout(self.silent_after_s)  # a transfer to a hung board ends too
            except (paramiko.SSHException, OSError, EOFError) as e:
                raise self._fail(f"SFTP is not available: {e}") from None
        return self._sftp

    # -- commands
    def _open_channel(self, command: str) -> paramiko.Channel:
        with self._lock:
            owed, self._pending, self._later = self._pending + self._later, [], []
        try:
            chan = self.transport.open_session(timeout=CHANNEL_OPEN_TIMEOUT_S)
            chan.exec_command("".join(owed) + command)
        except (paramiko.SSHException, OSError, EOFError) as e:
            raise self._fail(f"cannot start a command: {e}") from None
        with self._lock:
            self._channels.add(chan)
        return chan

    def _collect(self, chan: paramiko.Channel, deadline: float | None, what: str) -> tuple[bytes, bytes, int]:
        out, err = bytearray(), bytearray()
        last_data = time.monotonic()
        while True:
            while chan.recv_ready():
                out += chan.recv(1 << 16)
                last_data = time.monotonic()
            while chan.recv_stderr_ready():
                err += chan.recv_stderr(1 << 16)
                last_data = time.monotonic()
            # sshd reports the exit status when the command ends, which can be before all its output has come
            # (a sample file sent back waits for the window): the output is whole at EOF. A process that left
            # the command's session and holds its output open would withhold EOF: then EXIT_DRAIN of silence.
            if chan.exit_status_ready() and not chan.recv_ready() and not chan.recv_stderr_ready() and (
                    chan.eof_received or chan.closed or time.monotonic() - last_data > EXIT_DRAIN):
                return bytes(out), bytes(err), chan.recv_exit_status()
            if chan.closed or not self._client or not self._client.get_transport() \
                    or not self._client.get_transport().is_active():
                raise TargetLost(f"target {self.name} ({self.where}): the connection was lost while running {what}")
            if deadline is not None and time.monotonic() > deadline:
                raise TimeoutError
            try:
                self._check_silence()
            except ssh_session.Silent as e:
                raise self._silent(e.args[0], what) from None
            ssh_session.wait_readable(chan)

    def _stop(self, chan: paramiko.Channel) -> None:
        """Close the supervisor's stdin (it kills the group) and wait for its report."""
        try:
            chan.shutdown_write()
            deadline = time.monotonic() + STOP_WAIT
            while not chan.exit_status_ready() and time.monotonic() < deadline and not chan.closed:
                time.sleep(0.05)
        except (OSError, EOFError, paramiko.SSHException):
            pass

    def _release(self, chan: paramiko.Channel) -> None:
        with self._lock:
            self._channels.discard(chan)
        chan.close()

    @contextmanager
    def _agent(self) -> Iterator[ssh_session.Session | None]:
        """The session, held for one request; None when there is none or another thread holds it (that
        command takes a channel of its own). An agent that ended (killed on the target) is started again."""
        session = self._session
        if session is not None and not session.alive:
            session = self._restart_agent()
        if session is None or not session.lock.acquire(blocking=False):
            yield None
            return
        try:
            yield session
        finally:
            session.lock.release()

    def _through(self, session: ssh_session.Session, text: str, *, supervised: bool, timeout: float | None,
                 what: str, main: bool = False, retry: bool = True) -> tuple[bytes, bytes, int]:
        """`text` through the session, what is owed first; TimeoutError once a supervised command is stopped.
        An agent that had ended before it took the request (NotStarted): the request goes to a new one, once."""
        with self._lock:
            owed, later, self._pending, self._later = self._pending, self._later, [], []
        try:
            head = "".join(owed)
            if main and head:  # the agent's own shell: what is owed runs in a subshell, whose exit ends only it
                head = f"( {head}) </dev/null; "
            return session.call(head + text, supervised=supervised, later="".join(later), main=main,
                                deadline=time.monotonic() + timeout if timeout else None)
        except ssh_session.Silent as e:
            raise self._silent(e.args[0], what) from None
        except ssh_session.NotStarted:
            with self._lock:  # none of it ran: owed again, to a new agent or the next connection
                self._pending[:0], self._later[:0] = owed, later
            if retry and (fresh := self._fresh_agent()) is not None:
                try:
                    return self._through(fresh, text, supervised=supervised, timeout=timeout, what=what, main=main,
                                         retry=False)
                finally:
                    fresh.lock.release()
            return self._lost(what, later=[])
        except ssh_session.Lost:
            return self._lost(what, later)

    def _fresh_agent(self) -> ssh_session.Session | None:
        """After an agent that ended between two requests (killed on the target) while the connection lives:
        a new agent, held for one request; None when none can start or another thread holds it."""
        t = self._client.get_transport() if self._client else None
        if self.halted.is_set() or t is None or not t.is_active():   # stopped (the fleet's Ctrl-C): nothing new
            return None
        session = self._restart_agent()
        return session if session is not None and session.lock.acquire(blocking=False) else None

    def _restart_agent(self) -> ssh_session.Session | None:
        """The ended agent's session closed and a new agent started; None when none starts (the target is
        going away: what follows finds out how; the agent is tried again at the next connection)."""
        if self._session is not None:
            self._session.close()
            self._session = None
        if self.use_session:
            try:
                self._session, _ = ssh_session.Session.start(self.transport, ":")
                self._session.silence = self._check_silence
            except ssh_session.Unavailable:
                pass
        return self._session

    def _lost(self, what: str, later: list[str]) -> NoReturn:
        """The agent or the connection ended in the middle of `what`: the error that says which."""
        if later:  # not run (it runs after a reply that never came): owed to the next connection (reconnect)
            with self._lock:
                self._later.insert(0, "".join(later))
        t = self._client.get_transport() if self._client else None
        if t is not None and t.is_active():
            raise self._fail(f"the session agent ended while running {what}") from None
        raise TargetLost(f"target {self.name} ({self.where}): the connection was lost while running "
                         f"{what}") from None

    def _exec_plain(self, command: str, timeout: float = 60) -> Completed:
        """A short helper command of rtscope's own (no supervisor needed: it cannot outlive its output)."""
        with self._agent() as session:
            if session is not None:
                try:
                    out, err, rc = self._through(session, command, supervised=False, timeout=timeout,
                                                 what="a helper command")
                except TimeoutError:
                    raise self._fail(f"helper command did not answer within {timeout:.0f} s: {command[:80]}") from None
                return Completed(["sh", "-c", command], rc, out.decode(errors="replace"), err.decode(errors="replace"))
        chan = self._open_channel(command)
        try:
            out, err, rc = self._collect(chan, time.monotonic() + timeout, "a helper command")
        except TimeoutError:
            raise self._fail(f"helper command did not answer within {timeout:.0f} s: {command[:80]}") from None
        finally:
            self._release(chan)
        return Completed(["sh", "-c", command], rc, out.decode(errors="replace"), err.decode(errors="replace"))

    def _supervised(self, argv: list[str], cwd: str, stdin_path: str, log: str) -> paramiko.Channel:
        command = "exec sh -c " + shlex.quote(SUPERVISOR) + " rtscope " + shlex.join([cwd, stdin_path, log, *argv])
        return self._open_channel(command)

    def run(self, argv, *, timeout=None, stdin=None, cwd=None, binary=False, read_first: list[str] | None = None,
            bring_back: list[str] | None = None) -> Completed:
        """The command under the supervisor. With read_first / bring_back (run_probe): those files read just
        before it starts, and those brought back after it ends, in the same round trip (Completed.read_first,
        Completed.brought)."""
        stdin_path = "/dev/null"
        inline = stdin is not None and self._session is not None and len(stdin) <= INLINE_STDIN
        if stdin is not None:
            stdin_path = posixpath.join(self.workdir, f".stdin-{secrets.token_hex(6)}")
            if not inline:
                self._put_bytes(stdin, stdin_path)
        batch = read_first is not None or bring_back is not None
        token = secrets.token_hex(8)
        args = [cwd or self.workdir, stdin_path, "-", *argv]
        if batch:
            first, back = list(read_first or []), list(bring_back or [])
            if any("\n" in p for p in first + back):
                raise self._fail(f"a file name with a newline cannot be read or fetched: {first + back}")
            args = [token, "\n".join(first), "\n".join(back), *args]
        name = posixpath.basename(argv[0])
        with self._agent() as session:
            if session is not None:
                out, err, rc = self._run_in(session, args, batch, stdin if inline else None, stdin_path, timeout, name)
            else:
                if inline:
                    self._put_bytes(stdin, stdin_path)
                out, err, rc = self._run_on_channel(args, batch, stdin is not None, stdin_path, timeout, name)
        read, brought = None, None
        if batch:
            read, out, brought = unbatch(token, out)
        return Completed(list(argv), rc, out if binary else out.decode(errors="replace"),
                         err.decode(errors="replace"), read, brought)

    def _run_in(self, session: ssh_session.Session, args: list[str], batch: bool, stdin: bytes | None,
                stdin_path: str, timeout: float | None, name: str) -> tuple[bytes, bytes, int]:
        """run() through the session: the stdin file written and removed in the same request."""
        quoted = shlex.quote(stdin_path)
        text = (f"printf {printf_format(stdin)} >{quoted} || exit 125; " if stdin is not None else "") + \
            f"{'batch' if batch else 'supervise'} {shlex.join(args)}; rc=$?; " + \
            (f"rm -f {quoted}; " if stdin_path != "/dev/null" else "") + "exit $rc"
        try:
            return self._through(session, text, supervised=True, timeout=timeout, what=name)
        except TimeoutError:
            raise CommandTimedOut(f"{name} did not finish within {timeout:.0f} s on target {self.name}; stopped "
                                 "(the target answers)") from None

    def _run_on_channel(self, args: list[str], batch: bool, has_stdin: bool, stdin_path: str,
                        timeout: float | None, name: str) -> tuple[bytes, bytes, int]:
        """run() on a channel of its own (no session): the supervisor (or batch) by the login shell."""
        chan = self._open_channel("exec sh -c " + shlex.quote(BATCH if batch else SUPERVISOR) + " rtscope "
                                  + shlex.join(args))
        try:
            return self._collect(chan, time.monotonic() + timeout if timeout else None, name)
        except TimeoutError:
            self._stop(chan)
            raise CommandTimedOut(f"{name} did not finish within {timeout:.0f} s on target {self.name}; stopped "
                                 "(the target answers)") from None
        except BaseException:
            self._stop(chan)
            raise
        finally:
            self._release(chan)
            if has_stdin:
                self._exec_quietly(f"rm -f {shlex.quote(stdin_path)}")

    def run_probe(self, argv, *, timeout, cwd, outputs, into) -> ProbeRun:
        """One channel: the run directory made (owed since mkdtemp), the state read, the command, its files."""
        state_paths = self.state_paths()
        when = datetime.now(timezone.utc)
        proc = self.run(argv, timeout=timeout, cwd=cwd, read_first=state_paths, bring_back=outputs)
        for remote, data in (proc.brought or {}).items():
            if data is not None:  # an absent output is for collect() to judge
                (Path(into) / posixpath.basename(remote)).write_bytes(data)
        return ProbeRun(proc, proc.read_first or {}, when)

    def _exec_quietly(self, command: str) -> None:
        try:
            self._exec_plain(command)
        except (TargetError, OSError, EOFError, paramiko.SSHException):
            pass

    def spawn(self, argv, *, cwd, log) -> "SshProcess | SessionJob":
        """A background process group: a job of the session agent (one request, no channel), else on a channel
        of its own whose supervisor watches it."""
        fd = next((n for n in JOB_FDS if n not in self._job_fds), None)
        if self._session is not None and fd is not None:
            self._job_fds.add(fd)
            try:
                out = self._job_call(f"jobstart {fd} {shlex.join([cwd, log, *argv])}", "starting " + argv[0])
            except BaseException:
                self._job_fds.discard(fd)
                raise
            words = out.stdout.split()
            if out.returncode == 0 and len(words) == 4 and words[0] == "rtscope-pid":
                with self._lock:
                    self._later.append(f"rm -f -- {shlex.quote(words[3])}; ")  # its FIFO: open, no longer named
                return SessionJob(self, self._session, fd, list(argv), int(words[1]), int(words[2]), log)
            self._job_fds.discard(fd)  # (no mkfifo there?) a channel of its own, which says what is wrong
        self.check(["mkdir", "-p", cwd], "creating the directory of a background process")
        chan = self._supervised(list(argv), cwd, "/dev/null", log)
        first = b""
        deadline = time.monotonic() + 30
        while b"\n" not in first and time.monotonic() < deadline:
            if chan.recv_ready():
                first += chan.recv(256)
            elif chan.exit_status_ready():
                break
            else:
                ssh_session.wait_readable(chan)
        words = first.decode(errors="replace").split()
        if len(words) < 2 or words[0] != "rtscope-pid":
            err = chan.recv_stderr(4096).decode(errors="replace") if chan.recv_stderr_ready() else ""
            self._release(chan)
            raise self._fail(f"cannot start {argv[0]} in the background: {err.strip() or 'no answer'}")
        return SshProcess(self, chan, list(argv), int(words[1]), log)

    def _job_call(self, text: str, what: str) -> Completed:
        """A request about the session's background jobs, in the agent's own shell; it waits for the session
        when another thread holds it (a job has no channel to go by instead)."""
        session = self._session
        if session is None or not session.alive:
            raise self._fail(f"the session agent ended before {what}")
        with session.lock:
            try:
                out, err, rc = self._through(session, text, supervised=False, timeout=60, what=what, main=True)
            except TimeoutError:
                raise self._fail(f"no answer within 60 s while {what}") from None
        return Completed(["sh", "-c", text], rc, out.decode(errors="replace"), err.decode(errors="replace"))

    # -- files
    def _put_bytes(self, data: bytes, path: str) -> None:
        try:
            with self.sftp().open(path, "wb") as f:
                f.write(data)
        except OSError as e:
            raise self._fail(f"cannot write {path}: {e.strerror or e}") from None

    def put(self, local_path, remote_path, mode=0o644) -> None:
        tmp = f"{remote_path}.part-{secrets.token_hex(4)}"
        sftp = self.sftp()
        try:
            sftp.put(str(local_path), tmp)
            sftp.chmod(tmp, mode)
            sftp.posix_rename(tmp, remote_path)
        except OSError as e:
            try:
                sftp.remove(tmp)
            except OSError:
                pass
            hint = " (is the target's disk full?)" if "failure" in str(e).lower() else ""
            raise self._fail(f"cannot copy {Path(local_path).name} to {remote_path}: {e.strerror or e}{hint}") from None

    def get(self, remote_path, local_path) -> None:
        try:
            self.sftp().get(remote_path, str(local_path))
        except OSError as e:
            raise self._fail(f"cannot fetch {remote_path}: {e.strerror or e}") from None

    def read_files(self, paths):
        if not paths:
            return {}
        token = secrets.token_hex(8)
        script = READ_FUNCTION + 'tok=$1; shift; for f; do readfile "$tok" "$f"; done'
        proc = self._exec_plain(f"sh -c {shlex.quote(script)} sh {shlex.join([token, *paths])}")
        return parse_read(proc.stdout, token, paths)

    def record_files(self):
        """The record's base files and the governor of every CPU there (online or not): read when the target
        was opened (in the round trip that checked it) for the first snapshot, else in one round trip."""
        got, self._record_ahead = self._record_ahead, None
        if got is None:
            command, token = self._record_command()
            got = self._record_parse(self._exec_plain(command).stdout, token)
        return got

    def _record_command(self) -> tuple[str, str]:
        token = secrets.token_hex(8)
        cpus = self.sys_path("sys/devices/system/cpu")
        script = READ_FUNCTION + ('tok=$1; cpus=$2; shift 2; '
                                  'for f in "$@" "$cpus"/cpu[0-9]*/cpufreq/scaling_governor; do readfile "$tok" "$f"; done')
        base = list(self._machine_paths(list(sysinfo.BASE_FILES)).values())
        return f"sh -c {shlex.quote(script)} sh {shlex.join([token, cpus, *base, BOOT_ID])}", token

    def _record_parse(self, text: str, token: str) -> dict[str, str | None]:
        got = parse_read(text, token)
        online = self._machine_paths(["sys/devices/system/cpu/online"])["sys/devices/system/cpu/online"]
        governors = [sysinfo.governor_file(c) for c in sysinfo.parse_cpu_list(got.get(online))]
        for path in self._machine_paths(governors).values():
            got.setdefault(path, None)  # no cpufreq for that CPU: nothing to read again
        return got

    def write_file(self, path, text) -> None:
        self.check(["sh", "-c", 'printf "%s" "$2" > "$1"', "sh", path, text], f"writing {path}")

    def which(self, command):
        """Asked once per connection (each run of a peer tool asks whether it is installed)."""
        if command not in self._which:
            proc = self._exec_plain(f"command -v {shlex.quote(command)}")
            found = proc.stdout.strip()
            self._which[command] = found if proc.returncode == 0 and found else None
        return self._which[command]

    def mkdtemp(self, prefix="rtscope-run-", parent=None):
        """A new directory's name (random, as mktemp's); it is made, mode 700, by the next command sent, so that
        it exists before anything uses it, without a round trip of its own. That command fails (exit 125,
        the reason on stderr) when it cannot be made. With the session, a run directory is made ahead, after
        the reply of the request that follows (`_later`), so that a run's head usually finds it made (a test,
        no process)."""
        default = parent is None and prefix == RUN_DIR_PREFIX
        parent = parent or self.workdir
        if default:  # its owner in its name: a killed rtscope's are removed at the next connection from this host
            prefix = owned_name(prefix)
        made = (self._spare if default else None) or posixpath.join(parent, prefix + secrets.token_hex(6))
        quoted = shlex.quote(made)
        with self._lock:
            self._pending.append(f"[ -d {quoted} ] || {{ mkdir -m 700 -- {quoted} 2>/dev/null || {{ mkdir -p -- "
                                 f"{shlex.quote(parent)} && mkdir -m 700 -- {quoted}; }}; }} || {{ echo 'rtscope: "
                                 f"cannot create the run directory {made} on the target' >&2; exit 125; }}; ")
            self._spare = None
            if default and self._session is not None:
                self._spare = posixpath.join(parent, prefix + secrets.token_hex(6))
                self._later.append(f"mkdir -m 700 -- {shlex.quote(self._spare)} 2>/dev/null; ")
        return made

    def remove_tree(self, path) -> None:
        """Removed by the next command sent (after its reply with the session, else at its head), or when the
        target is closed."""
        with self._lock:
            self._later.append(f"rm -rf -- {shlex.quote(path)}; ")

    def free_bytes(self, path):
        proc = self._exec_plain(f"df -Pk {shlex.quote(path)}")
        try:
            return int(proc.stdout.strip().splitlines()[-1].split()[3]) * 1024
        except (IndexError, ValueError):
            return None

    def uname(self):
        if self._uname is None:
            proc = self._exec_plain("uname -s; uname -n; uname -r; uname -v; uname -m")
            lines = proc.stdout.splitlines()
            if proc.returncode != 0 or len(lines) < 5:
                raise self._fail(f"uname failed: {proc.said()}")
            self._uname = dict(zip(("sysname", "nodename", "release", "version", "machine"), lines))
        return self._uname


class SshProcess:
    """A background process group on an SSH target, held by its supervisor's channel."""

    def __init__(self, target: SshTarget, chan: paramiko.Channel, argv: list[str], pid: int, log: str):
        self.target, self.chan, self.argv, self.pid, self.log = target, chan, argv, pid, log

    def running(self) -> bool:
        return not self.chan.exit_status_ready()

    def exit_code(self) -> int | None:
        return self.chan.recv_exit_status() if self.chan.exit_status_ready() else None

    def members(self) -> int:
        proc = self.target._exec_plain(f"sh -c {shlex.quote(MEMBERS_FUNCTION + 'members ' + str(self.pid))}")
        try:
            return int(proc.stdout.strip())
        except ValueError:
            return 0

    def stop(self) -> None:
        self.target._stop(self.chan)
        err = self.chan.recv_stderr(1 << 16).decode(errors="replace") if self.chan.recv_stderr_ready() else ""
        self.target._release(self.chan)
        if "survived" in err:
            raise self.target._fail(err.strip().splitlines()[-1])

    def log_tail(self, chars: int = 600) -> str:
        text = self.target.read_files([self.log]).get(self.log) or ""
        return text.strip()[-chars:]


class SessionJob:
    """A background process group on an SSH target, a job of the session agent: started, asked and stopped by
    requests (ssh_shell.JOBS_FUNCTION); killed by its watcher when the agent ends, however it ends."""

    def __init__(self, target: SshTarget, session: ssh_session.Session, fd: int, argv: list[str], pid: int,
                 watcher: int, log: str):
        self.target, self.session, self.fd, self.argv, self.pid, self.watcher, self.log = \
            target, session, fd, argv, pid, watcher, log
        self._state: tuple[float, int | None] | None = None  # (when, exit status or None while it runs)
        self._stopped = False

    def _ask(self, text: str, what: str) -> str:
        """`text` after the job's state (kept); the rest of the answer. A job whose agent ended was killed."""
        if self._stopped or self.session is not self.target.session:
            self._state = (time.monotonic(), self._state[1] if self._state and self._state[1] is not None else -1)
            return ""
        out = self.target._job_call(f"jobstate {self.pid}; {text}", what).stdout
        state, _, rest = out.partition("\n")
        self._state = (time.monotonic(), None if state.strip() == "-" else int(state or -1))
        return rest

    def running(self) -> bool:
        if self._state is None or time.monotonic() - self._state[0] > JOB_FRESH:
            self._ask(":", f"asking about {self.argv[0]}")
        return self._state[1] is None

    def exit_code(self) -> int | None:
        if self._state is None or self._state[1] is None:
            self._ask(":", f"asking about {self.argv[0]}")
        return self._state[1]

    def members(self) -> int:
        try:
            return int(self._ask(f"members {self.pid}", f"counting the processes of {self.argv[0]}").strip() or 0)
        except ValueError:
            return 0

    def stop(self) -> None:
        if self._stopped:
            return
        if self.session is not self.target.session:  # its agent ended: its watcher killed it
            self._stopped = True
            return
        proc = self.target._job_call(f"jobstop {self.fd} {self.pid} {self.watcher}", f"stopping {self.argv[0]}")
        self._stopped = True
        state = proc.stdout.strip()
        self._state = (time.monotonic(), int(state) if state.lstrip("-").isdigit() else -1)
        self.target._job_fds.discard(self.fd)
        if proc.returncode != 0:
            raise self.target._fail(proc.said())

    def log_tail(self, chars: int = 600) -> str:
        text = self.target.read_files([self.log]).get(self.log) or ""
        return text.strip()[-chars:]
