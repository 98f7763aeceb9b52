"""The Debian packages rtscope uses (system_deps.txt, the list scripts/system-deps.sh installs from) and which of
them this machine has: what `rtscope doctor` prints."""

from __future__ import annotations

import glob
import os
import shutil
from dataclasses import dataclass
from pathlib import Path

LIST = Path(__file__).with_name("system_deps.txt")
USES = ("run", "build", "test")


@dataclass(frozen=True)
class Dependency:
    check: str     # cmd:NAME, file:PATH or glob:PATTERN
    package: str   # the Debian package that brings it
    use: str       # run, build or test
    enables: str   # what rtscope can do with it

    @property
    def name(self) -> str:
        """The command, file or pattern looked for."""
        return self.check.partition(":")[2]

    def present(self) -> bool:
        kind, _, what = self.check.partition(":")
        if kind == "cmd":
            return shutil.which(what) is not None
        if kind == "file":
            return os.path.exists(what)
        return bool(glob.glob(what))


def load(path: Path = LIST) -> list[Dependency]:
    deps = []
    for number, line in enumerate(path.read_text().splitlines(), 1):
        if not line.strip() or line.lstrip().startswith("#"):
            continue
        fields = line.split(None, 3)
        if (len(fields) < 4 or fields[2] not in USES
                or fields[0].partition(":")[0] not in ("cmd", "file", "glob")):
            raise ValueError(f"{path}:{number}: expected CHECK PACKAGE USE WHAT-IT-ENABLES "
                             f"(CHECK cmd:|file:|glob:, USE one of {', '.join(USES)}): {line!r}")
        deps.append(Dependency(*fields))
    return deps


def install_command(missing: list[Dependency]) -> str | None:
    """The one apt-get line for the packages of `missing`, None when nothing is missing."""
    packages = sorted({d.package for d in missing})
    return f"sudo apt-get install -y {' '.join(packages)}" if packages else None
