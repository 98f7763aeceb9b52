"""Setting `env` without root: environment definitions, shorthands and refusals, and small storage runs through
wrappers that need nothing (`env` as the prefix, as over ssh or docker exec -i; a wrapper that fails to start or
is not installed). Through unshare, chroot, podman and fio: tests/test_environments.py."""

from __future__ import annotations

from pathlib import Path

import pytest

from rtscope.settings.environments import define_environment, load_environments, load_environments_file, resolve
from rtscope.errors import RtscopeError, UsageError
from rtscope.experiment.runner import execute
from rtscope.experiment.spec import build_request
from rtscope.store import Store

pytestmark = pytest.mark.fast



def storage_request(env: str, target: str, variant: str = "write", **params):
    return build_request("storage", variant, "native", {"size": "16K", "repetitions": 5, "dir": target, **params},
                         {"env": env})


def via_env(tmp_path: Path) -> tuple[Path, Path]:
    """The wrapper environment `viaenv` (every command through `env`, its work directory `inner`) and a target
    directory for its runs: (inner, target)."""
    inner = tmp_path / "inner"
    inner.mkdir()
    target = tmp_path / "target"
    target.mkdir()
    define_environment("viaenv", ["env"], workdir=str(inner))
    return inner, target


# ---- definitions ---------------------------------------------------------------------------------

def test_local_is_built_in_and_reserved():
    assert resolve("local").is_local and resolve("local").mode == "shared"
    with pytest.raises(UsageError, match="'local' is built in"):
        define_environment("local", ["true"])


@pytest.mark.parametrize("kw, message", [
    ({"name": "bad name", "prefix": ["x"]}, "invalid environment name"),
    ({"name": "c1", "prefix": "docker exec c1"}, r'must be a list of words, e.g. \["docker", "exec", "c1"\]'),
    ({"name": "c1", "prefix": []}, "non-empty list of non-empty strings"),
    ({"name": "c1", "prefix": ["docker", ""]}, "non-empty list of non-empty strings"),
    ({"name": "c1", "prefix": ["chroot", "/x"], "root": "x"}, "root .* must be an absolute path"),
    ({"name": "c1", "prefix": ["ssh", "b"], "workdir": "tmp"}, "workdir .* must be an absolute path"),
])
def test_bad_definitions(kw, message):
    name, prefix = kw.pop("name"), kw.pop("prefix")
    with pytest.raises(UsageError, match=message):
        define_environment(name, prefix, **kw)


def test_redefinition():
    define_environment("c1", ["docker", "exec", "-i", "c1"])
    define_environment("c1", ["docker", "exec", "-i", "c1"])  # the same again: fine
    with pytest.raises(UsageError, match="defined twice with different definitions"):
        define_environment("c1", ["podman", "exec", "-i", "c1"])
    assert define_environment("c1", ["podman", "exec", "-i", "c1"], replace=True).prefix[0] == "podman"


def test_spec_table_and_file(tmp_path):
    table = {"jail": {"prefix": ["chroot", "/srv/jail"], "root": "/srv/jail", "probe_path": "/usr/bin/rtprobe",
                      "workdir": "/var/tmp", "description": "a chroot"},
             "board": {"prefix": ["ssh", "pi@board"]}}
    jail, board = load_environments(table, "spec.toml")
    assert jail.mode == "root" and jail.probe_path == "/usr/bin/rtprobe" and board.mode == "wrapper"
    with pytest.raises(UsageError, match="unknown key 'prefx'; valid keys: container, description, prefix, probe_path, root, workdir"):
        load_environments({"x": {"prefx": ["a"]}}, "spec.toml")
    with pytest.raises(UsageError, match=r"spec.toml, \[environments.x\]: missing key 'prefix'"):
        load_environments({"x": {"root": "/"}}, "spec.toml")
    f = tmp_path / "envs.toml"
    f.write_text('[environments.ns]\nprefix = ["unshare", "--mount", "--fork"]\nroot = "/"\n')
    [ns] = load_environments_file(f)
    assert ns.mode == "shared" and resolve("ns") is ns
    f.write_text("prefix = [")
    with pytest.raises(UsageError, match="not valid TOML"):
        load_environments_file(f)


def test_shorthands_and_unknown_names():
    assert resolve("docker:c1").prefix == ("docker", "exec", "-i", "c1")
    with pytest.raises(ValueError, match=r"another machine is a target, not an environment: define \[targets.NAME\] "
                                         r'url = "ssh://pi@board"'):
        resolve("ssh:pi@board")
    jail = resolve("chroot:/srv/jail")
    assert jail.prefix == ("chroot", "/srv/jail") and jail.root == "/srv/jail" and jail.mode == "root"
    with pytest.raises(ValueError, match="absolute directory"):
        resolve("chroot:srv")
    with pytest.raises(ValueError, match="unknown environment 'qemu'; defined: .*local.*; or KIND:ARG with KIND "
                                         "one of docker, podman, chroot"):
        resolve("qemu")
    with pytest.raises(UsageError, match="invalid value 'qemu' for env"):
        build_request("storage", "write", "native", {}, {"env": "qemu"})


# ---- runs through wrappers -------------------------------------------------------------------------

def test_wrapper_mode_copies_the_probe_and_brings_the_file_back(tmp_path, rtprobe):
    """No root: everything crosses through the prefix (here `env`), as over ssh or docker exec -i."""
    inner, target = via_env(tmp_path)
    store = Store(str(tmp_path / "s.db"))
    run = store.get_run(execute(storage_request("viaenv", str(target)), store))
    assert run["settings"]["env"] == "viaenv" and run["n_samples"] == 5
    # The probe ran from its copy inside, writing into the inner run directory (paths as seen inside).
    argv = run["source"].split()
    assert argv[0] == "env" and argv[1].startswith(f"{inner}/rtscope-run-") and argv[1].endswith("/rtprobe")
    assert argv[-2:] == ["--output", f"{Path(argv[1]).parent}/run.rts"]
    assert any("inside environment viaenv" in n for n in run["trailer"]["notes"])
    assert list(inner.iterdir()) == [] and list(target.iterdir()) == []


@pytest.mark.parametrize("mode_kw", [{"root": "/"}, {}], ids=["shared", "wrapper"])
def test_wrapper_that_fails_to_start(tmp_path, rtprobe, mode_kw):
    inner = tmp_path / "inner"
    inner.mkdir()
    define_environment("c1", ["sh", "-c", "echo 'Error: container c1 is not running' >&2; exit 125", "sh"],
                       workdir=str(inner), **mode_kw)
    store = Store(str(tmp_path / "s.db"))
    with pytest.raises(RtscopeError, match="environment 'c1' failed to start: .* exited 125: Error: container c1 is "
                                           "not running"):
        execute(storage_request("c1", str(tmp_path)), store)
    assert store.runs() == [] and list(inner.iterdir()) == []
    assert not [p for p in tmp_path.iterdir() if p.name.startswith("rtprobe-storage-")]


def test_wrapper_that_is_not_installed(tmp_path, rtprobe):
    define_environment("vm", ["no-such-hypervisor-rtscope", "run"], root="/")
    store = Store(str(tmp_path / "s.db"))
    with pytest.raises(RtscopeError, match="environment 'vm' failed to start: 'no-such-hypervisor-rtscope' not found"):
        execute(storage_request("vm", str(tmp_path)), store)
    assert store.runs() == []
