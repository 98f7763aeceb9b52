"""System setting `load` without a load generator: bad values refused, the generators' command lines (one worker per
CPU), a missing tool reported as unavailable. Started and stopped for real (stress-ng), also on error, SIGTERM
and Ctrl-C: tests/test_load.py."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from rtscope.settings import loadgen as load
from rtscope.errors import RtscopeError
from rtscope.settings.registry import SETTINGS

pytestmark = pytest.mark.fast


def spec(tmp_path, load_kind: str, workload: str = "exec", params: str = "iterations = 20\npause_ms = 1",
         variant: str = "sleep") -> Path:
    p = tmp_path / "spec.toml"
    p.write_text(f'name = "load"\n[[workload]]\nname = "{workload}"\nvariants = ["{variant}"]\nruntime = "native"\n'
                 f'[workload.params]\n{params}\n[workload.settings]\nload = "{load_kind}"\n')
    return p


def test_bad_load_values(cli, db, tmp_path, monkeypatch):
    r = cli("run", spec(tmp_path, "disk"), "--db", db)
    assert r.code == 2 and "one of none, cpu, io, vm, hackbench" in r.err
    monkeypatch.setattr(shutil, "which", lambda name: None)
    with pytest.raises(RtscopeError, match="apt-get install -y rt-tests"):
        load.Load("hackbench", tmp_path).start()
    assert SETTINGS["load"].scope == "system"


@pytest.mark.parametrize("kind, tool", [("cpu", "stress-ng"), ("io", "stress-ng"), ("vm", "stress-ng"),
                                        ("hackbench", "hackbench")])
def test_commands_cover_every_cpu(kind, tool, tmp_path):
    argv = load.command(kind, 4, tmp_path)
    assert argv[0] == tool and "4" in argv
    if kind == "io":
        assert str(tmp_path) in argv  # its files go to the run's temporary directory


def test_missing_load_tool_is_reported_as_unavailable(monkeypatch):
    from rtscope.settings.registry import SETTINGS
    monkeypatch.setattr(shutil, "which", lambda tool: None)
    assert SETTINGS["load"].unavailable("none") is None
    assert SETTINGS["load"].unavailable("cpu") == \
        "load cpu needs stress-ng, which is not installed: sudo apt-get install -y stress-ng"
    assert "hackbench" in SETTINGS["load"].unavailable("hackbench")
