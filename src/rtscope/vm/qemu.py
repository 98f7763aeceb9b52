"""Boot a guest with QEMU and stop it on every exit path.

The guest gets the kernel and the image's initramfs, user-mode networking
with the guest's SSH port forwarded to 127.0.0.1 only (a free port), its
serial console in a log file, and a QMP socket. QEMU runs in its own session
and dies with rtscope (PR_SET_PDEATHSIG), so even `kill -9` of rtscope leaves
no QEMU behind; `stop()` asks it to quit over QMP, then SIGTERM, then SIGKILL.
A guest that panics (`panic=1` + `-no-reboot`: QEMU exits) or does not answer
in time fails with the console's last lines.

Accelerator: `kvm` when the host arch matches, /dev/kvm is usable and a short
test boot shows the kernel running (the verdict is cached per QEMU and host
kernel), else `tcg`, QEMU's emulator: then latencies measure the emulator,
and the machine record says so.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path

from ..errors import RtscopeError, UsageError, choices
from ..signals import die_with_parent
from .cache import cache_dir, need_space
from .images import DISK_MOUNT, Image
from .kernels import Kernel

QEMU = {"x86_64": "qemu-system-x86_64", "aarch64": "qemu-system-aarch64"}
PACKAGE = {"x86_64": "qemu-system-x86", "aarch64": "qemu-system-arm"}
MACHINE = {"x86_64": ("q35", "qemu64", "ttyS0"), "aarch64": ("virt", "cortex-a53", "ttyAMA0")}
ACCELS = ("auto", "kvm", "tcg")
BOOT_TIMEOUT_S = 180.0      # to an SSH banner, under TCG on a busy 2-core host
KVM_PROBE_S = 15.0          # a KVM guest that prints nothing by then is taken as not working
CONSOLE_TAIL = 15           # console lines quoted when a guest fails


@dataclass
class Guest:
    arch: str
    kernel: Kernel
    image: Image
    cpus: int = 2
    memory: str = "1G"
    accel: str = "auto"
    pin: list[int] = field(default_factory=list)
    kernel_args: str = ""                      # more kernel command line (isolcpus=1 nohz_full=1 ...)
    disk: Path | None = None                   # a host file given to the guest as a virtio-blk disk
    workdir: Path | None = None                # console log, QMP socket
    proc: subprocess.Popen | None = None
    port: int = 0
    accelerator: str = ""

    @property
    def console(self) -> Path:
        return self.workdir / "console.log"

    def console_tail(self, lines: int = CONSOLE_TAIL) -> str:
        try:
            text = self.console.read_text(errors="replace")
        except OSError:
            return "(no console output)"
        return "\n".join(text.strip().splitlines()[-lines:]) or "(no console output)"

    def argv(self, accel: str) -> list[str]:
        machine, cpu, tty = MACHINE[self.arch]
        argv = [qemu_binary(self.arch), "-M", machine, "-cpu", "host" if accel == "kvm" else cpu,
                "-accel", accel, "-smp", str(self.cpus), "-m", self.memory,
                "-kernel", str(self.kernel.image), "-initrd", str(self.image.initramfs),
                "-append", f"console={tty} panic=1 quiet rdinit=/init {self.kernel_args}".strip(),
                "-display", "none", "-monitor", "none", "-serial", f"file:{self.console}",
                "-qmp", f"unix:{self.workdir / 'qmp.sock'},server=on,wait=off", "-no-reboot",
                "-netdev", f"user,id=n0,hostfwd=tcp:127.0.0.1:{self.port}-:22",
                "-device", "virtio-net-pci,netdev=n0"]
        if self.disk is not None:
            argv += ["-drive", f"file={self.disk},format=raw,if=none,id=d0,cache=none", "-device",
                     "virtio-blk-pci,drive=d0"]
        return argv

    def make_disk(self, size_bytes: int) -> None:
        """A sparse raw file with an ext4 file system, given to the guest as its virtio-blk disk."""
        need_space(self.workdir, size_bytes // 8, "the VM's disk")  # sparse: what storage runs write
        self.disk = self.workdir / "disk.img"
        with open(self.disk, "wb") as f:
            f.truncate(size_bytes)
        proc = subprocess.run(["mkfs.ext4", "-q", "-F", str(self.disk)], capture_output=True, text=True)
        if proc.returncode != 0:
            raise RtscopeError(f"mkfs.ext4 for the VM's disk failed: {proc.stderr.strip()}")

    def start(self) -> None:
        if self.accel not in ACCELS:
            raise UsageError(f"unknown accel {self.accel!r}; valid: {choices(ACCELS)}")
        self.workdir.mkdir(parents=True, exist_ok=True)
        self.accelerator = self.accel if self.accel != "auto" else choose_accel(self.arch, self)
        self.port = free_port()
        self.console.write_text("")
        self.proc = subprocess.Popen(self.argv(self.accelerator), stdin=subprocess.DEVNULL,
                                     stdout=subprocess.DEVNULL, stderr=open(self.workdir / "qemu.err", "wb"),
                                     start_new_session=True, preexec_fn=die_with_parent)
        try:
            self._wait_for_ssh(BOOT_TIMEOUT_S)
            if self.pin:
                self._pin_vcpus()
        except BaseException:
            self.stop()
            raise

    def panic_line(self) -> str | None:
        """The kernel's panic message, when the console has one."""
        try:
            text = self.console.read_text(errors="replace")
        except OSError:
            return None
        found = [line.strip() for line in text.splitlines() if "Kernel panic" in line]
        return found[0] if found else None

    def failure(self, what: str) -> str:
        """What went wrong during boot: the panic line first when there is one, then the console's tail."""
        panic = self.panic_line()
        return (f"the {self.arch} guest ({self.kernel.name}) {what}" + (f"; the kernel said: {panic}" if panic else "")
                + f"; its console's last lines:\n{self.console_tail()}")

    def _wait_for_ssh(self, timeout: float) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                err = (self.workdir / "qemu.err").read_text(errors="replace").strip()[-600:]
                raise RtscopeError(self.failure(f"stopped during boot (QEMU exit {self.proc.returncode}"
                                                f"{': ' + err if err else ''})"))
            if _ssh_banner(self.port):
                return
            time.sleep(0.2)
        raise RtscopeError(self.failure(f"did not answer on SSH within {timeout:.0f} s"))

    def _pin_vcpus(self) -> None:
        """Each vCPU thread on its host CPU (pin[i] for vCPU i), from QMP query-cpus-fast."""
        threads = [c["thread-id"] for c in qmp(self.workdir / "qmp.sock", "query-cpus-fast")]
        for i, tid in enumerate(threads):
            os.sched_setaffinity(tid, {self.pin[i % len(self.pin)]})

    def stop(self) -> None:
        """Quit over QMP, then SIGTERM, then SIGKILL the QEMU session; idempotent."""
        if self.proc is None or self.proc.poll() is not None:
            return
        try:
            qmp(self.workdir / "qmp.sock", "quit")
        except (OSError, RtscopeError):
            pass
        for sig, wait in ((None, 5), (signal.SIGTERM, 5), (signal.SIGKILL, 10)):
            if sig is not None:
                try:
                    os.killpg(self.proc.pid, sig)
                except ProcessLookupError:
                    pass
            try:
                self.proc.wait(wait)
                return
            except subprocess.TimeoutExpired:
                continue

    def facts(self) -> dict:
        """The host side of the machine record."""
        return {"vm": True, "accelerator": self.accelerator, "qemu_version": qemu_version(self.arch),
                "vcpus": self.cpus, "vcpu_pinning": list(self.pin) or None, "vm_memory": self.memory,
                "host_kernel": os.uname().release, "guest_kernel_package": self.kernel.package or self.kernel.name,
                "guest_kernel_args": self.kernel_args or None,
                "vm_disk": f"virtio-blk, raw file on the host, ext4, mounted at {DISK_MOUNT}" if self.disk else None}


def qemu_binary(arch: str) -> str:
    found = shutil.which(QEMU[arch])
    if found is None:
        raise RtscopeError(f"{QEMU[arch]} is not installed: sudo apt-get install -y {PACKAGE[arch]}")
    return found


def qemu_version(arch: str) -> str | None:
    try:
        out = subprocess.run([qemu_binary(arch), "--version"], capture_output=True, text=True, timeout=10).stdout
    except (OSError, RtscopeError, subprocess.TimeoutExpired):
        return None
    return out.splitlines()[0].strip() if out else None


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


BANNER_WAIT_S = 20.0  # for the banner of a guest sshd that accepted: one slow to answer (a loaded TCG guest, all
# on one CPU with isolcpus) must not be asked again and again, or its sshd drops the attempts (MaxStartups)


def _ssh_banner(port: int) -> bool:
    """True once the guest's sshd answers through the forwarded port (QEMU accepts before the guest does)."""
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=1) as s:
            s.settimeout(BANNER_WAIT_S)
            return s.recv(4).startswith(b"SSH-")
    except OSError:
        return False


def qmp(sock: Path, command: str) -> object:
    """One QMP command; its return value."""
    with socket.socket(socket.AF_UNIX) as s:
        s.settimeout(5)
        s.connect(str(sock))
        f = s.makefile("rw")
        json.loads(f.readline())  # greeting
        for cmd in ("qmp_capabilities", command):
            f.write(json.dumps({"execute": cmd}) + "\n")
            f.flush()
            while True:
                line = f.readline()
                if not line:
                    if cmd == "quit":
                        return None
                    raise RtscopeError(f"QMP {cmd}: connection closed")
                reply = json.loads(line)
                if "return" in reply or "error" in reply:
                    break
            if "error" in reply:
                raise RtscopeError(f"QMP {cmd}: {reply['error'].get('desc')}")
        return reply.get("return")


def choose_accel(arch: str, guest: Guest) -> str:
    """kvm if it really works here (a short test boot prints the kernel's first lines), else tcg; cached."""
    if arch != os.uname().machine or not os.access("/dev/kvm", os.R_OK | os.W_OK):
        return "tcg"
    verdict_file = cache_dir("kvm") / f"{qemu_version(arch)}-{os.uname().release}.json".replace(" ", "_").replace(
        "/", "_")
    if verdict_file.exists():
        return json.loads(verdict_file.read_text())["accel"]
    probe = Guest(arch, guest.kernel, guest.image, cpus=1, memory="256M", accel="kvm",
                  workdir=guest.workdir / "kvm-probe")
    probe.workdir.mkdir(parents=True, exist_ok=True)
    probe.port = free_port()
    probe.console.write_text("")
    argv = [a if a != "quiet" else "" for a in probe.argv("kvm")]
    argv[argv.index("-append") + 1] = argv[argv.index("-append") + 1].replace(" quiet", "")
    proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                            start_new_session=True, preexec_fn=die_with_parent)
    probe.proc = proc
    works = False
    deadline = time.monotonic() + KVM_PROBE_S
    while time.monotonic() < deadline and proc.poll() is None:
        if "Linux version" in probe.console.read_text(errors="replace"):
            works = True
            break
        time.sleep(0.2)
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass
    proc.wait()
    accel = "kvm" if works else "tcg"
    verdict_file.write_text(json.dumps({"accel": accel, "checked": time.time()}))
    return accel
