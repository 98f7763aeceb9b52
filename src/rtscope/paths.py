"""Where rtscope finds its probes and shipped files: in a checkout, its build output; installed from a wheel,
the copies the wheel carries in rtscope/data/ (layout.py names both places of each piece)."""

from __future__ import annotations

import json
import os
import platform
import shutil
from pathlib import Path

from .errors import RtscopeError, UsageError, choices
from .layout import BUILD_INFO, DATA_DIR, PIECES, PROBE_ARCHES, PROBE_TOOLS, git_commit, probe
from .sysinfo import ARCHES
from .version import __version__

PACKAGE_DIR = Path(__file__).resolve().parent
REPO_DIR = PACKAGE_DIR.parent.parent  # src/rtscope -> repo root in a checkout
# A checkout (an editable install runs the package from src/): use what `make` builds there. Installed from a
# wheel, the package sits in site-packages and its pieces in rtscope/data/.
IN_CHECKOUT = (REPO_DIR / "pyproject.toml").is_file() and (REPO_DIR / "probes" / "Makefile").is_file()


def repo_file(*parts: str) -> Path:
    return REPO_DIR.joinpath(*parts)


def shipped(piece: str) -> Path:
    """A piece of layout.PIECES: the checkout's build output, or the installed wheel's copy."""
    return repo_file(PIECES[piece]) if IN_CHECKOUT else PACKAGE_DIR / DATA_DIR / piece


def _build_hint(tool: str) -> str:
    if IN_CHECKOUT:
        return f"run `make -C {PROBE_TOOLS[tool]}`"
    return f"this rtscope carries {tool} for {', '.join(PROBE_ARCHES)} only"


def find_binary(env_var: str, tool: str) -> Path:
    """A probe binary for this machine: $env_var, then the checkout's build (installed: the wheel's static build
    for this architecture), then PATH."""
    if os.environ.get(env_var):
        path = Path(os.environ[env_var])
        if not os.access(path, os.X_OK):
            raise RtscopeError(f"{env_var}={path} is not an executable file")
        return path
    built = repo_file(PROBE_TOOLS[tool], "build", tool) if IN_CHECKOUT else shipped_probe(tool, host_arch())
    if built is not None and os.access(built, os.X_OK):
        return built
    found = shutil.which(tool)
    if found:
        return Path(found)
    raise RtscopeError(f"{tool} for {host_arch()} is not here: {_build_hint(tool)} (or set {env_var})")


def shipped_probe(tool: str, arch: str) -> Path | None:
    """The static `tool` for `arch` (`make cross`'s output, or the wheel's copy), None for another arch."""
    piece = probe(tool, arch)
    return shipped(piece) if piece in PIECES else None


def rtprobe() -> Path:
    return find_binary("RTSCOPE_RTPROBE", "rtprobe")


def taskmem() -> Path:
    """The tasks workload's native probe (cbtask/tools), built with the cbtask runtime."""
    return find_binary("RTSCOPE_TASKMEM", "taskmem")


def host_arch() -> str:
    machine = platform.machine()
    return ARCHES.get(machine, machine)


def for_arch(tool: str, arch: str, this_machine: bool = False) -> Path:
    """`tool` (rtprobe or taskmem) to run on a machine of `arch`. On this machine: the usual one ($RTSCOPE_RTPROBE
    / $RTSCOPE_TASKMEM, the checkout's build or the wheel's, PATH). Elsewhere: the static cross build (the
    wheel's copy when installed), else this host's build when the arches match."""
    native = {"rtprobe": rtprobe, "taskmem": taskmem}[tool]
    if this_machine:
        return native()
    cross = shipped_probe(tool, arch)
    if cross is not None and os.access(cross, os.X_OK):
        return cross
    if arch == host_arch():
        return native()
    if IN_CHECKOUT:
        raise RtscopeError(f"{tool} for {arch} is not built: run `make cross` (static builds for "
                           f"{', '.join(PROBE_ARCHES)} with Debian's cross compilers)")
    raise RtscopeError(f"no {tool} for {arch}: this rtscope carries static builds for {', '.join(PROBE_ARCHES)}")


BEAM_BUILD_HINT = "cd beam && MIX_ENV=prod mix compile (or: make beam)"


def beam_ebin() -> Path:
    """The compiled BEAM harness: $RTSCOPE_BEAM_EBIN, else the checkout's prod build (installed: the wheel's copy)."""
    if os.environ.get("RTSCOPE_BEAM_EBIN"):
        path = Path(os.environ["RTSCOPE_BEAM_EBIN"])
        if not (path / "rtscope.app").is_file():
            raise RtscopeError(f"RTSCOPE_BEAM_EBIN={path} holds no rtscope.app (a compiled BEAM harness)")
        return path
    path = shipped("beam/ebin")
    if not (path / "rtscope.app").is_file():
        if not IN_CHECKOUT:
            raise RtscopeError(f"this rtscope was installed without its BEAM harness ({path} holds no rtscope.app)")
        raise RtscopeError(f"the BEAM harness is not built: run `{BEAM_BUILD_HINT}`")
    return path


def elixir() -> str:
    found = shutil.which("elixir")
    if found is None:
        raise RtscopeError("elixir is not installed: sudo apt-get install -y elixir erlang-dev")
    return found


def specs_dir() -> Path:
    """The shipped experiment specs (specs/ in a checkout)."""
    return shipped("specs")


def shipped_specs() -> list[Path]:
    return sorted(specs_dir().glob("*.toml"))


def find_spec(arg: str | Path) -> Path:
    """A spec given on the command line: the file when it exists, else the shipped spec it names (`demo`,
    `demo.toml` or `specs/demo.toml`, from any directory)."""
    path = Path(arg)
    if path.exists():
        return path
    if len(path.parts) == 1 or path.parent == Path("specs"):
        candidate = specs_dir() / (path.name if path.suffix == ".toml" else f"{path.name}.toml")
        if candidate.is_file():
            return candidate
    names = [p.stem for p in shipped_specs()]
    raise UsageError(f"no spec {arg}: no such file, and not a shipped spec (shipped: {choices(names)}; "
                     "`rtscope specs` lists them)")


def build_info() -> dict:
    """The version and the commit this rtscope was built from: recorded in the wheel; in a checkout, asked of
    git (commit None when git cannot say)."""
    recorded = PACKAGE_DIR / DATA_DIR / BUILD_INFO
    if not IN_CHECKOUT and recorded.is_file():
        return json.loads(recorded.read_text())
    return {"version": __version__, "commit": git_commit(REPO_DIR)}
