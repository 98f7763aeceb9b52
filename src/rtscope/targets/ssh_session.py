"""The session agent: one SSH channel per target for a whole experiment, carrying every command.

A channel costs round trips (open it, exec, wait for the end) and each exec starts the target user's login
shell with its rc files (bash sources ~/.bashrc for a command from sshd; a `pyenv init` there costs ~170 ms).
So SshTarget opens one channel when it connects and starts this agent on it: the login shell runs once, then
`exec env -i PATH=... sh -c AGENT`, a POSIX sh loop whose environment holds no ENV or BASH_ENV, so that no rc
file runs again. The agent reads requests on its standard input and streams each command's output back as
the command writes it; a command then costs one round trip.

    request:  "@@q TOKEN KIND\n" the shell text ["\n@@TOKEN;\n" text for later] "\n@@TOKEN.\n"
              (KIND p: a helper, its stdin /dev/null; s: under supervise, which a "stop" line stops;
               m: the agent's background jobs, in its own shell; l: the last, as p, sent as the channel
               closes: no "taken" line, whose write would end the agent before it runs the text)
    reply:    stdout: "@@TOKEN+\n" once the whole request is read, the text's stdout, then "@@TOKEN=STATUS\n";
              stderr: the text's stderr, then "@@TOKEN=\n"

The first line of a reply says that the agent took the request: a channel that ends before it never ran the
request (an agent killed between two requests, whose end had not reached rtscope yet: NotStarted), so the
request can be sent again to a new agent.

Each request's text runs in a subshell (its `cd`, `exit` and variables stay there), with the functions of
ssh_shell.py defined once. The text for later runs after the reply, while rtscope takes the result in: what
need not delay it (the last run directory removed, the next one made ahead). TOKEN is random per request and never seen by the command, so its output cannot
end the reply early. A command is stopped (a timeout, Ctrl-C, SIGTERM, the fleet's interrupt) by the line
"stop", which supervise's watcher reads while the command runs (between commands the agent ignores it);
when the channel ends (rtscope closes it, is killed, the network goes) the watcher reads end of file and
kills the command's whole session, as on a channel of its own. Host keys are verified when the connection
is made (ssh.connect); nothing here is secret, and nothing secret passes through.
"""

from __future__ import annotations

import secrets
import select
import shlex
import threading
import time
from typing import Callable

import paramiko

from .ssh_shell import BATCH_FUNCTION, JOBS_FUNCTION, READ_FUNCTION, SUPERVISE_FUNCTION


def wait_readable(chan: paramiko.Channel, timeout_s: float = 0.05) -> None:
    """Until the channel has something to read (or closes), at most timeout_s. poll, not select: select fails
    on a descriptor above 1023, which a controller of many boards (a socket and a channel pipe each) reaches."""
    poller = select.poll()
    poller.register(chan.fileno(), select.POLLIN)
    poller.poll(timeout_s * 1000)

READY_TIMEOUT = 30.0  # seconds for the login shell (rc files included) to start the agent
STOP_WAIT = 15.0      # seconds for a stopped command's reply
HELLO = b"@@rtscope-session "

# $1 TOKEN and $2 a first request's text (optional): run before the loop, so that the check of the target
# costs no round trip of its own.
AGENT = SUPERVISE_FUNCTION + READ_FUNCTION + BATCH_FUNCTION + JOBS_FUNCTION + r'''
reply() { printf '@@%s=%s\n' "$1" "$2"; printf '@@%s=\n' "$1" >&2; }
printf '@@rtscope-session %s\n' "$$"
if [ $# -ge 2 ]; then printf '@@%s+\n' "$1"; ( eval "$2" ) </dev/null; reply "$1" $?; fi
while IFS= read -r head; do
  case $head in "@@q "*) ;; *) continue ;; esac
  set -f; set -- $head; set +f
  tok=$2; kind=$3; script=; later=; part=script
  while :; do
    IFS= read -r l || exit 0
    [ "$l" = "@@$tok." ] && break
    if [ "$l" = "@@$tok;" ]; then part=later
    elif [ $part = script ]; then script="$script$l
"
    else later="$later$l
"
    fi
  done
  [ "$kind" = l ] || printf '@@%s+\n' "$tok"
  case $kind in
    s) ( closejobs; eval "$script" ) ;;
    m) eval "$script" ;;
    *) ( closejobs; eval "$script" ) </dev/null ;;
  esac
  reply "$tok" $?
  [ -z "$later" ] || ( closejobs; eval "$later" ) </dev/null >/dev/null 2>&1
done
'''

# What the login shell runs: the agent, in a sh whose environment is the login shell's PATH, HOME and user
# (the PATH the rc files made, where the target's tools are found) and nothing else.
LAUNCH = "exec env -i PATH=\"$PATH\" HOME=\"$HOME\" USER=\"$USER\" LOGNAME=\"$LOGNAME\" sh -c " + shlex.quote(AGENT) \
    + " rtscope-session"


class Unavailable(Exception):
    """The agent does not run on this target (the message says why): the caller falls back to a channel per
    command."""


class Lost(Exception):
    """The channel or the agent ended in the middle of a request."""


class NotStarted(Lost):
    """The channel or the agent ended before the agent took the request: it did not run."""


class Silent(Exception):
    """The target has not answered the connection's keepalives for longer than its bound (Session.silence)."""


class Session:
    """The agent on one channel. One request at a time (`lock`); stop() may come from any thread."""

    def __init__(self, chan: paramiko.Channel):
        self.chan = chan
        self.lock = threading.Lock()
        self._sending = threading.Lock()  # a stop from another thread never lands inside a request
        self.requests = 0
        self.pid: int | None = None
        # Raises Silent when the target has not answered for too long (SshTarget's keepalives); None: no bound.
        self.silence: Callable[[], None] | None = None

    @classmethod
    def start(cls, transport: paramiko.Transport, first: str,
              timeout: float = READY_TIMEOUT) -> tuple["Session", tuple[bytes, bytes, int]]:
        """Open the channel and start the agent, which runs the helper text `first` at once: the session and
        that text's stdout, stderr and status. Unavailable when the agent does not say it runs within `timeout`."""
        tok = secrets.token_hex(8)
        try:
            chan = transport.open_session(timeout=timeout)
            chan.exec_command(f"{LAUNCH} {tok} {shlex.quote(first)}")
        except (paramiko.SSHException, OSError, EOFError) as e:
            raise Unavailable(f"cannot open its channel: {e}") from None
        got, err = bytearray(), bytearray()
        deadline = time.monotonic() + timeout
        while HELLO not in got or b"\n" not in got[got.index(HELLO):]:
            if chan.recv_ready():
                got += chan.recv(1 << 16)
                continue
            if chan.recv_stderr_ready():
                err += chan.recv_stderr(1 << 16)
                continue
            if chan.exit_status_ready():
                chan.close()
                said = err.decode(errors="replace").strip() or got.decode(errors="replace").strip()
                raise Unavailable(f"the login shell could not start it (exit {chan.recv_exit_status()}: "
                                  f"{said[-300:] or 'no output'})")
            if time.monotonic() > deadline:
                chan.close()
                raise Unavailable(f"it did not start within {timeout:.0f} s")
            wait_readable(chan)
        session = cls(chan)
        line, _, rest = got[got.index(HELLO) + len(HELLO):].partition(b"\n")
        session.pid = int(line) if line.isdigit() else None
        reply = _Reply(tok)
        reply.out(bytes(rest))
        reply.err(bytes(err))  # what the rc files said, and maybe the text's stderr
        try:
            return session, session._await(reply, time.monotonic() + timeout)
        except (Lost, TimeoutError):
            session.close()
            raise Unavailable("it stopped before answering") from None

    @property
    def alive(self) -> bool:
        t = self.chan.get_transport()
        return not self.chan.closed and not self.chan.exit_status_ready() and t is not None and t.is_active()

    def call(self, script: str, *, supervised: bool, deadline: float | None, later: str = "",
             main: bool = False) -> tuple[bytes, bytes, int]:
        """Run `script` (shell text; its stdin /dev/null unless supervised; in the agent's own shell when `main`:
        the jobs' functions only), and `later` after the reply; its stdout, stderr and status.
        At `deadline`, or on any exception while waiting (Ctrl-C, SIGTERM), a supervised command is stopped
        and its reply awaited, then TimeoutError (or that exception) is raised; a helper cannot be stopped,
        so the session is closed instead. Lost when the channel or the agent ends first."""
        tok = secrets.token_hex(8)
        self.requests += 1
        try:
            with self._sending:
                self.chan.sendall(_request(tok, "s" if supervised else "m" if main else "p", script, later))
        except (OSError, EOFError, paramiko.SSHException) as e:
            raise Lost(str(e)) from None
        except BaseException:
            self.close()  # maybe half a request sent: this session cannot carry another one
            raise
        reply = _Reply(tok)
        try:
            return self._await(reply, deadline)
        except Lost as e:
            if not reply.taken:
                raise NotStarted(*e.args) from None
            raise
        except Silent:
            raise
        except BaseException:  # the deadline (TimeoutError), Ctrl-C, SIGTERM
            self._settle(reply, supervised)
            raise

    def _await(self, reply: "_Reply", deadline: float | None) -> tuple[bytes, bytes, int]:
        chan = self.chan
        while True:
            while chan.recv_ready():
                reply.out(chan.recv(1 << 16))
            while chan.recv_stderr_ready():
                reply.err(chan.recv_stderr(1 << 16))
            if reply.done:
                return reply.result()
            if not self.alive and not chan.recv_ready() and not chan.recv_stderr_ready():
                raise Lost("the channel ended")
            if deadline is not None and time.monotonic() > deadline:
                raise TimeoutError
            if self.silence is not None:
                self.silence()
            wait_readable(chan)

    def _settle(self, reply: "_Reply", supervised: bool) -> None:
        """After a timeout or an exception mid-request: stop the command and take its reply, so that the
        session can carry the next request; close the session when that fails."""
        if supervised:
            try:
                self.stop()
                self._await(reply, time.monotonic() + STOP_WAIT)
                return
            except (Lost, Silent, TimeoutError, OSError, EOFError, paramiko.SSHException):
                pass
        self.close()

    def stop(self) -> None:
        """Stop the supervised command running now, if any (from any thread)."""
        try:
            with self._sending:
                self.chan.sendall(b"stop\n")
        except (OSError, EOFError, paramiko.SSHException):
            pass

    def close(self, last: str = "") -> None:
        """End the agent: its stdin closes, it exits (a command still running is killed by its watcher, a job
        by its own). `last` (shell text: what is owed, the last run directory removed) is sent before, and not
        waited for: sshd hands it to the agent before the end of its input, and the agent runs it."""
        try:
            if last and self.alive:
                with self._sending:
                    self.chan.sendall(_request(secrets.token_hex(8), "l", last, ""))
            self.chan.shutdown_write()
        except (OSError, EOFError, paramiko.SSHException):
            pass
        self.chan.close()


def _request(tok: str, kind: str, script: str, later: str) -> bytes:
    return (f"@@q {tok} {kind}\n{script}\n" + (f"@@{tok};\n{later}\n" if later else "") + f"@@{tok}.\n").encode()


class _Stream:
    """One of a reply's streams as it comes in: its bytes, and where the end mark begins once it has come."""

    def __init__(self, mark: bytes):
        self.mark, self.data, self.end = mark, bytearray(), None

    def feed(self, data: bytes) -> None:
        start = max(0, len(self.data) - len(self.mark))  # a mark split between two reads
        self.data += data
        if self.end is None and (at := self.data.find(self.mark, start)) >= 0:
            self.end = at

    def body(self) -> bytes:
        return bytes(self.data[:self.end])


class _Reply:
    """One request's reply as it streams in: the agent's "taken" line, its stdout and stderr up to their end
    marks, and the status after the stdout mark ("@@TOKEN=STATUS\n")."""

    def __init__(self, tok: str):
        mark = f"@@{tok}=".encode()
        self.taken_line = f"@@{tok}+\n".encode()
        self.stdout, self.stderr = _Stream(mark), _Stream(mark)
        self.out, self.err = self.stdout.feed, self.stderr.feed

    @property
    def taken(self) -> bool:
        return len(self.stdout.data) >= len(self.taken_line)

    @property
    def status(self) -> int | None:
        if self.stdout.end is None:
            return None
        line, newline, _ = self.stdout.data[self.stdout.end + len(self.stdout.mark):].partition(b"\n")
        return int(line) if newline else None

    @property
    def done(self) -> bool:
        return self.stderr.end is not None and self.status is not None

    def result(self) -> tuple[bytes, bytes, int]:
        body = self.stdout.body()
        return body[len(self.taken_line):] if body.startswith(self.taken_line) else body, self.stderr.body(), \
            self.status
