"""The guest's root file system, booted as its initramfs: Debian with what runs need, an SSH server, keys.

Contents: `mmdebstrap --variant=essential` of Debian bookworm for the guest's
architecture with openssh-server (the way in: rtscope then reaches the guest
with its SSH target, like any board — the same code measures a VM and a
Raspberry Pi), rt-tests (cyclictest), fio, stress-ng, and busybox (mount,
ip, modprobe, init: the essential variant has none of them); the kernel's
virtio, block and ext4 modules with their modules.dep; an init that loads
them, brings up the user-mode network and runs sshd under busybox init (which
reaps orphans). rtscope's own probe is not in the image: it is deployed over
SSH like on any target.

Per image an SSH host key and a user key are generated; the host key's
public half is what the VM target's known_hosts holds, so the guest's host
key is verified like a board's. Images are cached by a hash of everything
they are made from (architecture, packages, kernel package, init), so a new
kernel or package list builds a new image and an unchanged one is reused.
Foreign-architecture (arm64) root file systems are built through
qemu-user-static and binfmt_misc, which rtscope sets up when root.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import tarfile
from dataclasses import dataclass
from pathlib import Path

from ..errors import RtscopeError
from .cache import building, cache_dir, digest, need_space
from .kernels import DEBIAN_ARCH, Kernel

SUITE = "bookworm"
PACKAGES = ("openssh-server", "rt-tests", "fio", "stress-ng", "busybox")
# Kernel modules the guest needs, by path below lib/modules/<release>/kernel (their dependencies come along).
MODULE_PATHS = ("drivers/virtio", "drivers/net/virtio_net.ko", "drivers/net/net_failover.ko",
                "net/core/failover.ko", "drivers/block/virtio_blk.ko", "fs/ext4", "fs/jbd2", "fs/mbcache.ko",
                "lib/crc16.ko", "crypto/crc32c_generic.ko", "lib/libcrc32c.ko", "drivers/gpio")
# crc32c_generic before ext4: ext4 with metadata_csum (mkfs.ext4's default) asks the crypto API for crc32c, whose
# request_module needs /sbin/modprobe, which the image lacks (busybox only): without it the disk's mount fails.
MODULES = ("virtio_pci", "virtio_mmio", "virtio_net", "virtio_blk", "crc32c_generic", "ext4")
ROOTFS_BYTES = 800 << 20     # free space a build needs (rootfs tar + unpacked tree + initramfs)
HOSTNAME = "rtscope-vm"
DISK_MOUNT = "/mnt/disk"     # where the guest mounts the target's virtio-blk disk

INIT = f"""#!/bin/busybox sh
# rtscope guest init: mounts, modules, network, then busybox init runs sshd (and reaps orphans).
export PATH=/usr/sbin:/usr/bin:/sbin:/bin
/bin/busybox mount -t proc proc /proc
/bin/busybox mount -t sysfs sysfs /sys
/bin/busybox mount -t devtmpfs devtmpfs /dev
/bin/busybox mkdir -p /dev/pts /dev/shm /run /tmp
/bin/busybox mount -t devpts devpts /dev/pts
/bin/busybox mount -t tmpfs tmpfs /dev/shm
/bin/busybox mount -t tmpfs tmpfs /run
# tracefs for setting explain (docs/explain.md): rtscope's own instances below it, nothing enabled here.
/bin/busybox mount -t tracefs nodev /sys/kernel/tracing 2>/dev/null
/bin/busybox mkdir -p /run/sshd
for m in {' '.join(MODULES)}; do /bin/busybox modprobe $m 2>/dev/null; done
# A virtio-blk disk (the target's `disk`): an ext4 file system on a host file, for storage runs.
if [ -b /dev/vda ]; then /bin/busybox mkdir -p {DISK_MOUNT} && /bin/busybox mount -t ext4 /dev/vda {DISK_MOUNT} \
  || echo "rtscope-vm: mounting /dev/vda on {DISK_MOUNT} failed"; fi
/bin/busybox hostname {HOSTNAME}
/bin/busybox ip link set lo up
/bin/busybox ip link set eth0 up
/bin/busybox ip addr add 10.0.2.15/24 dev eth0
/bin/busybox ip route add default via 10.0.2.2
echo "rtscope-vm: up"
exec /bin/busybox init
"""

INITTAB = """::respawn:/usr/sbin/sshd -D -e
::shutdown:/bin/busybox umount -a -r
"""

SSHD_CONFIG = """Port 22
HostKey /etc/ssh/ssh_host_ed25519_key
PermitRootLogin prohibit-password
AuthorizedKeysFile /root/.ssh/authorized_keys
PasswordAuthentication no
KbdInteractiveAuthentication no
UsePAM no
Subsystem sftp internal-sftp
MaxSessions 50
"""


@dataclass(frozen=True)
class Image:
    arch: str
    initramfs: Path
    user_key: Path           # private key that logs in as root
    host_public_key: str     # "ssh-ed25519 AAAA..." of the guest
    key: str                 # the content hash


TOOL_PACKAGES = {"mmdebstrap": "mmdebstrap", "depmod": "kmod", "cpio": "cpio", "lz4": "lz4",
                 "ssh-keygen": "openssh-client", "update-binfmts": "binfmt-support"}


def _run(argv: list[str], what: str, timeout: float = 1800, **kw) -> None:
    try:
        proc = subprocess.run(argv, capture_output=True, text=True, timeout=timeout, **kw)
    except FileNotFoundError:
        raise RtscopeError(f"{what}: {argv[0]} is not installed (sudo apt-get install -y "
                           f"{TOOL_PACKAGES.get(argv[0], argv[0])})") from None
    except subprocess.TimeoutExpired:
        raise RtscopeError(f"{what}: did not finish within {timeout:.0f} s") from None
    if proc.returncode != 0:
        raise RtscopeError(f"{what} failed: `{' '.join(argv[:4])} ...`: {(proc.stderr or proc.stdout).strip()[-1500:]}")


def enable_binfmt(arch: str) -> None:
    """Foreign binaries must run (qemu-user-static through binfmt_misc) for mmdebstrap to configure packages."""
    if arch == os.uname().machine:
        return
    handler = Path("/proc/sys/fs/binfmt_misc/qemu-aarch64")
    if handler.exists():
        return
    if os.geteuid() != 0:
        raise RtscopeError(f"building a {arch} root file system needs qemu-user-static and binfmt_misc: "
                           "sudo apt-get install -y qemu-user-static binfmt-support arch-test")
    if (shutil.which("update-binfmts") is None or shutil.which("arch-test") is None
            or not Path("/usr/bin/qemu-aarch64-static").exists()):
        _run(["apt-get", "install", "-y", "-qq", "--no-install-recommends", "qemu-user-static", "binfmt-support",
              "arch-test"],
             "installing qemu-user-static", env={**os.environ, "DEBIAN_FRONTEND": "noninteractive"})
    if not Path("/proc/sys/fs/binfmt_misc/register").exists():
        _run(["mount", "-t", "binfmt_misc", "binfmt_misc", "/proc/sys/fs/binfmt_misc"], "mounting binfmt_misc")
    _run(["update-binfmts", "--enable", "qemu-aarch64"], "enabling qemu-aarch64 in binfmt_misc")
    if not handler.exists():
        raise RtscopeError("binfmt_misc has no qemu-aarch64 handler after update-binfmts --enable")


def _with(extra: tuple[str, ...]) -> tuple:
    """What a cache key holds of the package list: unchanged when there are no extra packages."""
    return (PACKAGES,) if not extra else (PACKAGES, tuple(sorted(extra)))


def rootfs(arch: str, extra: tuple[str, ...] = ()) -> Path:
    """The Debian root file system tarball for `arch` (cached), with the target's `extra` packages."""
    key = digest("rootfs", arch, SUITE, *_with(extra))
    out = cache_dir("rootfs") / f"{SUITE}-{arch}-{key}.tar"
    with building(out):
        return out if out.exists() else _build_rootfs(arch, out, extra)


def _build_rootfs(arch: str, out: Path, extra: tuple[str, ...]) -> Path:
    need_space(out.parent, ROOTFS_BYTES, f"the {arch} guest root file system")
    enable_binfmt(arch)
    tmp = out.with_suffix(".part")
    _run(["mmdebstrap", "--variant=essential", f"--architectures={DEBIAN_ARCH[arch]}",
          f"--include={','.join(PACKAGES + tuple(sorted(extra)))}", "--dpkgopt=path-exclude=/usr/share/doc/*",
          "--dpkgopt=path-exclude=/usr/share/man/*", "--dpkgopt=path-exclude=/usr/share/locale/*",
          "--format=tar", SUITE, str(tmp)], f"building the {arch} guest root file system (mmdebstrap)")
    tmp.rename(out)
    return out


def _modules(kernel: Kernel, dest: Path) -> None:
    """The modules the guest loads, with a modules.dep made by depmod for them alone."""
    if kernel.modules is None:
        return
    src = kernel.modules / "kernel"
    target = dest / "lib" / "modules" / kernel.release
    for rel in MODULE_PATHS:
        found = src / rel
        if found.is_dir():
            shutil.copytree(found, target / "kernel" / rel, dirs_exist_ok=True)
        elif found.exists():
            (target / "kernel" / rel).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(found, target / "kernel" / rel)
    for meta in ("modules.order", "modules.builtin", "modules.builtin.modinfo"):
        if (kernel.modules / meta).exists():
            shutil.copy2(kernel.modules / meta, target / meta)
    _run(["depmod", "-b", str(dest), kernel.release], "depmod for the guest's modules")


def _keys(work: Path) -> tuple[Path, str, Path]:
    """A fresh host key and user key for this image."""
    host, user = work / "ssh_host_ed25519_key", work / "id_ed25519"
    for path in (host, user):
        _run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", "rtscope-vm", "-f", str(path)],
             "generating the image's SSH keys")
    return host, " ".join(Path(f"{host}.pub").read_text().split()[:2]), user


def build(arch: str, kernel: Kernel, extra: tuple[str, ...] = ()) -> Image:
    """The initramfs for `arch` with `kernel`'s modules and the `extra` packages (cached by content)."""
    key = digest("image", arch, SUITE, *_with(extra), kernel.package or str(kernel.image), MODULE_PATHS, INIT,
                 INITTAB, SSHD_CONFIG)
    base = cache_dir("images", f"{arch}-{key}")
    with building(base):
        return _build_image(arch, kernel, key, base, extra)


def _build_image(arch: str, kernel: Kernel, key: str, base: Path, extra: tuple[str, ...]) -> Image:
    # LZ4 (its legacy frame, the one the kernel's initramfs unpacker reads): a TCG guest's kernel inflating the
    # gzip of old spent 7-10 s of emulated CPU a boot, half an aarch64 boot's. Uncompressed is faster still, but
    # the image and its unpacked copy (300 MB each with Elixir) do not fit in a 1 GiB guest together.
    image = Image(arch, base / "initramfs.cpio.lz4", base / "id_ed25519",
                  (base / "host_key.pub").read_text().strip() if (base / "host_key.pub").exists() else "", key)
    if image.initramfs.exists() and image.host_public_key:
        return image
    packed = base / "initramfs.cpio.gz"    # made by an rtscope before: recompressed once, here
    if packed.exists() and image.host_public_key:
        _compress(["gzip", "-dc", str(packed)], base, image.initramfs, f"recompressing the cached {arch} guest image")
        packed.unlink()
        return image
    tar = rootfs(arch, extra)
    need_space(base, ROOTFS_BYTES, f"the {arch} guest image")
    tree = base / "tree"
    shutil.rmtree(tree, ignore_errors=True)
    tree.mkdir()
    with tarfile.open(tar) as t:
        t.extractall(tree, filter="fully_trusted")  # our own mmdebstrap output: devices, owners, links as built
    _modules(kernel, tree)
    host_key, host_pub, user_key = _keys(base)
    ssh = tree / "etc" / "ssh"
    ssh.mkdir(parents=True, exist_ok=True)
    for old in ssh.glob("ssh_host_*"):
        old.unlink()
    shutil.copy2(host_key, ssh / "ssh_host_ed25519_key")
    os.chmod(ssh / "ssh_host_ed25519_key", 0o600)
    (ssh / "sshd_config").write_text(SSHD_CONFIG)
    (tree / "root" / ".ssh").mkdir(parents=True, exist_ok=True)
    (tree / "root" / ".ssh" / "authorized_keys").write_text(Path(f"{user_key}.pub").read_text())
    (tree / "etc" / "inittab").write_text(INITTAB)
    (tree / "etc" / "hostname").write_text(HOSTNAME + "\n")
    (tree / "init").write_text(INIT)
    os.chmod(tree / "init", 0o755)
    _compress(["bash", "-o", "pipefail", "-c", "find . | cpio -o -H newc --quiet"], tree, image.initramfs,
              f"packing the {arch} guest image")
    shutil.rmtree(tree)
    (base / "host_key.pub").write_text(host_pub + "\n")
    return Image(arch, image.initramfs, user_key, host_pub, key)


def _compress(archive: list[str], cwd: Path, out: Path, what: str) -> None:
    """`archive`'s output (a cpio archive) compressed into `out` with LZ4's legacy frame, whole or not at all."""
    part = out.with_name(out.name + ".part")
    with open(part, "wb") as f:
        source = subprocess.Popen(archive, cwd=cwd, stdout=subprocess.PIPE)
        try:
            lz4 = subprocess.run(["lz4", "-l", "-1", "-q"], stdin=source.stdout, stdout=f)
        except FileNotFoundError:
            source.kill()
            source.wait()
            raise RtscopeError(f"{what}: lz4 is not installed (sudo apt-get install -y lz4)") from None
        finally:
            source.stdout.close()
        if source.wait() or lz4.returncode:
            raise RtscopeError(f"{what} failed ({archive[0]} | lz4)")
    part.rename(out)
