"""Shared pytest fixtures: run the CLI in-process, make sample files, find the probe."""

from __future__ import annotations

import sys
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pytest

from rtscope import samplefile
from rtscope.paths import repo_file

RTPROBE = repo_file("probes", "build", "rtprobe")


# `make test` runs the tests in two processes (pytest-xdist, --dist loadgroup). The modules below run one after
# the other in one of them: their figures depend on the machine's timing (a culprit's share of the tail, a
# verdict on real runs, a QEMU guest's boot under TCG), they load every CPU (stress-ng), or they read state the
# whole machine shares (tracefs instances, sched_rt_runtime_us and IRQ affinities). Every other module runs as a
# unit of its own (its module fixtures made once) in whichever process is free.
ONE_AT_A_TIME = frozenset("""
    test_beam_node test_cli_output test_environments test_explain test_explain_beam_kernel test_explain_histogram
    test_explain_qemu test_explain_throttled test_gate test_gpio test_kernel_cmdline_qemu test_load test_monitor
    test_one_number test_plan test_qemu_target test_remedies test_remedy_settings test_report_lab test_rtla
    test_ssh_target test_timer test_tune_real test_verdicts""".split())


def pytest_collection_modifyitems(config, items):
    for item in items:
        module = item.path.stem
        item.add_marker(pytest.mark.xdist_group("machine" if module in ONE_AT_A_TIME else module))


@dataclass
class Result:
    code: int
    out: str
    err: str


@pytest.fixture
def cli(capsys, monkeypatch):
    """Call the rtscope CLI in this process: cli("runs", "--json") -> Result."""
    from rtscope.cli import main

    from rtscope import targets

    def call(*args: str) -> Result:
        monkeypatch.setattr(sys, "argv", ["rtscope", *map(str, args)])
        code = 0
        defined = dict(targets.TARGETS)   # what a spec defines dies with its process: one call's, with the call
        try:
            main()
        except SystemExit as e:
            code = e.code if isinstance(e.code, int) else (0 if e.code is None else 1)
        finally:
            targets.TARGETS.clear()
            targets.TARGETS.update(defined)
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
    """Targets defined by a test are forgotten after it (a module's fixture keeps its own for its tests: it is
    set up first). Every test: a QEMU target left defined made each later `rtscope targets` boot its guest."""
    from rtscope import targets
    before = dict(targets.TARGETS)
    yield
    targets.TARGETS.clear()
    targets.TARGETS.update(before)
