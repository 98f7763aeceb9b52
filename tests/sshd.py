"""A real OpenSSH server for the target tests, on 127.0.0.1, that looks like another machine.

sshd runs in its own UTS and mount namespaces (`unshare --uts --mount`): its
own hostname, and a tmpfs over this checkout (and over the home directory), so
nothing rtscope built is visible there and every tool must be deployed. Optional: a small tmpfs as the
target's work directory (a full disk), a fake sysfs tree. Keys (host and user)
are generated per server in a temporary directory; the known_hosts file holds
the host key, so host-key verification is real. DelayRelay puts a slow link (added round-trip time) between
rtscope and such a server.
"""

from __future__ import annotations

import os
import queue
import shutil
import signal
import socket
import subprocess
import threading
import time
from pathlib import Path

from rtscope.paths import REPO_DIR
from rtscope.signals import die_with_parent

SSHD = shutil.which("sshd") or "/usr/sbin/sshd"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def keygen(path: Path) -> str:
    subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", "rtscope-test", "-f", str(path)],
                   check=True)
    return path.with_suffix(".pub").read_text().strip() if path.suffix else Path(f"{path}.pub").read_text().strip()


def run_dirs(workdir: Path, wait: float = 5.0) -> list[str]:
    """The run directories left in a target's workdir, once they are gone or `wait` seconds have passed: the
    last one is removed by a request rtscope sends as it closes the target and does not wait for."""
    deadline = time.monotonic() + wait
    while True:
        left = sorted(p.name for p in workdir.iterdir() if p.name.startswith("rtscope-run-"))
        if not left or time.monotonic() > deadline:
            return left
        time.sleep(0.05)


def available() -> str | None:
    """None when the tests can start a namespaced sshd here, else why not."""
    if os.geteuid() != 0:
        return "needs root (sshd in its own namespaces)"
    if not os.access(SSHD, os.X_OK):
        return "openssh-server is not installed (apt-get install -y openssh-server)"
    if subprocess.run(["unshare", "--uts", "--mount", "true"], capture_output=True).returncode:
        return "unshare --uts --mount is not permitted here"
    return None


class SshServer:
    def __init__(self, base: Path, hostname: str, *, workdir_bytes: int | None = None,
                 setup: tuple[str, ...] = ()):
        self.base = base
        self.hostname = hostname
        self.port = free_port()
        base.mkdir(parents=True, exist_ok=True)
        self.host_key = base / "ssh_host_ed25519_key"
        self.user_key = base / "id_ed25519"
        self.known_hosts = base / "known_hosts"
        self.workdir = base / "work"        # the target's workdir (inside the namespace: maybe a small tmpfs)
        self.workdir.mkdir(exist_ok=True)
        self.workdir_bytes = workdir_bytes
        self.setup = setup                  # more shell commands run in the namespace before sshd starts
        self.proc: subprocess.Popen | None = None
        host_pub = keygen(self.host_key)
        (base / "authorized_keys").write_text(keygen(self.user_key) + "\n")
        self.known_hosts.write_text(f"[127.0.0.1]:{self.port} {' '.join(host_pub.split()[:2])}\n")
        (base / "sshd_config").write_text("\n".join([
            f"Port {self.port}", "ListenAddress 127.0.0.1", f"HostKey {self.host_key}",
            f"PidFile {base / 'sshd.pid'}", f"AuthorizedKeysFile {base / 'authorized_keys'}",
            "PermitRootLogin prohibit-password", "PasswordAuthentication no", "KbdInteractiveAuthentication no",
            "UsePAM no", "StrictModes no", "Subsystem sftp internal-sftp", "LogLevel ERROR", "MaxSessions 50",
            "MaxStartups 50", ""]))

    @property
    def url(self) -> str:
        return f"ssh://root@127.0.0.1:{self.port}"

    def table(self, name: str, **extra) -> str:
        lines = [f"[targets.{name}]", f'url = "{self.url}"', f'identity = "{self.user_key}"',
                 f'known_hosts = "{self.known_hosts}"', f'workdir = "{self.workdir}"',
                 f'description = "test board {self.hostname}"']
        lines += [f'{k} = "{v}"' for k, v in extra.items()]
        return "\n".join(lines) + "\n"

    def start(self) -> "SshServer":
        Path("/run/sshd").mkdir(exist_ok=True)  # sshd's privilege separation directory
        # A clean home too: the target's root has no shell start-up files of this machine's root.
        setup = [f"hostname {self.hostname}", f"mount -t tmpfs -o size=1m tmpfs {REPO_DIR}",
                 f"mount -t tmpfs -o size=1m tmpfs {Path.home()}"]
        if self.workdir_bytes:
            setup.append(f"mount -t tmpfs -o size={self.workdir_bytes} tmpfs {self.workdir}")
        setup += list(self.setup)
        script = " && ".join(setup) + f" && exec {SSHD} -D -e -f {self.base / 'sshd_config'}"
        log = open(self.base / "sshd.log", "wb")
        self.proc = subprocess.Popen(["unshare", "--uts", "--mount", "--propagation", "private", "sh", "-c", script],
                                     stdout=log, stderr=log, stdin=subprocess.DEVNULL, start_new_session=True,
                                     preexec_fn=die_with_parent)  # no sshd outlives a killed test run
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"sshd exited: {(self.base / 'sshd.log').read_text()}")
            with socket.socket() as s:
                if s.connect_ex(("127.0.0.1", self.port)) == 0:
                    return self
            time.sleep(0.05)
        raise RuntimeError("sshd did not start listening")

    def namespace_processes(self, ns: str | None = None) -> dict[int, str]:
        """Processes in the target's namespaces (same UTS namespace as sshd, or `ns`), except the sshd daemon."""
        ns = ns or os.readlink(f"/proc/{self.proc.pid}/ns/uts")
        out = {}
        for entry in os.listdir("/proc"):
            if not entry.isdigit() or int(entry) == self.proc.pid:
                continue
            try:
                if os.readlink(f"/proc/{entry}/ns/uts") != ns:
                    continue
                stat = Path(f"/proc/{entry}/stat").read_text()
                cmdline = Path(f"/proc/{entry}/cmdline").read_bytes()
            except OSError:
                continue  # it ended meanwhile
            if stat[stat.rindex(")") + 2] != "Z":
                out[int(entry)] = cmdline.replace(b"\0", b" ").decode(errors="replace").strip()
        return out

    def power_off(self) -> None:
        """Like pulling the board's plug: every process of its namespace (sshd included) gets SIGKILL. The
        listener first, then until none is left: a connection it accepted meanwhile (rtscope reconnecting the
        moment its session died) would otherwise keep serving from a child forked after the scan."""
        ns = os.readlink(f"/proc/{self.proc.pid}/ns/uts")
        os.kill(self.proc.pid, signal.SIGKILL)
        self.proc.wait()
        for _ in range(100):
            left = self.namespace_processes(ns)
            if not left:
                return
            for pid in left:
                try:
                    os.kill(pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
            time.sleep(0.01)
        raise RuntimeError(f"processes of the powered-off board survived SIGKILL: {left}")

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGTERM)
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                os.killpg(self.proc.pid, signal.SIGKILL)
                self.proc.wait()


class DelayRelay:
    """A TCP relay on 127.0.0.1 to another port there, each direction delayed by `delay` seconds."""

    def __init__(self, dest_port: int, delay: float):
        self.dest_port, self.delay = dest_port, delay
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.port = self.listener.getsockname()[1]
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while True:
            try:
                client, _ = self.listener.accept()
            except OSError:
                return  # closed
            server = socket.create_connection(("127.0.0.1", self.dest_port))
            for s in (client, server):
                s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            for src, dst in ((client, server), (server, client)):
                pending: queue.Queue = queue.Queue()
                threading.Thread(target=self._read, args=(src, pending), daemon=True).start()
                threading.Thread(target=self._write, args=(dst, pending), daemon=True).start()

    def _read(self, src: socket.socket, pending: queue.Queue) -> None:
        while True:
            try:
                data = src.recv(1 << 16)
            except OSError:
                data = b""
            pending.put((time.monotonic() + self.delay, data))
            if not data:
                return

    def _write(self, dst: socket.socket, pending: queue.Queue) -> None:
        while True:
            due, data = pending.get()
            time.sleep(max(0.0, due - time.monotonic()))
            try:
                if not data:
                    dst.shutdown(socket.SHUT_WR)
                    return
                dst.sendall(data)
            except OSError:
                return

    def close(self) -> None:
        self.listener.close()


def relayed_table(server: SshServer, relay: DelayRelay, name: str, base: Path) -> str:
    """The target table of `server` reached through `relay` (its known_hosts names the relay's port)."""
    known = base / f"known_hosts_{relay.port}"
    key = server.known_hosts.read_text().split(None, 1)[1]
    known.write_text(f"[127.0.0.1]:{relay.port} {key}")
    return (server.table(name).replace(server.url, f"ssh://root@127.0.0.1:{relay.port}")
            .replace(str(server.known_hosts), str(known)))
