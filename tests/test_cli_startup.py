"""The CLI starts light: `--help` and every `COMMAND --help` load no heavy library, `runs` and `show` on a SQLite
store no SQLAlchemy (and `runs` no numpy); and the shell completion that `rtscope --install-completion` installs
completes commands, options and import kinds.

Each check runs rtscope in a fresh interpreter and looks at what it imported (sys.modules), not at a time:
bench/cli_startup.py times it.
"""

from __future__ import annotations

import importlib
import json
import re
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from rtscope.cli import app

pytestmark = pytest.mark.fast

HEAVY = ("numpy", "scipy", "pandas", "sqlalchemy", "matplotlib", "plotly", "paramiko", "jinja2", "psycopg",
         "labgrid", "pydantic")
HEAVY_KEPT = 'm.split(".")[0] in HEAVY and "." not in m'
# Run rtscope with these arguments, then print the modules it imported that `keep` (also when it exits): by
# default the heavy top-level packages.
PROBE = """
import atexit, json, sys
atexit.register(lambda: print("\\nIMPORTED " + json.dumps(sorted(m for m in sys.modules if {keep})), file=sys.stderr))
HEAVY = {heavy!r}
sys.argv = ["rtscope", *{args!r}]
from rtscope.cli import main
main()
"""
# The same for many argument lists in one interpreter: rtscope.cli imported once, then each command run in a fork
# of it, which starts where a fresh interpreter would after that import (the parent runs no command).
PROBE_EACH = """
import atexit, json, os, sys, tempfile
HEAVY = {heavy!r}
from rtscope.cli import main
for args in {argvs!r}:
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as said:
        pid = os.fork()
        if pid == 0:
            os.dup2(out.fileno(), 1)
            code = 0
            try:
                sys.argv = ["rtscope", *args]
                main()
            except SystemExit as e:
                code = e.code if isinstance(e.code, int) else (0 if e.code is None else 1)
            sys.stdout.flush()
            atexit._run_exitfuncs()
            os.write(said.fileno(), json.dumps([code, sorted(m for m in sys.modules if {keep})]).encode())
            os._exit(0)
        os.waitpid(pid, 0)
        out.seek(0)
        said.seek(0)
        print(json.dumps([*json.loads(said.read()), out.read().decode()]))
"""
RTSCOPE_BIN = Path(sys.executable).with_name("rtscope")


def imported(*args: str, keep: str = HEAVY_KEPT) -> tuple[int, list[str], str]:
    """(exit code, heavy packages imported, stdout) of `rtscope ARGS` in a fresh interpreter (`keep`: which
    modules to list instead, a Python expression of the module name m)."""
    r = subprocess.run([sys.executable, "-c", PROBE.format(heavy=HEAVY, args=list(args), keep=keep)],
                       capture_output=True, text=True, timeout=60, env={**os.environ, "COLUMNS": "200"})
    line = [x for x in r.stderr.splitlines() if x.startswith("IMPORTED ")]
    assert line, r.stderr
    return r.returncode, json.loads(line[-1].removeprefix("IMPORTED ")), r.stdout


def imported_each(argvs: list[tuple[str, ...]]) -> list[tuple[int, list[str], str]]:
    """imported() of each argument list, in one interpreter (PROBE_EACH): its heavy packages."""
    r = subprocess.run([sys.executable, "-c", PROBE_EACH.format(heavy=HEAVY, argvs=argvs, keep=HEAVY_KEPT)],
                       capture_output=True, text=True, timeout=120, env={**os.environ, "COLUMNS": "200"})
    assert r.returncode == 0, r.stderr
    return [tuple(json.loads(line)) for line in r.stdout.splitlines()]


def command_paths() -> list[tuple[str, ...]]:
    """Every command and sub-command, as argument tuples: ("runs",), ("db", "copy"), ..."""
    import typer.main
    found = []

    def walk(group, prefix):
        for name, cmd in group.commands.items():
            found.append((*prefix, name))
            if hasattr(cmd, "commands"):
                walk(cmd, (*prefix, name))
    walk(typer.main.get_command(app), ())
    return found


def test_help_imports_nothing_heavy():
    code, heavy, out = imported("--help")
    assert code == 0 and "Commands:" in out and "runs" in out
    assert heavy == []


def test_every_command_help_imports_nothing_heavy():
    paths = command_paths()
    assert ("runs",) in paths and ("db", "copy") in paths and len(paths) >= 20
    for path, (code, heavy, out) in zip(paths, imported_each([(*path, "--help") for path in paths]), strict=True):
        assert code == 0 and "Usage: rtscope " + " ".join(path) in out, (path, out)
        assert heavy == [], (path, heavy)


def test_import_help_lists_every_importer():
    from rtscope.importers import IMPORTERS
    _, _, out = imported("import", "--help")
    text = " ".join(out.split()).replace("- ", "-")  # the help wraps long names at their hyphen
    for name in IMPORTERS:
        assert f" {name}," in text or f" {name}." in text, (name, text)


def test_import_help_loads_no_converter():
    from rtscope import importers
    for module in set(importers.KINDS.values()):  # KINDS names each module's importers, no more, no less
        converts = {imp.name for imp in importlib.import_module(f"rtscope.importers.{module}").IMPORTERS}
        assert converts == {k for k, m in importers.KINDS.items() if m == module}, module
    code, loaded, out = imported("import", "--help", keep='m.startswith("rtscope.importers.")')
    assert code == 0 and "xenomai" in out and loaded == ["rtscope.importers.base"]


def test_runs_and_show_read_sqlite_without_sqlalchemy(cli, tmp_path, make_samplefile):
    db = str(tmp_path / "store.db")
    assert cli("import", "rts", make_samplefile([100, 200, 300]), "--db", db).code == 0
    code, heavy, out = imported("runs", "--db", db)
    assert code == 0 and "exec" in out and "sum" in out
    assert heavy == []  # the store read with sqlite3 (store/sqlite_read.py), nothing of the analysis
    code, heavy, out = imported("show", "1", "--db", db)
    assert code == 0 and re.search(r"AVG +│ +0\.2 │", out), out  # the mean of 100, 200, 300 ns, in µs
    assert heavy == ["numpy"]  # the statistics need numpy, and nothing else heavy
    code, heavy, _ = imported("show", "1", "--db", db, "--json")
    assert code == 0 and heavy == ["numpy"]


@pytest.mark.skipif(shutil.which("bash") is None or not RTSCOPE_BIN.exists(), reason="needs bash and the "
                    "installed rtscope command")
def test_installed_bash_completion_completes(tmp_path):
    env = {**os.environ, "HOME": str(tmp_path), "PATH": f"{RTSCOPE_BIN.parent}:{os.environ['PATH']}"}
    # `; true` keeps bash as rtscope's parent, so that the shell is detected as a user's would be.
    r = subprocess.run(["bash", "-c", "rtscope --install-completion; true"], env=env, capture_output=True,
                       text=True, timeout=60)
    script = tmp_path / ".bash_completions" / "rtscope.sh"
    assert "bash completion installed" in r.stdout and script.is_file(), r.stdout + r.stderr
    assert str(script) in (tmp_path / ".bashrc").read_text()
    complete = """source ~/.bashrc
    for words in "rtscope ru" "rtscope import cyclictest-" "rtscope show 1 --j" "rtscope db c"; do
        COMP_WORDS=($words); COMP_CWORD=$((${#COMP_WORDS[@]} - 1)); _rtscope_completion rtscope
        echo "$words -> ${COMPREPLY[*]}"
    done"""
    r = subprocess.run(["bash", "-c", complete], env=env, capture_output=True, text=True, timeout=60)
    assert r.stdout.splitlines() == [
        "rtscope ru -> runs run",
        "rtscope import cyclictest- -> cyclictest-json cyclictest-histogram cyclictest-verbose",
        "rtscope show 1 --j -> --json",
        "rtscope db c -> copy",
    ], r.stdout + r.stderr
