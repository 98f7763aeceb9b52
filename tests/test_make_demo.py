"""`make demo` shows what it does, not compiler notes: each build step is one line, the compilers' output goes to a
log file, and the armhf cross build no longer prints GCC's `-Wpsabi` notes (about 200 lines before)."""

from __future__ import annotations

import shutil
import subprocess

import pytest

from rtscope.paths import repo_file

pytestmark = [pytest.mark.real,
              pytest.mark.skipif(shutil.which("arm-linux-gnueabihf-g++") is None or shutil.which("make") is None,
                                 reason="needs make and Debian's armhf cross compiler (make setup installs them)")]

ROOT = repo_file()


def test_setup_quietly_says_a_line_a_step_and_keeps_the_log(tmp_path):
    log = tmp_path / "build.log"
    r = subprocess.run(["make", "--no-print-directory", "-C", ROOT, "setup-quietly", f"BUILD_LOG={log}"],
                       capture_output=True, text=True, timeout=600, stdin=subprocess.DEVNULL)
    assert r.returncode == 0, r.stdout + r.stderr
    steps = [line for line in r.stdout.splitlines() if line.startswith("building ")]
    assert [s.rsplit(" ... ", 1)[1] for s in steps] == ["done"] * 5, r.stdout
    assert "note:" not in r.stdout + r.stderr and f"(the build's output is in {log})" in r.stdout
    assert log.exists()


def test_armhf_cross_build_prints_no_psabi_notes(tmp_path):
    """The armhf taskmem, built static into a directory of its own: no `parameter passing ... changed in GCC 7.1`
    note (its -Wno-psabi: a static program has no code from an older compiler to disagree with)."""
    r = subprocess.run(["make", "--no-print-directory", "-C", ROOT / "cbtask", "cross-armhf", f"BUILD={tmp_path}"],
                       capture_output=True, text=True, timeout=900, stdin=subprocess.DEVNULL)
    assert r.returncode == 0, r.stdout[-2000:] + r.stderr[-2000:]
    assert (tmp_path / "cross" / "armhf" / "taskmem").exists()
    assert "note:" not in r.stdout + r.stderr and "changed in GCC 7.1" not in r.stderr, r.stderr[:2000]
