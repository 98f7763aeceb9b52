"""Kernels for VM targets: Debian's stock and PREEMPT_RT kernel packages, or a kernel image of your own.

    debian:stock   linux-image-<arch> (e.g. linux-image-6.1.0-56-amd64)
    debian:rt      linux-image-rt-<arch> (PREEMPT_RT; `uname -v` in the guest says so)
    /path/vmlinuz  a kernel image file (its modules, if any, are the guest's business)

A Debian kernel is fetched with `apt-get download` (no install on the host)
and unpacked with `dpkg-deb -x` into the cache, once per package version.
arm64 kernels need arm64 in dpkg's architectures; rtscope adds it (as root)
or says the two commands to run.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path

from ..errors import RtscopeError, UsageError, choices
from .cache import building, cache_dir

KERNEL_NAMES = ("debian:stock", "debian:rt")
DEBIAN_ARCH = {"x86_64": "amd64", "aarch64": "arm64"}


@dataclass(frozen=True)
class Kernel:
    name: str                 # as asked: debian:rt, or the path
    image: Path               # vmlinuz
    modules: Path | None      # lib/modules/<release> of that kernel, when known
    release: str | None       # its uname -r, when known
    package: str | None = None


def check_name(value: str) -> str:
    if value in KERNEL_NAMES or value.startswith("/"):
        return value
    raise UsageError(f"unknown kernel {value!r}; valid: {choices(KERNEL_NAMES)}, or an absolute path to a kernel "
                     "image")


def _run(argv: list[str], what: str, cwd: Path | None = None, timeout: float = 600) -> str:
    try:
        proc = subprocess.run(argv, capture_output=True, text=True, cwd=cwd, timeout=timeout)
    except FileNotFoundError:
        raise RtscopeError(f"{what}: {argv[0]} is not installed (a Debian/Ubuntu host with apt is needed)") from None
    except subprocess.TimeoutExpired:
        raise RtscopeError(f"{what}: `{' '.join(argv)}` did not finish within {timeout:.0f} s") from None
    if proc.returncode != 0:
        raise RtscopeError(f"{what}: `{' '.join(argv)}` failed: {(proc.stderr or proc.stdout).strip()[-800:]}")
    return proc.stdout


def ensure_foreign_arch(debian_arch: str) -> None:
    """dpkg must know the architecture to download its packages."""
    native = _run(["dpkg", "--print-architecture"], "checking dpkg's architecture").strip()
    if debian_arch == native:
        return
    foreign = _run(["dpkg", "--print-foreign-architectures"], "checking dpkg's architectures").split()
    if debian_arch in foreign:
        return
    if os.geteuid() != 0:
        raise RtscopeError(f"{debian_arch} kernels need {debian_arch} packages: run `sudo dpkg --add-architecture "
                           f"{debian_arch} && sudo apt-get update` once")
    _run(["dpkg", "--add-architecture", debian_arch], f"adding {debian_arch} to dpkg")
    _run(["apt-get", "update", "-qq"], "apt-get update", timeout=900)


def package_for(name: str, arch: str) -> str:
    """The versioned linux-image package behind Debian's metapackage for `name` on `arch`."""
    darch = DEBIAN_ARCH[arch]
    meta = f"linux-image-{'rt-' if name == 'debian:rt' else ''}{darch}"
    with building(cache_dir("kernels") / "apt"):  # one apt-get update at a time (the VMs of a fleet start together)
        ensure_foreign_arch(darch)
    shown = _run(["apt-cache", "show", f"{meta}:{darch}"], f"finding Debian's {name} kernel for {arch}")
    m = re.search(r"^Depends:.*?(linux-image-[0-9][^\s,(]*)", shown, re.MULTILINE)
    if not m:
        raise RtscopeError(f"apt-cache show {meta} names no linux-image package it depends on")
    return m.group(1)


def fetch(name: str, arch: str) -> Kernel:
    """The kernel `name` for `arch`, from the cache or fetched into it."""
    check_name(name)
    if arch not in DEBIAN_ARCH:
        raise UsageError(f"unknown VM arch {arch!r}; valid: {choices(DEBIAN_ARCH)}")
    if name.startswith("/"):
        path = Path(name)
        if not path.is_file():
            raise UsageError(f"kernel image {path} does not exist")
        return Kernel(name, path, None, None)
    package = package_for(name, arch)
    darch = DEBIAN_ARCH[arch]
    root = cache_dir("kernels", f"{package}_{darch}")
    done = root / ".complete"
    with building(root):
        if not done.exists():
            _download(package, darch, root)
    images = sorted((root / "tree" / "boot").glob("vmlinuz-*"))
    if not images:
        raise RtscopeError(f"{package} holds no /boot/vmlinuz-*")
    release = images[0].name.removeprefix("vmlinuz-")
    return Kernel(name, images[0], root / "tree" / "lib" / "modules" / release, release, package)


def _download(package: str, darch: str, root: Path) -> None:
    """apt-get download + dpkg-deb -x into `root`/tree; `.complete` marks a whole one."""
    work = root / "download"
    shutil.rmtree(work, ignore_errors=True)
    work.mkdir()
    _run(["apt-get", "download", "-q", f"{package}:{darch}"], f"downloading {package}", cwd=work)
    [deb] = list(work.glob("*.deb"))
    shutil.rmtree(root / "tree", ignore_errors=True)
    _run(["dpkg-deb", "-x", str(deb), str(root / "tree")], f"unpacking {deb.name}")
    deb.unlink()
    (root / ".complete").write_text(package)
