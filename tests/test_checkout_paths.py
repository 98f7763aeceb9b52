"""In a checkout rtscope uses what `make` builds there (paths.py, docs/install.md); shipped specs by name;
`rtscope specs`, `--version`, `doctor` and the system_deps.txt list. The installed wheel: tests/test_wheel.py."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from rtscope import paths, system_deps
from rtscope.errors import UsageError
from rtscope.layout import PIECES, PROBE_ARCHES, git_commit
from rtscope.version import __version__

pytestmark = pytest.mark.fast

REPO = paths.REPO_DIR


def test_a_checkout_uses_its_own_build_output():
    assert paths.IN_CHECKOUT
    assert paths.rtprobe() == REPO / "probes" / "build" / "rtprobe"
    assert paths.taskmem() == REPO / "cbtask" / "build" / "taskmem"
    for arch in PROBE_ARCHES:
        assert paths.for_arch("rtprobe", arch) == REPO / "probes" / "build" / "cross" / arch / "rtprobe"
        assert paths.for_arch("taskmem", arch) == REPO / "cbtask" / "build" / "cross" / arch / "taskmem"
    assert paths.beam_ebin() == REPO / "beam" / "_build" / "prod" / "lib" / "rtscope" / "ebin"
    assert paths.specs_dir() == REPO / "specs"
    assert all(paths.shipped(piece) == REPO / rel for piece, rel in PIECES.items())


def test_a_spec_is_a_file_or_a_shipped_spec_by_name(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    for arg in ("demo", "demo.toml", "specs/demo.toml"):
        assert paths.find_spec(arg) == REPO / "specs" / "demo.toml"
    (tmp_path / "specs").mkdir()
    (tmp_path / "specs" / "demo.toml").write_text('name = "mine"\n')
    assert paths.find_spec("specs/demo.toml") == Path("specs/demo.toml")  # a file here comes first, as given
    with pytest.raises(UsageError, match=r"no spec other/demo.toml: .*shipped: demo, gpio, kernel-latency"):
        paths.find_spec("other/demo.toml")
    with pytest.raises(UsageError, match="`rtscope specs` lists them"):
        paths.find_spec("nosuch")


def test_specs_lists_and_copies_the_shipped_specs(cli, tmp_path):
    r = cli("specs", "--json")
    assert r.code == 0, r.err
    listed = {s["name"]: s for s in json.loads(r.out)}
    assert set(listed) == {p.stem for p in (REPO / "specs").glob("*.toml")}
    assert listed["demo"]["description"].startswith("Execution time of sum(4000)")
    assert "kernel-latency" in cli("specs").out

    r = cli("specs", "--copy", tmp_path / "mine")
    assert r.code == 0, r.err
    assert sorted(p.name for p in (tmp_path / "mine").iterdir()) == sorted(f"{n}.toml" for n in listed)
    (tmp_path / "mine" / "demo.toml").write_text("# edited\n")
    r = cli("specs", "--copy", tmp_path / "mine")
    assert r.code == 2 and "already there; nothing copied" in r.err
    assert (tmp_path / "mine" / "demo.toml").read_text() == "# edited\n"
    (tmp_path / "file").write_text("")
    r = cli("specs", "--copy", tmp_path / "file")
    assert r.code == 2 and "not a directory" in r.err


def test_version_names_the_commit_and_doctor_the_checkout(cli):
    r = cli("--version")
    assert r.code == 0 and r.out.strip() == f"rtscope {__version__} (commit {git_commit(REPO)})"
    r = cli("doctor", "--json", "--all")
    assert r.code == 0, r.err
    report = json.loads(r.out)
    assert report["source"] == "checkout" and all(p["present"] for p in report["pieces"])
    assert {d["use"] for d in report["dependencies"]} == {"run", "build", "test"}
    assert len(report["dependencies"]) == len(system_deps.load())


def test_the_list_of_system_packages_refuses_a_malformed_line(tmp_path):
    good = system_deps.load()
    assert {d.package for d in good} >= {"elixir", "rt-tests", "fio", "stress-ng", "podman", "gcc", "qemu-user"}
    assert all(d.check.partition(":")[0] in ("cmd", "file", "glob") and d.enables for d in good)
    bad = tmp_path / "deps.txt"
    bad.write_text("# comment\ncmd:fio fio run the fio runtime\ncmd:x pkg sometimes what\n")
    with pytest.raises(ValueError, match=r"deps.txt:3: expected CHECK PACKAGE USE"):
        system_deps.load(bad)
    assert system_deps.install_command([]) is None
    assert system_deps.install_command([good[0], good[0]]) == f"sudo apt-get install -y {good[0].package}"
