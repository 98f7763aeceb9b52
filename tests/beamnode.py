"""A real second Erlang node for the BEAM node target tests: a "board" that rtscope did not start.

`elixir --sname board_N --cookie C` runs in its own mount namespace with a
tmpfs over this checkout, so none of rtscope's compiled modules is visible
there: the harness must come over the connection. Optionally a fake sysfs
tree that only the board sees (a tmpfs mounted inside its namespace), so a
governor written there can only have been written through the node, and an
OTP SSH daemon with an Elixir exec channel and SFTP, as nerves_ssh provides.

`inspect(expr)` evaluates an Elixir expression on the board from a separate
hidden node and returns what it prints: how the tests see that the board
is alive and holds nothing of rtscope afterwards.
"""

from __future__ import annotations

import itertools
import os
import shutil
import signal
import socket
import subprocess
import time
from pathlib import Path

from rtscope.paths import REPO_DIR
from rtscope.signals import die_with_parent

ELIXIR = shutil.which("elixir")
HOST = socket.gethostname().split(".")[0]   # the host part of a short node name
_serial = itertools.count(1)

# On the board: modules and processes of rtscope's harness (RtScope.* code running, or started from it).
LEFTOVERS = """
mods = for {m, _} <- :code.all_loaded(), String.starts_with?(Atom.to_string(m), "Elixir.RtScope"), do: m
ours = fn mfa -> match?({m, _, _} when is_atom(m), mfa) and String.starts_with?(Atom.to_string(elem(mfa, 0)), "Elixir.RtScope") end
procs = for p <- Process.list(), info = Process.info(p, [:current_function, :initial_call, :dictionary]), info != nil,
  ours.(info[:current_function]) or ours.(info[:initial_call]) or ours.(info[:dictionary][:"$initial_call"]), do: p
old = for m <- mods ++ [RtScope.Remote, RtScope.Exec], :erlang.check_old_code(m), do: m
IO.puts("modules=#{length(mods)} processes=#{length(procs)} old=#{length(old)}")
"""


def available() -> str | None:
    if os.geteuid() != 0:
        return "needs root (the board runs in its own mount namespace)"
    if ELIXIR is None:
        return "elixir is not installed (apt-get install -y elixir erlang-dev)"
    if subprocess.run(["unshare", "--mount", "true"], capture_output=True).returncode:
        return "unshare --mount is not permitted here"
    return None


class Board:
    def __init__(self, base: Path, *, cookie: str = "rtscope-test-cookie", fake_cpufreq: str | None = None,
                 erl_flags: str = "", ssh_port: int | None = None):
        self.base = base
        base.mkdir(parents=True, exist_ok=True)
        self.name = f"board_{os.getpid()}_{next(_serial)}"
        self.node = f"{self.name}@{HOST}"
        self.cookie = cookie
        self.cookie_file = base / "cookie"
        self.cookie_file.write_text(cookie + "\n")
        self.cookie_file.chmod(0o600)
        self.sysfs = base / "sysfs"           # empty on this side; the board's fake tree when fake_cpufreq
        self.sysfs.mkdir(exist_ok=True)
        self.fake_cpufreq = fake_cpufreq      # the board's governor, e.g. "powersave"
        self.erl_flags = erl_flags
        self.ssh_port = ssh_port
        self.proc: subprocess.Popen | None = None

    @property
    def url(self) -> str:
        return f"erlang://{self.node}"

    def table(self, name: str, **extra) -> str:
        lines = [f"[targets.{name}]", f'url = "{self.url}"', f'cookie_file = "{self.cookie_file}"',
                 f'description = "test board {self.name}"']
        if self.fake_cpufreq:
            lines.append(f'sysfs_root = "{self.sysfs}"')
        lines += [f'{k} = "{v}"' for k, v in extra.items()]
        return "\n".join(lines) + "\n"

    def nerves_table(self, name: str) -> str:
        d = self.base / "ssh"
        return (f'[targets.{name}]\nurl = "nerves+ssh://root@127.0.0.1:{self.ssh_port}"\n'
                f'identity = "{d / "id_ed25519"}"\nknown_hosts = "{d / "known_hosts"}"\n')

    def start(self) -> "Board":
        home = self.base / "home"
        home.mkdir(exist_ok=True)
        # No checkout, and a /tmp/rtscope (where runs write) of the board's own.
        setup = [f"mount -t tmpfs -o size=1m tmpfs {REPO_DIR}", "mkdir -p /tmp/rtscope",
                 "mount -t tmpfs -o size=64m tmpfs /tmp/rtscope"]
        if self.fake_cpufreq:
            cpufreq = self.sysfs / "sys/devices/system/cpu/cpu0/cpufreq"
            setup += [f"mount -t tmpfs -o size=1m tmpfs {self.sysfs}", f"mkdir -p {cpufreq}",
                      f"echo 0 > {self.sysfs}/sys/devices/system/cpu/online",
                      f"echo {self.fake_cpufreq} > {cpufreq}/scaling_governor",
                      f"echo 'performance powersave' > {cpufreq}/scaling_available_governors",
                      f"echo 600000 > {cpufreq}/cpuinfo_min_freq", f"echo 1200000 > {cpufreq}/cpuinfo_max_freq"]
        erl = ["--erl", self.erl_flags] if self.erl_flags else []
        code = "Process.sleep(:infinity)"
        if self.ssh_port:
            code = NERVES_SSH.format(port=self.ssh_port, dir=self.base / "ssh") + code
            self._ssh_keys()
        argv = [ELIXIR, "--sname", self.name, "--cookie", self.cookie, *erl, "-e", code]
        script = " && ".join(setup) + " && exec " + " ".join(map(_sh, argv))
        log = open(self.base / "board.log", "wb")
        env = {**os.environ, "HOME": str(home), "ERL_CRASH_DUMP_SECONDS": "0"}
        for var in ("ERL_FLAGS", "ERL_AFLAGS", "ELIXIR_ERL_OPTIONS"):
            env.pop(var, None)
        self.proc = subprocess.Popen(["unshare", "--mount", "--propagation", "private", "sh", "-c", script],
                                     stdout=log, stderr=log, stdin=subprocess.DEVNULL, env=env,
                                     start_new_session=True, preexec_fn=die_with_parent)
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"the board exited: {self.log()}")
            names = subprocess.run(["epmd", "-names"], capture_output=True, text=True).stdout
            if f"name {self.name} " in names and (not self.ssh_port or _listening(self.ssh_port)):
                return self
            time.sleep(0.1)
        raise RuntimeError(f"the board did not start: {self.log()}")

    def _ssh_keys(self) -> None:
        d = self.base / "ssh"
        d.mkdir(exist_ok=True)
        for key in ("ssh_host_ed25519_key", "id_ed25519"):
            if not (d / key).exists():
                subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", "rtscope-test", "-f",
                                str(d / key)], check=True)
        (d / "authorized_keys").write_text((d / "id_ed25519.pub").read_text())
        host_pub = " ".join((d / "ssh_host_ed25519_key.pub").read_text().split()[:2])
        (d / "known_hosts").write_text(f"[127.0.0.1]:{self.ssh_port} {host_pub}\n")

    def log(self) -> str:
        return (self.base / "board.log").read_text(errors="replace")[-2000:]

    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def inspect(self, expr: str) -> str:
        """Evaluate `expr` on the board (from a hidden node of its own) and return what it printed."""
        code = (f'board = :"{self.node}"; true = Node.connect(board); expr = System.fetch_env!("BOARD_EXPR"); '
                'IO.write(:erpc.call(board, fn -> {:ok, io} = StringIO.open(""); '
                'Process.group_leader(self(), io); Code.eval_string(expr); '
                '{_, out} = StringIO.contents(io); out end))')
        r = subprocess.run([ELIXIR, "--sname", f"inspector_{os.getpid()}_{next(_serial)}", "--hidden",
                            "--cookie", self.cookie, "-e", code], capture_output=True, text=True, timeout=60,
                           env={**os.environ, "HOME": str(self.base / "home"), "BOARD_EXPR": expr})
        if r.returncode:
            raise RuntimeError(f"inspecting the board failed: {r.stderr[-1500:]}")
        return r.stdout

    def leftovers(self) -> str:
        return self.inspect(LEFTOVERS).strip()

    def programs(self) -> list[str]:
        """Command lines of the processes in the board's mount namespace (its VM and whatever it started)."""
        ns = os.readlink(f"/proc/{self.proc.pid}/ns/mnt")
        found = []
        for entry in os.listdir("/proc"):
            try:
                if entry.isdigit() and int(entry) != self.proc.pid and os.readlink(f"/proc/{entry}/ns/mnt") == ns:
                    found.append(Path(f"/proc/{entry}/cmdline").read_bytes().replace(b"\0", b" ").decode())
            except OSError:
                continue  # it ended meanwhile
        return found

    def kill(self) -> None:
        """Like pulling the board's plug."""
        if self.proc is not None and self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait()

    stop = kill


def _sh(arg: str) -> str:
    return "'" + arg.replace("'", "'\\''") + "'"


def _listening(port: int) -> bool:
    with socket.socket() as s:
        return s.connect_ex(("127.0.0.1", port)) == 0


# What nerves_ssh gives a Nerves device: an SSH daemon in the firmware's VM whose exec channel evaluates
# Elixir, with an SFTP subsystem. Keys from the test's directory; only the user key is accepted.
NERVES_SSH = (
    "{{:ok, _}} = Application.ensure_all_started(:ssh); "
    "exec = fn cmd -> try do {{result, _}} = Code.eval_string(to_string(cmd)); {{:ok, inspect(result)}} "
    "catch kind, value -> {{:error, Exception.format(kind, value, __STACKTRACE__)}} end end; "
    "{{:ok, _}} = :ssh.daemon({{127, 0, 0, 1}}, {port}, system_dir: ~c\"{dir}\", user_dir: ~c\"{dir}\", "
    "auth_methods: ~c\"publickey\", exec: {{:direct, exec}}, "
    "subsystems: [:ssh_sftpd.subsystem_spec(cwd: ~c\"/\")]); "
)
