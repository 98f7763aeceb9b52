"""Target kind `nerves_ssh`: a running BEAM node reached through nerves_ssh, as a Nerves device has it.

    [targets.nerves_ssh]
    url = "nerves+ssh://nerves-1234.local:22"
    identity = "~/.ssh/id_ed25519"
    known_hosts = "~/.ssh/known_hosts"     # host keys are verified, never accepted blindly

nerves_ssh is an SSH daemon inside the firmware's VM: its exec channel
evaluates Elixir, and it has an SFTP subsystem. rtscope copies the harness's
object code over SFTP into a fresh directory under /tmp, loads it with one
exec (`:code.load_binary`) and removes the directory at once. Every call is
then one exec of `RtScope.Remote.json_call(...)`, which prints its answer as
one line (nerves_ssh's own echo of a result goes through `inspect`, which
shortens long strings, so results are printed instead); sample files come
back over SFTP.

One exec channel stays open while the target is open, held by
`RtScope.Remote.hold/1` with a guard on it: when rtscope closes it, or the
connection drops (rtscope killed, network gone), the guard removes the
modules and so stops any process still running them.
"""

from __future__ import annotations

import base64
import json
import posixpath
import secrets
import socket
import time
from typing import Any

import paramiko

from .. import paths
from ..errors import UsageError
from .base import TargetError, parse_url
from .beam_node import CALL_TIMEOUT, BeamNodeTarget
from .ssh import connect

REPLY = "rtscope-remote: "
HOST_ONLY = ("Elixir.RtScope.Relay",)  # modules that stay on rtscope's side
UNLOAD_WAIT = 15.0                     # seconds for the guard to remove the modules

# Loads the .beam files of DIR unless one of them is loaded already, then removes DIR. Needs no rtscope code.
LOAD = """
dir = "{dir}"
files = Path.wildcard(dir <> "/*.beam")
mods = Enum.map(files, &String.to_atom(Path.basename(&1, ".beam")))
busy = Enum.find(mods, &(:code.is_loaded(&1) != false))
said =
  if busy do
    "busy #{{inspect(busy)}}"
  else
    Enum.reduce_while(Enum.zip(files, mods), [], fn {{f, m}}, done ->
      case :code.load_binary(m, ~c"rtscope:#{{m}}", File.read!(f)) do
        {{:module, ^m}} -> {{:cont, [m | done]}}
        {{:error, why}} ->
          for d <- done, fun <- [:purge, :delete, :purge], do: apply(:code, fun, [d])
          {{:halt, "failed #{{inspect(m)}} #{{inspect(why)}} OTP #{{:erlang.system_info(:otp_release)}}"}}
      end
    end)
    |> then(fn said -> if is_list(said), do: "loaded #{{length(said)}}", else: said end)
  end
File.rm_rf!(dir)
IO.puts("{reply}" <> said)
"""

# Which of MODS are still loaded (current or old code). Needs no rtscope code.
LEFT = """
left = Enum.filter({mods}, &(:code.is_loaded(&1) != false or :erlang.check_old_code(&1)))
IO.puts("{reply}left " <> Enum.map_join(left, ",", &inspect/1))
"""


def parse_nerves_url(url: str) -> tuple[str | None, str, int]:
    """nerves+ssh://[user@]host[:port] -> (user, host, port)."""
    if not url.startswith("nerves+ssh://"):
        raise UsageError(f"invalid nerves_ssh url {url!r}: write nerves+ssh://[user@]host[:port], e.g. "
                         "nerves+ssh://nerves-1234.local:22")
    return parse_url("ssh://" + url[len("nerves+ssh://"):])


def _elixir_atoms(names: list[str]) -> str:
    return "[" + ", ".join(f':"{n}"' for n in names) + "]"


class NervesSshTarget(BeamNodeTarget):
    """A node reached through its nerves_ssh daemon (exec channel evaluating Elixir, SFTP)."""

    def __init__(self, name: str, url: str, *, identity: str | None = None, known_hosts: str | None = None,
                 **kw):
        self.user, self.host, self.port = parse_nerves_url(url)
        super().__init__(name, f"{self.host}:{self.port}", kind="nerves_ssh", **kw)
        self.identity = identity
        self.known_hosts = known_hosts
        self.facts["node_access"] = "nerves_ssh"
        self._client: paramiko.SSHClient | None = None
        self._holder: paramiko.Channel | None = None
        self._modules: list[str] = []

    def _fail(self, message: str) -> TargetError:
        return TargetError(f"target {self.name} ({self.host}:{self.port}): {message}")

    # -- lifecycle
    def open(self) -> None:
        if self._client is not None:
            return
        self._client = connect(self._fail, self.host, self.port, self.user, self.identity, self.known_hosts)
        try:
            self._load()
        except BaseException:
            self.close()
            raise

    def _load(self) -> None:
        beams = sorted(p for p in paths.beam_ebin().glob("*.beam") if p.stem not in HOST_ONLY)
        code_dir = f"/tmp/rtscope-code-{secrets.token_hex(6)}"
        try:
            sftp = self._client.open_sftp()
            sftp.mkdir(code_dir, 0o700)
            for beam in beams:
                sftp.put(str(beam), posixpath.join(code_dir, beam.name))
            sftp.close()
        except (OSError, paramiko.SSHException) as e:
            raise self._fail(f"cannot copy the harness over SFTP into {code_dir}: {e} (does the daemon offer "
                             "the sftp subsystem, as nerves_ssh does?)") from None
        said = self._exec(LOAD.format(dir=code_dir, reply=REPLY), CALL_TIMEOUT)
        if said.startswith("busy "):
            raise self._fail(f"the node already has module {said[5:]} loaded: another rtscope is measuring "
                             "there, or the firmware carries its own rtscope harness; rtscope will not replace it")
        if not said.startswith("loaded "):
            raise self._fail(f"the node cannot load the harness: {said} (older than the OTP rtscope "
                             "compiled it with?)")
        self._modules = [b.stem for b in beams]
        self._holder = self._start(f"RtScope.Remote.hold({json.dumps(self._modules)}, "
                                   f"{json.dumps(self.session_dir)})")
        answer = self._answer(self._holder, time.monotonic() + CALL_TIMEOUT)
        if json.loads(answer) != {"ok": True}:
            raise self._fail(f"could not start the guard: {answer}")

    def close(self) -> None:
        client, self._client = self._client, None
        if client is None:
            return
        holder, self._holder = self._holder, None
        left = ""
        try:
            if holder is not None:
                holder.close()  # the guard sees its channel end and removes the modules
                deadline = time.monotonic() + UNLOAD_WAIT
                while True:
                    left = self._exec(LEFT.format(mods=_elixir_atoms(self._modules), reply=REPLY), CALL_TIMEOUT,
                                      client=client).removeprefix("left ")
                    if not left or time.monotonic() > deadline:
                        break
                    time.sleep(0.2)
        except TargetError:
            pass  # the connection is gone: the guard unloads on its own
        finally:
            client.close()
        if left:
            raise self._fail(f"modules still loaded on the node: {left}")

    def interrupt(self) -> None:
        client = self._client
        if client is not None:
            client.close()  # every channel ends; the guard removes the modules and their processes

    # -- calls
    def call(self, fun: str, *args: Any, timeout: float | None = CALL_TIMEOUT) -> Any:
        if self._client is None:
            self.open()
        encoded = base64.b64encode(json.dumps(list(args)).encode()).decode()
        answer = self._exec(f'RtScope.Remote.json_call("{fun}", "{encoded}")',
                            None if timeout is None else timeout + 30)
        reply = json.loads(answer)
        if "error" in reply:
            raise self._fail(reply["error"])
        return reply["ok"]

    def get(self, remote_path: str, local_path: str) -> None:
        if self._client is None:
            self.open()
        try:
            with self._client.open_sftp() as sftp:
                sftp.get(remote_path, str(local_path))
        except (OSError, paramiko.SSHException) as e:
            raise self._fail(f"cannot fetch {remote_path}: {getattr(e, 'strerror', None) or e}") from None

    def _send_program(self, local, remote: str) -> None:
        """Over SFTP: a program is too large for an exec command."""
        try:
            with self._client.open_sftp() as sftp:
                for d in (self.session_dir, posixpath.dirname(remote)):
                    try:
                        sftp.mkdir(d, 0o700)
                    except OSError:
                        pass  # it exists
                sftp.put(str(local), remote)
                sftp.chmod(remote, 0o755)
        except (OSError, paramiko.SSHException) as e:
            raise self._fail(f"cannot copy {local.name} to {remote} over SFTP: {e}") from None

    def _start(self, code: str, client: paramiko.SSHClient | None = None) -> paramiko.Channel:
        try:
            transport = (client or self._client).get_transport()
            chan = transport.open_session()
            chan.exec_command(code)
        except (paramiko.SSHException, OSError, EOFError, AttributeError) as e:
            raise self._fail(f"the connection was lost: {e}") from None
        return chan

    def _exec(self, code: str, timeout: float | None, client: paramiko.SSHClient | None = None) -> str:
        """Evaluate `code` on the node; its one REPLY line, without the prefix."""
        chan = self._start(code, client)
        try:
            return self._answer(chan, None if timeout is None else time.monotonic() + timeout)
        except BaseException:
            self.interrupt()  # Ctrl-C, a timeout: drop the connection, the guard cleans up
            raise
        finally:
            chan.close()

    def _answer(self, chan: paramiko.Channel, deadline: float | None) -> str:
        """The REPLY line `chan` prints (complete: up to its newline), without the prefix."""
        out = bytearray()
        chan.settimeout(0.1)  # not select(): a channel's fileno() pipe, closed twice, can close a reused fd
        while True:
            try:
                data = chan.recv(1 << 16)
            except socket.timeout:
                data = None
            if data:
                out += data
                for line in out.decode(errors="replace").split("\n")[:-1]:
                    if REPLY in line:  # the daemon's echo of the exec's result may come first, on that line
                        return line.split(REPLY, 1)[1]
            elif data is not None:  # end of the channel's output
                if chan.exit_status_ready():
                    said = (out + chan.recv_stderr(1 << 16)).decode(errors="replace").strip()
                    raise self._fail(f"the node answered without a result: {said[-800:] or 'nothing'}")
                raise self._fail("the node is down or the connection to it was lost")
            if deadline is not None and time.monotonic() > deadline:
                raise self._fail("the node did not answer in time")
