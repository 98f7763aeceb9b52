"""Kernel files a setting changes on a target, and their original values put back: at the run's end, whatever
ends it, and after a `kill -9` of rtscope at the next run on that target.

`files_changed(setting, writes, ctx)` first keeps the original values in a journal on the target,
`/run/rtscope/undo/<host>-<pid>-<random>.undo` (a tmpfs: a reboot, which resets the values, empties it too),
then writes the new values (one round trip for all files), checks that the kernel took them, and on exit
writes the originals back with signals held and removes the journal. A journal whose rtscope (of this host) is
gone was left by a `kill -9`: `restore_stale(target)`, which the runner calls once per connection before the
first run applies anything, writes its originals back (also under `rtscope run --resume`).
"""

from __future__ import annotations

import posixpath
import secrets
from contextlib import contextmanager
from typing import Callable, Iterator

from ..errors import RtscopeError
from ..signals import held_signals
from ..targets import Target, at_open
from ..targets.owners import Owner, owned_name, owner_of
from .base import RunContext

JOURNAL_DIR = "/run/rtscope/undo"
_CHECKED = ("undo", "stale journals restored")  # target.deployed key: once per connection

# Writes "$2" into "$1", "$4" into "$3"...: one line per file, "ok" or "fail <the shell's error>".
_WRITE = r"""
while [ $# -ge 2 ]; do
  if err=$( { printf '%s\n' "$2" > "$1"; } 2>&1 ); then echo ok; else echo "fail $err" | tr '\n' ' '; echo; fi
  shift 2
done
"""
_LIST = r"""
for f in "$1"/*.undo; do [ -f "$f" ] || continue; echo "== ${f##*/}"; cat "$f"; done; true
"""
_LIST_ARGV = ["sh", "-c", _LIST, "sh", JOURNAL_DIR]
at_open(_CHECKED[0], _LIST_ARGV)  # listed in the request that connects (an SSH target's): no round trip of its own


def write_many(target: Target, pairs: list[tuple[str, str]]) -> list[str | None]:
    """Write each (path, text) on the target in one round trip: None for each accepted, else the kernel's error."""
    if not pairs:
        return []
    proc = target.run(["sh", "-c", _WRITE, "sh", *[x for p in pairs for x in p]], timeout=60)
    lines = proc.stdout.splitlines()
    if proc.returncode != 0 or len(lines) != len(pairs):
        raise RtscopeError(f"target {target.name}: writing {pairs[0][0]}... failed: {proc.said()}")
    return [None if line == "ok" else _reason(line[5:]) for line in lines]


def _reason(shell_error: str) -> str:
    """'sh: 1: printf: printf: I/O error' -> 'I/O error'."""
    return shell_error.strip().rsplit(": ", 1)[-1] or "refused"


@contextmanager
def files_changed(setting: str, writes: list[tuple[str, str, str]], ctx: RunContext,
                  same: Callable[[str, str], bool] = lambda a, b: a.strip() == b.strip(),
                  skip_refused: bool = False) -> Iterator[list[tuple[str, str, str]]]:
    """Write (path, new text, original text) on the run's target; always write the originals back.

    `same(read back, written)`: whether the kernel took the value. A value the kernel refuses is an error
    naming the file and the kernel's reason, unless `skip_refused` (then it is left out, and the list yielded
    is what was changed)."""
    target: Target = ctx.target
    journal = posixpath.join(JOURNAL_DIR, owned_name("") + f"{secrets.token_hex(3)}.undo")
    text = "".join(f"{path}\t{old}\n" for path, _, old in writes)
    proc = target.run(["sh", "-c", 'mkdir -p "$1" && cat > "$2"', "sh", JOURNAL_DIR, journal],
                      stdin=text.encode(), timeout=60)
    if proc.returncode != 0:
        raise RtscopeError(f"{setting}: cannot keep the original values in {journal} on target {target.name}: "
                           f"{proc.said()}")
    # Until the writes are known, every one may have happened: a signal that stops them midway (SIGTERM right
    # after the kernel took a value) must still have it written back.
    changed: list[tuple[str, str, str]] = list(writes)
    try:
        errors = write_many(target, [(p, new) for p, new, _ in writes])
        changed = [w for w, e in zip(writes, errors) if e is None]  # a refused write changed nothing
        refused = [(w, e) for w, e in zip(writes, errors) if e is not None]
        if refused and not skip_refused:
            (path, new, _), why = refused[0]
            raise RtscopeError(f"{setting}: the kernel refused {new} in {path}: {why}")
        now = target.read_files([p for p, _, _ in changed])
        for path, new, _ in changed:
            got = now.get(path)
            if got is None or not same(got, new):
                raise RtscopeError(f"{setting}: the kernel did not take {new} in {path} (it reads {got!r})")
        if refused:
            ctx.notes.append(f"{setting}: left out what the kernel refused: "
                             + "; ".join(f"{p} ({why})" for (p, _, _), why in refused))
        yield changed
    finally:
        with held_signals():
            failed = restore(target, [(p, old) for p, _, old in reversed(changed)])
            if not failed:
                target.run(["rm", "-f", journal], timeout=60)
        if failed:
            raise RtscopeError(f"{setting}: could not write the original values back: {'; '.join(failed)} "
                               f"(they are kept in {journal} on target {target.name})")


def restore(target: Target, originals: list[tuple[str, str]]) -> list[str]:
    """Write the original values back; what failed, with why."""
    errors = write_many(target, originals)
    return [f"{path} ({why})" for (path, _), why in zip(originals, errors) if why is not None]


def stale(target: Target) -> list[tuple[str, Owner | None, list[tuple[str, str]]]]:
    """The journals on the target: (name, owner, [(path, original)]) of each one whose rtscope is not running
    (or cannot be told: made on another host)."""
    ahead = target.opened(_CHECKED[0])
    out = ahead.stdout if ahead is not None and ahead.returncode == 0 else \
        target.check(_LIST_ARGV, "listing the undo journals").stdout
    found: list[tuple[str, Owner | None, list[tuple[str, str]]]] = []
    for line in out.splitlines():
        if line.startswith("== "):
            name = line[3:]
            who = owner_of("", name.removesuffix(".undo")) if name.endswith(".undo") else None
            found.append((name, who, []))
        elif found and "\t" in line:
            path, old = line.split("\t", 1)
            found[-1][2].append((path, old))
    return [(name, who, entries) for name, who, entries in found if who is None or not who.alive]


def restore_stale(target: Target) -> list[str]:
    """Write back the originals a killed rtscope of this host left changed on the target (once per
    connection); one note per journal."""
    if target.deployed.get(_CHECKED) or target.runtimes is not None:
        return []  # checked on this connection already, or a target without a shell (a BEAM node): none there
    notes = []
    with held_signals():
        for name, who, entries in stale(target):
            if who is None or who.alive is not False:
                continue  # another host's rtscope may still run: its journal is its own
            failed = restore(target, list(reversed(entries)))
            if failed:
                raise RtscopeError(f"target {target.name}: could not write back what a killed rtscope (pid "
                                   f"{who.pid}) left changed: {'; '.join(failed)} (journal "
                                   f"{posixpath.join(JOURNAL_DIR, name)})")
            target.run(["rm", "-f", posixpath.join(JOURNAL_DIR, name)], timeout=60)
            notes.append(f"wrote back what a killed rtscope (pid {who.pid}) left changed: "
                         + ", ".join(f"{p} = {old}" for p, old in entries))
    target.deployed[_CHECKED] = True
    return notes
