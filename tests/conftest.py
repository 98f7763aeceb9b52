"""Shared pytest fixtures: run the CLI in-process, make sample files, find the probe; the test tiers.

Every test file declares its tier (docs/testing.md): `pytestmark = pytest.mark.fast` (`make check`: Python and
the built probes only) or `pytest.mark.real` (the real components: root, tracefs, QEMU, sshd, PostgreSQL, the
Erlang VM, a browser, real timing). A test with neither or both is a collection error."""

from __future__ import annotations

import signal
import sys
import warnings
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pytest

# The suite's rules, as hooks: each test's tier, and the one rule for judging real timing (docs/testing.md).
from registries import definitions_forgotten
from realtiming import pytest_runtest_protocol, pytest_terminal_summary, record_stall  # noqa: F401
from ordering import longest_first
from tiers import refuse_wrong_tiers

from rtscope import samplefile
from rtscope.paths import repo_file

RTPROBE = repo_file("probes", "build", "rtprobe")


def pytest_configure(config):
    """Ctrl-C reaches the rtscope processes the tests start, however the suite was started: a shell without job
    control starts a background command (`make test &`) with SIGINT ignored, which every child inherits across
    exec (a Python that starts with it ignored never installs its KeyboardInterrupt), and the tests that send
    SIGINT would see it ignored. A handler, unlike an ignored signal, is reset to the default in a child."""
    if signal.getsignal(signal.SIGINT) == signal.SIG_IGN:
        signal.signal(signal.SIGINT, signal.default_int_handler)


def pytest_collection_modifyitems(config, items):
    """Each test in one tier (tests/tiers.py); the files in the order `make test`'s first phase starts them, the
    longest first (tests/ordering.py)."""
    refuse_wrong_tiers(items)
    longest_first(items)


@dataclass
class Result:
    code: int
    out: str
    err: str


# The commands whose Python warnings fail a test (`-W error` for the in-process call): none may reach a user
# (docs/testing.md). The categories Python shows nobody by default stay as they are.
WARNINGS_FAIL = {"show", "tail", "report", "runs", "import"}
HIDDEN_BY_DEFAULT = (DeprecationWarning, PendingDeprecationWarning, ImportWarning, ResourceWarning)


@contextmanager
def warnings_fail(command: str):
    """A warning a user would see is an error inside `rtscope COMMAND` (one of WARNINGS_FAIL)."""
    with warnings.catch_warnings():
        if command in WARNINGS_FAIL:
            warnings.simplefilter("error")
            for category in HIDDEN_BY_DEFAULT:
                warnings.simplefilter("ignore", category)
        yield


@pytest.fixture
def cli(capsys, monkeypatch):
    """Call the rtscope CLI in this process: cli("runs", "--json") -> Result. In the commands of WARNINGS_FAIL a
    Python warning is an error (the test fails with it)."""
    from rtscope.cli import main

    from rtscope import targets
    from rtscope.settings import environments

    def call(*args: str) -> Result:
        monkeypatch.setattr(sys, "argv", ["rtscope", *map(str, args)])
        code = 0
        # What a spec defines (targets, environments) dies with its process: one call's, with the call.
        registries = (targets.TARGETS, environments.ENVIRONMENTS)
        defined = [dict(r) for r in registries]
        try:
            with warnings_fail(str(args[0]) if args else ""):
                main()
        except SystemExit as e:
            code = e.code if isinstance(e.code, int) else (0 if e.code is None else 1)
        finally:
            for registry, before in zip(registries, defined):
                registry.clear()
                registry.update(before)
        captured = capsys.readouterr()
        return Result(code, captured.out, captured.err)

    return call


@pytest.fixture(scope="module")
def browser():
    """A headless Chromium (served.py) for a test module; skipped where it is not installed."""
    from served import browser_missing, chromium
    if (why := browser_missing()):
        pytest.skip(why)
    with chromium() as b:
        yield b


@pytest.fixture
def db(tmp_path) -> str:
    return str(tmp_path / "store.db")


def exec_samplefile(path: Path, values, variant: str = "sum", settings: dict | None = None, **extra) -> Path:
    cols = [samplefile.Column("duration", "ns", "i64"), samplefile.Column("cpu", "", "i64")]
    header = samplefile.make_header("exec", variant, "native", "test", "0", "2026-01-01T00:00:00Z", cols,
                                    settings or {}, {"n": 1, "iterations": len(values)}, **extra)
    samplefile.write(path, header, {"duration": np.asarray(values), "cpu": np.zeros(len(values))},
                     {"finished_at": "2026-01-01T00:00:01Z"})
    return path


@pytest.fixture
def make_samplefile(tmp_path):
    def make(values, name: str = "run.rts", **kw) -> Path:
        return exec_samplefile(tmp_path / name, values, **kw)
    return make


@pytest.fixture(scope="session")
def rtprobe() -> Path:
    if not RTPROBE.exists():
        pytest.fail(f"{RTPROBE} is not built: run `make -C probes` (make test does)")
    return RTPROBE


@pytest.fixture(autouse=True)
def clean_targets():
    """Targets and environments defined by a test are forgotten after it (a module's fixture keeps its own for
    its tests: it is set up first; one that parses a spec for its store forgets them itself, tests/registries.py).
    Every test: a QEMU target left defined made each later `rtscope targets` boot its guest; a shipped spec parsed
    (its [environments.pod]) made a later test's own `pod` a redefinition."""
    with definitions_forgotten():
        yield


@pytest.fixture(autouse=True)
def state_dir(tmp_path_factory, monkeypatch) -> Path:
    """Each test's own rtscope state directory (where the spool of an unreachable store is kept, store/spool.py),
    inherited by the rtscope processes it starts: nothing in the home directory."""
    d = tmp_path_factory.mktemp("state")
    monkeypatch.setenv("RTSCOPE_STATE_DIR", str(d))
    return d
