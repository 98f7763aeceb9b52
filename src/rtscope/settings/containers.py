"""Containers rtscope makes itself, for study 4's "same program in a container" (environment key `container`).

    [environments.debian-podman]
    container = "podman"      # an image built from rtscope's Debian guest root file system; a container per run

No registry is needed (none is reachable in many labs): the image is
`podman import` of the root file system rtscope builds for its VMs
(vm/images.py), tagged by its content hash, so the container, the VM and the
host can run the same Debian user space. For each run rtscope starts a
container (`podman run -d ... sleep infinity`), the run goes through
`podman exec -i NAME` (the environment's wrapper mode), and the container
is removed afterwards whatever happens.

Hosts where podman cannot start containers as installed are detected and
explained: without CAP_SYS_RESOURCE (inside a VM or container) the OCI
runtime cannot set RLIMIT_NPROC, and crun refuses a hybrid cgroup layout.
rtscope then runs podman with its own containers.conf (`default_ulimits =
[]`) and Debian's runc, says so in the run's notes, and fails with what it
tried when even that does not start.
"""

from __future__ import annotations

import secrets
import shutil
import subprocess
from dataclasses import dataclass, field
from pathlib import Path

from ..errors import RtscopeError
from ..paths import host_arch

ENGINES = ("podman",)
START_TIMEOUT = 120.0
# What a host that needs the workaround says (crun and runc wording).
NEEDS_WORKAROUND = ("rlimit", "RLIMIT", "cgroup", "OCI permission denied")


@dataclass
class Engine:
    """How podman is invoked here: its command words and environment, and why (notes for the run)."""

    argv: list[str]
    env: dict[str, str] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)


def _conf(base: Path) -> Path:
    conf = base / "containers.conf"
    if not conf.exists():
        conf.write_text("# rtscope: hosts without CAP_SYS_RESOURCE cannot set container rlimits\n"
                        "[containers]\ndefault_ulimits = []\n")
    return conf


def _podman(engine: Engine, args: list[str], what: str, timeout: float = START_TIMEOUT) -> subprocess.CompletedProcess:
    import os
    try:
        return subprocess.run(engine.argv + args, capture_output=True, text=True, timeout=timeout,
                              env={**os.environ, **engine.env})
    except FileNotFoundError:
        raise RtscopeError("podman is not installed: sudo apt-get install -y podman runc") from None
    except subprocess.TimeoutExpired:
        raise RtscopeError(f"podman: {what} did not finish within {timeout:.0f} s") from None


def image(engine: Engine) -> str:
    """rtscope's guest image in podman's local store (imported once per root file system)."""
    from ..vm import images  # the VM machinery builds the root file system
    tar = images.rootfs(host_arch())
    tag = f"localhost/rtscope-guest:{tar.stem.rsplit('-', 1)[-1]}"
    if _podman(engine, ["image", "exists", tag], "looking up the image").returncode != 0:
        done = _podman(engine, ["import", "-q", str(tar), tag], "importing the guest root file system", 600)
        if done.returncode != 0:
            raise RtscopeError(f"podman import of {tar} failed: {done.stderr.strip()[-600:]}")
    return tag


def engine_for(base: Path) -> tuple[Engine, str]:
    """podman as it works on this host (with the workaround when needed), and the image; a clear error else."""
    if shutil.which("podman") is None:
        raise RtscopeError("podman is not installed: sudo apt-get install -y podman runc")
    plain = Engine(["podman"])
    tag = image(plain)
    tried = _podman(plain, ["run", "--rm", tag, "true"], "a test container")
    if tried.returncode == 0:
        return plain, tag
    said = tried.stderr.strip()
    if not any(word in said for word in NEEDS_WORKAROUND) or shutil.which("runc") is None:
        raise RtscopeError(f"podman cannot start a container here: {said[-600:]}"
                           + ("" if shutil.which("runc") else " (installing runc may help: sudo apt-get install -y runc)"))
    fixed = Engine(["podman", "--runtime", "runc"], {"CONTAINERS_CONF": str(_conf(base))},
                   [f"podman as installed cannot start containers on this host ({said.splitlines()[-1][:200]}); "
                    "rtscope ran it with runc and default_ulimits = [] (this host lacks CAP_SYS_RESOURCE or has "
                    "a hybrid cgroup layout)"])
    again = _podman(fixed, ["run", "--rm", tag, "true"], "a test container")
    if again.returncode != 0:
        raise RtscopeError(f"podman cannot start a container here, also with runc and default_ulimits = []: "
                           f"{again.stderr.strip()[-600:]} (first attempt: {said[-300:]})")
    return fixed, tag


@dataclass
class Container:
    """One container for one run: started, wrapped with `podman exec -i`, always removed."""

    engine: Engine
    tag: str
    name: str = field(default_factory=lambda: f"rtscope-run-{secrets.token_hex(4)}")

    def start(self) -> None:
        # No --rm: podman mounts a --rm container's overlay with fsync=volatile, which makes fsync a no-op (a
        # storage run's write+fsync would never reach the disk); remove() deletes the container instead.
        done = _podman(self.engine, ["run", "-d", "--name", self.name, "--network", "none", self.tag,
                                     "sleep", "infinity"], "starting the container")
        if done.returncode != 0:
            raise RtscopeError(f"podman could not start container {self.name}: {done.stderr.strip()[-600:]}")

    @property
    def prefix(self) -> list[str]:
        env = [f"{k}={v}" for k, v in self.engine.env.items()]
        return (["env", *env] if env else []) + self.engine.argv + ["exec", "-i", self.name]

    def remove(self) -> None:
        _podman(self.engine, ["rm", "-f", "-t", "0", self.name], "removing the container")
