"""Copy what a run needs to a target once per version: by content hash into the target's cache directory.

    <workdir>/cache/<sha256 prefix>/<name>

A second experiment (or a second run) finds the file there and copies
nothing; a new build has a new hash and lands beside the old one. On the
local target nothing is copied: the files are used where they are.
"""

from __future__ import annotations

import hashlib
import posixpath
from pathlib import Path

from .base import Target, TargetError

HASH_CHARS = 16


def _digest_file(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()[:HASH_CHARS]


def _digest_tree(root: Path) -> str:
    h = hashlib.sha256()
    for f in sorted(p for p in root.rglob("*") if p.is_file()):
        h.update(str(f.relative_to(root)).encode() + b"\0" + f.read_bytes() + b"\0")
    return h.hexdigest()[:HASH_CHARS]


def _present(target: Target, path: str, test: str) -> bool:
    return target.run(["test", test, path], timeout=60).returncode == 0


def place_file(target: Target, local: Path, mode: int = 0o755) -> str:
    """The path of `local` on the target, copied there first unless this version is cached."""
    if target.is_local:
        return str(local)
    key = ("file", str(local), _digest_file(local))
    if key in target.deployed:
        return target.deployed[key]
    remote_dir = posixpath.join(target.workdir, "cache", key[2])
    remote = posixpath.join(remote_dir, local.name)
    if not _present(target, remote, "-x" if mode & 0o111 else "-f"):
        target.check(["mkdir", "-p", remote_dir], "creating the deploy cache")
        target.put(str(local), remote, mode)
    target.deployed[key] = remote
    return remote


def place_tree(target: Target, local: Path) -> str:
    """A directory (the compiled BEAM harness) on the target, cached by the hash of all its files."""
    if target.is_local:
        return str(local)
    key = ("tree", str(local), _digest_tree(local))
    if key in target.deployed:
        return target.deployed[key]
    remote = posixpath.join(target.workdir, "cache", key[2], local.name)
    done = posixpath.join(remote, ".rtscope-complete")
    if not _present(target, done, "-f"):
        files = sorted(p for p in local.rglob("*") if p.is_file())
        dirs = sorted({posixpath.join(remote, str(p.parent.relative_to(local))) for p in files})
        target.check(["mkdir", "-p", remote, *dirs], "creating the deploy cache")
        for f in files:
            target.put(str(f), posixpath.join(remote, str(f.relative_to(local))), 0o644)
        target.check(["touch", done], "marking the deployed tree complete")
    target.deployed[key] = remote
    return remote


def require_file(path: Path, what: str, hint: str) -> Path:
    if not path.is_file():
        raise TargetError(f"{what} is not built ({path}): run `{hint}`")
    return path
