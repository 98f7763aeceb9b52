"""Writing files so that nobody ever sees half of one."""

from __future__ import annotations

import os
import tempfile
import tomllib
from pathlib import Path

from .errors import UsageError


def write_atomic(path: str | os.PathLike, data: bytes | str, what: str = "file") -> Path:
    """Write through a temp file in the same directory, then rename over `path`.

    A crash leaves the old file (or none), never a partial one. The file gets
    the usual permissions, 0666 less the umask, not the temp file's 0600.
    """
    path = Path(path)
    try:
        fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    except OSError as e:
        raise UsageError(f"cannot write {what} {path}: {e.strerror or e}") from None
    try:
        umask = os.umask(0)
        os.umask(umask)
        os.fchmod(fd, 0o666 & ~umask)
        with os.fdopen(fd, "wb") as f:
            f.write(data.encode("utf-8") if isinstance(data, str) else data)
        os.replace(tmp, path)
    except BaseException as e:
        Path(tmp).unlink(missing_ok=True)
        if isinstance(e, OSError):
            raise UsageError(f"cannot write {what} {path}: {e.strerror or e}") from None
        raise
    return path


def read_toml_table(path: str | os.PathLike, key: str, what: str, optional: bool = False) -> object:
    """The `[key]` table of a TOML file given by the user (a targets or environments file); None when it has
    none and the table is optional."""
    try:
        raw = tomllib.loads(Path(path).read_text())
    except OSError as e:
        raise UsageError(f"cannot read {what} file {path}: {e.strerror}") from None
    except tomllib.TOMLDecodeError as e:
        raise UsageError(f"{path}: not valid TOML: {e}") from None
    if key not in raw:
        if optional:
            return None
        raise UsageError(f"{path}: no [{key}] table")
    return raw[key]
