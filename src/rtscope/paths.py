"""Where rtscope finds its probes and shipped files (a source checkout or an install)."""

from __future__ import annotations

import os
import platform
import shutil
from pathlib import Path

from .errors import RtscopeError
from .sysinfo import ARCHES

PACKAGE_DIR = Path(__file__).resolve().parent
REPO_DIR = PACKAGE_DIR.parent.parent  # src/rtscope -> repo root in a checkout


def repo_file(*parts: str) -> Path:
    return REPO_DIR.joinpath(*parts)


def find_binary(env_var: str, repo_relative: str, name: str, build_hint: str) -> Path:
    """A probe binary: $env_var, then the checkout's build output, then PATH."""
    if os.environ.get(env_var):
        path = Path(os.environ[env_var])
        if not os.access(path, os.X_OK):
            raise RtscopeError(f"{env_var}={path} is not an executable file")
        return path
    built = repo_file(repo_relative)
    if os.access(built, os.X_OK):
        return built
    found = shutil.which(name)
    if found:
        return Path(found)
    raise RtscopeError(f"{name} is not built: run `{build_hint}` (or set {env_var})")


def rtprobe() -> Path:
    return find_binary("RTSCOPE_RTPROBE", "probes/build/rtprobe", "rtprobe", "make -C probes")


def taskmem() -> Path:
    """The tasks workload's native probe (cbtask/tools), built with the cbtask runtime."""
    return find_binary("RTSCOPE_TASKMEM", "cbtask/build/taskmem", "taskmem", "make -C cbtask")


def host_arch() -> str:
    machine = platform.machine()
    return ARCHES.get(machine, machine)


def for_arch(tool: str, arch: str, this_machine: bool = False) -> Path:
    """`tool` (rtprobe or taskmem) to run on a machine of `arch`. On this machine: the usual one ($RTSCOPE_RTPROBE
    / $RTSCOPE_TASKMEM, the checkout's build, PATH). Elsewhere: the static cross build, else this host's build
    when the arches match."""
    where = {"rtprobe": ("probes", rtprobe), "taskmem": ("cbtask", taskmem)}
    project, native = where[tool]
    if this_machine:
        return native()
    cross = repo_file(project, "build", "cross", arch, tool)
    if os.access(cross, os.X_OK):
        return cross
    if arch == host_arch():
        return native()
    raise RtscopeError(f"{tool} for {arch} is not built: run `make cross` (static builds for x86_64, aarch64, "
                       "armhf with Debian's cross compilers)")


BEAM_BUILD_HINT = "cd beam && MIX_ENV=prod mix compile (or: make beam)"


def beam_ebin() -> Path:
    """The compiled BEAM harness: $RTSCOPE_BEAM_EBIN, else the checkout's prod build."""
    if os.environ.get("RTSCOPE_BEAM_EBIN"):
        path = Path(os.environ["RTSCOPE_BEAM_EBIN"])
        if not (path / "rtscope.app").is_file():
            raise RtscopeError(f"RTSCOPE_BEAM_EBIN={path} holds no rtscope.app (a compiled BEAM harness)")
        return path
    path = repo_file("beam", "_build", "prod", "lib", "rtscope", "ebin")
    if not (path / "rtscope.app").is_file():
        raise RtscopeError(f"the BEAM harness is not built: run `{BEAM_BUILD_HINT}`")
    return path


def elixir() -> str:
    found = shutil.which("elixir")
    if found is None:
        raise RtscopeError("elixir is not installed: sudo apt-get install -y elixir erlang-dev")
    return found
