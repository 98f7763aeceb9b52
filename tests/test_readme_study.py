"""The README's study example on the real Erlang VM (issue 50, item 5): `rtscope run specs/nerves-rt.toml`, then
`rtscope recommend --experiment nerves-rt --goal p99` as the README prints it, piped at 80 columns. The spec is the
shipped one with 20 calls a run instead of the quick scale's 200 (the run takes a minute, not several); what the
command makes of a store shaped like it: tests/test_cli_width_units.py."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from rtscope.paths import repo_file
from rtscope.runtimes import RUNTIMES

pytestmark = pytest.mark.real

README = repo_file("README.md").read_text()
RECOMMEND = "rtscope recommend --experiment nerves-rt --goal p99"


def rtscope(cwd, *args, narrow: bool = False) -> subprocess.CompletedProcess:
    """The CLI as a user's shell runs it, piped, COLUMNS=80; narrow: every line of both streams at most 80 wide
    (recommend's; run's stored-results tables are laid out as wide as they need when piped, docs/cli.md)."""
    r = subprocess.run([sys.executable, "-m", "rtscope", *args], cwd=cwd, capture_output=True, text=True,
                       env={**os.environ, "COLUMNS": "80"}, timeout=600)
    for stream in (r.stdout, r.stderr) if narrow else ():
        assert all(len(line) <= 80 for line in stream.splitlines()), stream
    return r


def test_readme_run_then_recommend(tmp_path):
    why = RUNTIMES["beam"].unavailable()
    if why:
        pytest.skip(why)
    assert RECOMMEND in README and "rtscope run specs/nerves-rt.toml" in README
    text = repo_file("specs", "nerves-rt.toml").read_text()
    assert "[scale.quick.params]\niterations = 200\n" in text
    (tmp_path / "specs").mkdir()
    (tmp_path / "specs" / "nerves-rt.toml").write_text(
        text.replace("[scale.quick.params]\niterations = 200\n", "[scale.quick.params]\niterations = 20\n"))
    r = rtscope(tmp_path, "run", "specs/nerves-rt.toml")
    assert r.returncode == 0, r.stderr
    r = rtscope(tmp_path, *RECOMMEND.split()[1:], narrow=True)
    assert r.returncode == 0, r.stderr
    out = " ".join(r.stdout.split())
    for variant in ("sum", "fib", "sleep"):     # one recommendation per variant, against the VM's defaults
        assert f"exec {variant}, minimise p99:" in out
        assert f"{variant} (beam) fullsweep_after=65535 min_heap_size=233 priority=normal" in out
    assert "otp_release" not in out and "vm_flags" not in out
