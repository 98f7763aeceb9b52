"""A real PostgreSQL server for the store tests: initdb in a temporary directory, on 127.0.0.1.

Debian's postgresql package provides the server binaries; the server runs as
user postgres (initdb refuses root) with trust authentication on loopback
only, and is stopped (pg_ctl stop -m immediate) when the tests end.
"""

from __future__ import annotations

import glob
import os
import shutil
import socket
import subprocess
import tempfile
from pathlib import Path


def bindir() -> Path | None:
    found = sorted(glob.glob("/usr/lib/postgresql/*/bin/initdb"))
    return Path(found[-1]).parent if found else None


def available() -> str | None:
    if bindir() is None:
        return "PostgreSQL is not installed (apt-get install -y postgresql)"
    if os.geteuid() == 0:
        try:
            import pwd
            pwd.getpwnam("postgres")
        except KeyError:
            return "no postgres user to run the server as"
    return None


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class PgServer:
    """`base` must be reachable by user postgres: a fresh directory of /tmp, not pytest's 0700 tree."""

    def __init__(self, base: Path | None = None):
        self.base = base or Path(tempfile.mkdtemp(prefix="rtscope-pg-"))
        self.data = self.base / "data"
        self.port = _free_port()
        self.bin = bindir()

    def _as_postgres(self, argv: list[str], **kw) -> subprocess.CompletedProcess:
        prefix = ["runuser", "-u", "postgres", "--"] if os.geteuid() == 0 else []
        return subprocess.run(prefix + argv, check=True, capture_output=True, text=True, **kw)

    def start(self) -> "PgServer":
        self.base.mkdir(parents=True, exist_ok=True)
        if os.geteuid() == 0:
            shutil.chown(self.base, "postgres")
        self._as_postgres([str(self.bin / "initdb"), "-D", str(self.data), "-A", "trust", "-U", "postgres",
                           "--no-sync"])
        self.resume()
        return self

    def pause(self) -> None:
        """Stop the server, keeping its databases (a database that goes down)."""
        self._as_postgres([str(self.bin / "pg_ctl"), "-D", str(self.data), "-m", "immediate", "stop"])

    def resume(self) -> None:
        """Start the server (again) on the same port."""
        self._as_postgres([str(self.bin / "pg_ctl"), "-D", str(self.data), "-l", str(self.base / "log"), "-w",
                           "-o", f"-h 127.0.0.1 -p {self.port} -k {self.base} -c fsync=off -c max_connections=100",
                           "start"])

    def url(self, database: str) -> str:
        return f"postgresql://postgres@127.0.0.1:{self.port}/{database}"

    def create_database(self, name: str) -> str:
        self._as_postgres([str(self.bin / "createdb"), "-h", "127.0.0.1", "-p", str(self.port), "-U", "postgres",
                           name])
        return self.url(name)

    def stop(self) -> None:
        if (self.data / "postmaster.pid").exists():
            self.pause()
        shutil.rmtree(self.base, ignore_errors=True)
