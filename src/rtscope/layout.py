"""The pieces an installed rtscope carries besides its Python code, and where each one is in a checkout.

A wheel holds them in `rtscope/data/` (setup.py copies them there from the checkout's build output when the
wheel is built); in a checkout rtscope uses the build output itself (`paths.py` decides which). This module
imports nothing from rtscope: setup.py loads it by file path, so the wheel and the checkout share one layout.
"""

from __future__ import annotations

import subprocess
from pathlib import Path

DATA_DIR = "data"  # inside the installed package
PROBE_ARCHES = ("x86_64", "aarch64", "armhf")  # what `make cross` builds: static, any Linux of that arch
PROBE_ELF_MACHINE = {"x86_64": 62, "aarch64": 183, "armhf": 40}  # ELF e_machine: EM_X86_64, EM_AARCH64, EM_ARM
PROBE_TOOLS = {"rtprobe": "probes", "taskmem": "cbtask"}  # tool -> the checkout folder that builds it
BUILD_INFO = "build.json"  # in DATA_DIR: version and commit of the build


def probe(tool: str, arch: str) -> str:
    """The piece name of `tool` built for `arch`."""
    return f"probes/{arch}/{tool}"


# piece (its path below rtscope/data/ in a wheel) -> its path in a checkout, relative to the repository
PIECES = {
    "specs": "specs",
    "beam/ebin": "beam/_build/prod/lib/rtscope/ebin",
    "beam/vm_flags.json": "beam/priv/vm_flags.json",
    **{probe(tool, arch): f"{folder}/build/cross/{arch}/{tool}"
       for tool, folder in PROBE_TOOLS.items() for arch in PROBE_ARCHES},
}


def git_commit(repo: Path) -> str | None:
    """The commit a checkout is at, with "-dirty" when it has uncommitted changes; None outside git."""
    def git(*args: str) -> str | None:
        try:
            proc = subprocess.run(["git", "-C", str(repo), *args], capture_output=True, text=True, timeout=10)
        except (OSError, subprocess.TimeoutExpired):
            return None
        return proc.stdout.strip() if proc.returncode == 0 else None

    commit = git("rev-parse", "HEAD")
    if commit is None:
        return None
    return commit + ("-dirty" if git("status", "--porcelain", "--untracked-files=no") else "")
