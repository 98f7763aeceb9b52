"""Target kind `qemu`: a VM that rtscope boots for the experiment and stops after it (docs/kernels.md).

    [targets.pi3-rt]
    kind = "qemu"
    arch = "aarch64"          # or x86_64; machine/cpu: virt + cortex-a53 (a Raspberry Pi 3's core), q35 + qemu64
    kernel = "debian:rt"      # debian:stock | debian:rt | a path to a kernel image
    cpus = 2
    memory = "1G"
    accel = "auto"            # kvm when it works (checked by a short boot), else tcg
    pin = [0, 1]              # host CPUs for the vCPU threads (optional)
    kernel_args = "isolcpus=1"  # more kernel command line (optional)
    disk = "1G"               # a virtio-blk disk on a host file, ext4, mounted at /mnt/disk (optional)

open() fetches the kernel and builds (or finds) the image, boots the guest
and then connects as an SSH target with the image's own key and host key;
from there the VM is a board like any other. close() shuts the guest down.
The machine record holds the guest's kernel and preemption model and the
host side: accelerator, QEMU version, vCPU pinning, host kernel.
"""

from __future__ import annotations

import re

import shutil
import tempfile
from pathlib import Path

from ..errors import UsageError, choices
from .definition import TargetDefinition
from .ssh import SshTarget

ARCHES = ("x86_64", "aarch64")
PACKAGE_RE = re.compile(r"^[a-z0-9][a-z0-9+.-]+$")


def check_table(d: TargetDefinition) -> None:
    from ..vm import kernels, qemu  # heavy, and only for VM targets
    o = d.options
    if o.get("arch", "x86_64") not in ARCHES:
        raise UsageError(f"[targets.{d.name}]: unknown arch {o['arch']!r}; valid: {choices(ARCHES)}")
    kernels.check_name(str(o.get("kernel", "debian:stock")))
    if o.get("accel", "auto") not in qemu.ACCELS:
        raise UsageError(f"[targets.{d.name}]: unknown accel {o['accel']!r}; valid: {choices(qemu.ACCELS)}")
    cpus = o.get("cpus", 2)
    if not isinstance(cpus, int) or isinstance(cpus, bool) or cpus < 1:
        raise UsageError(f"[targets.{d.name}]: cpus must be an integer >= 1, got {cpus!r}")
    if "disk" in o:
        parse_size(o["disk"])
    packages = o.get("packages", [])
    if not isinstance(packages, list) or not all(isinstance(p, str) and PACKAGE_RE.match(p) for p in packages):
        raise UsageError(f"[targets.{d.name}]: packages must be a list of Debian package names, e.g. "
                         "[\"elixir\"]")
    pin = o.get("pin", [])
    if not isinstance(pin, list) or not all(isinstance(c, int) and c >= 0 for c in pin):
        raise UsageError(f"[targets.{d.name}]: pin must be a list of host CPU numbers, e.g. [0, 1]")


def parse_size(value) -> int:
    """'512M', '1G', or bytes."""
    text = str(value).strip().upper()
    factor = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30}.get(text[-1:], 1)
    try:
        n = int(float(text[:-1] if text[-1:] in "KMG" else text) * factor)
    except ValueError:
        n = 0
    if n < (16 << 20):
        raise UsageError(f"disk must be a size of at least 16M such as \"1G\", got {value!r}")
    return n


# A guest QEMU emulates (TCG) under a load that fills its CPUs (rtla timerlat, stress-ng) can leave its sshd
# unanswered for tens of seconds: it is taken as hung only after this long (a board's bound is 30 s, ssh.py).
GUEST_SILENT_AFTER_S = 180.0


class QemuTarget(SshTarget):
    def __init__(self, d: TargetDefinition):
        o = d.options
        self.arch_name = o.get("arch", "x86_64")
        self.kernel_name = str(o.get("kernel", "debian:stock"))
        self.cpus, self.memory, self.accel = o.get("cpus", 2), str(o.get("memory", "1G")), o.get("accel", "auto")
        self.pin = list(o.get("pin", []))
        self.kernel_args = str(o.get("kernel_args", ""))
        self.extra_args = ""  # setting kernel_cmdline of the runs: appended to kernel_args (boot_with)
        self.disk_size = parse_size(o["disk"]) if "disk" in o else None
        self.packages = tuple(o.get("packages", ()))  # Debian packages added to the guest's image
        self.guest = None
        self._dir: Path | None = None
        description = d.description or f"QEMU {self.arch_name} VM, kernel {self.kernel_name}"
        super().__init__(d.name, "ssh://root@127.0.0.1:1", workdir=o.get("workdir", "/var/tmp/rtscope"),
                         description=description, kind="qemu",
                         silent_after_s=o.get("silent_after_s", GUEST_SILENT_AFTER_S))

    def open(self) -> None:
        if self.guest is not None and self.guest.proc is not None and self.guest.proc.poll() is None:
            return super().open()
        from ..vm import images, kernels, qemu
        kernel = kernels.fetch(self.kernel_name, self.arch_name)
        image = images.build(self.arch_name, kernel, self.packages)
        self._dir = Path(tempfile.mkdtemp(prefix=f"rtscope-vm-{self.name}-"))
        self.guest = qemu.Guest(self.arch_name, kernel, image, self.cpus, self.memory, self.accel, self.pin,
                                f"{self.kernel_args} {self.extra_args}".strip(), workdir=self._dir)
        try:
            if self.disk_size:
                self.guest.make_disk(self.disk_size)
            self.guest.start()
            self.port, self.host, self.user = self.guest.port, "127.0.0.1", "root"
            self.identity = str(image.user_key)
            self.known_hosts = str(self._dir / "known_hosts")
            Path(self.known_hosts).write_text(f"[127.0.0.1]:{self.guest.port} {image.host_public_key}\n")
            self.facts = self.guest.facts()
            super().open()
        except BaseException:
            self.close()
            raise

    def expect(self, settings: dict) -> None:
        """Before the first boot: the settings of the first run (the pool tells), so that the guest boots
        with that run's kernel_cmdline at once."""
        if self.guest is None:
            self.extra_args = " ".join(str(settings.get("kernel_cmdline") or "").split())

    def boot_with(self, extra: str) -> bool:
        """Make the guest run with this more kernel command line (setting kernel_cmdline), booting it (again)
        unless it already does; whether it booted. Nothing of the old guest is left: its files were in RAM."""
        extra = " ".join(extra.split())
        running = self.guest is not None and self.guest.proc is not None and self.guest.proc.poll() is None
        if running and extra == self.extra_args:
            return False
        self.close()
        self.extra_args = extra
        self.deployed = {}
        self.open()
        return True

    def close(self) -> None:
        try:
            super().close()
        finally:  # the guest stops even when the SSH side fails to close
            if self.guest is not None:
                self.guest.stop()
                self.guest = None
            if self._dir is not None:
                shutil.rmtree(self._dir, ignore_errors=True)
                self._dir = None
