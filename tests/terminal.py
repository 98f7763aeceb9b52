"""rtscope as a user runs it, in a fresh process: stdout on an 80 × 24 pseudo-terminal, or piped."""

from __future__ import annotations

import fcntl
import os
import pty
import re
import struct
import subprocess
import sys
import termios
from dataclasses import dataclass
from pathlib import Path

RTSCOPE = Path(sys.executable).with_name("rtscope")
ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]|\x1b\][^\x07\x1b]*(?:\x07|\x1b\\)")


@dataclass
class Out:
    code: int
    out: str
    err: str


def env() -> dict:
    e = {k: v for k, v in os.environ.items() if k not in ("RTSCOPE_DB", "NO_COLOR", "FORCE_COLOR")}
    return {**e, "COLUMNS": "80", "LINES": "24", "TERM": "xterm-256color"}


def piped(cwd: Path, *args) -> Out:
    r = subprocess.run([str(RTSCOPE), *map(str, args)], cwd=cwd, env=env(), capture_output=True, text=True,
                       timeout=600, stdin=subprocess.DEVNULL)
    return Out(r.returncode, r.stdout, r.stderr)


def on_terminal(cwd: Path, *args) -> Out:
    """stdout on a pseudo-terminal of 80 × 24 (stderr to a file): what a user at a terminal reads, without the
    escape sequences of its colours."""
    master, slave = pty.openpty()
    fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", 24, 80, 0, 0))
    err = cwd / ".stderr"
    with open(err, "w") as e:
        proc = subprocess.Popen([str(RTSCOPE), *map(str, args)], cwd=cwd, env=env(), stdin=subprocess.DEVNULL,
                                stdout=slave, stderr=e)
    os.close(slave)
    chunks = []
    while True:
        try:
            data = os.read(master, 65536)
        except OSError:  # EIO: the process is gone and the terminal closed
            break
        if not data:
            break
        chunks.append(data)
    os.close(master)
    code = proc.wait(timeout=600)
    text = ANSI.sub("", b"".join(chunks).decode()).replace("\r\n", "\n")
    return Out(code, text, err.read_text())


