"""Setting `env`: environment definitions, and runs through real wrappers (env, unshare, chroot).

Wrappers that need root (unshare, chroot, mount) skip with the reason when
not root; the wrapper-mode tests use `env` as the prefix, which works anywhere.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from rtscope.settings import environments as envs
from rtscope.settings.environments import define_environment, load_environments, load_environments_file, resolve
from rtscope.errors import ProbeError, RtscopeError, UsageError
from rtscope.paths import rtprobe as rtprobe_path
from rtscope.experiment.runner import execute
from rtscope.experiment.spec import build_request
from rtscope.runtimes import RUNTIMES
from rtscope.store import Store

pytestmark = pytest.mark.real

IS_ROOT = os.geteuid() == 0
needs_root = pytest.mark.skipif(not IS_ROOT, reason="needs root (chroot, unshare, mount)")


@pytest.fixture(autouse=True)
def clean_registry():
    before = dict(envs.ENVIRONMENTS)
    yield
    envs.ENVIRONMENTS.clear()
    envs.ENVIRONMENTS.update(before)


def storage_request(env: str, target: str, variant: str = "write", **params):
    return build_request("storage", variant, "native", {"size": "16K", "repetitions": 5, "dir": target, **params},
                         {"env": env})


def make_jail(root: Path) -> Path:
    """A minimal chroot: /tmp and the shared libraries rtprobe needs (the probe itself is copied per run)."""
    (root / "tmp").mkdir(parents=True, exist_ok=True)
    out = subprocess.run(["ldd", str(rtprobe_path())], capture_output=True, text=True, check=True).stdout
    for line in out.splitlines():
        lib = next((w for w in line.split() if w.startswith("/")), None)
        if lib:
            dest = root / lib.lstrip("/")
            dest.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(lib, dest)
    return root


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
    inner = tmp_path / "inner"
    inner.mkdir()
    target = tmp_path / "target"
    target.mkdir()
    define_environment("viaenv", ["env"], workdir=str(inner))
    store = Store(str(tmp_path / "s.db"))
    run = store.get_run(execute(storage_request("viaenv", str(target)), store))
    assert run["settings"]["env"] == "viaenv" and run["n_samples"] == 5
    # The probe ran from its copy inside, writing into the inner run directory (paths as seen inside).
    argv = run["source"].split()
    assert argv[0] == "env" and argv[1].startswith(f"{inner}/rtscope-run-") and argv[1].endswith("/rtprobe")
    assert argv[-2:] == ["--output", f"{Path(argv[1]).parent}/run.rts"]
    assert any("inside environment viaenv" in n for n in run["trailer"]["notes"])
    assert list(inner.iterdir()) == [] and list(target.iterdir()) == []


@pytest.mark.skipif(RUNTIMES["fio"].unavailable() is not None, reason="fio is not installed")
def test_fio_through_a_wrapper(tmp_path):
    inner = tmp_path / "inner"
    inner.mkdir()
    target = tmp_path / "target"
    target.mkdir()
    define_environment("viaenv", ["env"], workdir=str(inner))
    store = Store(str(tmp_path / "s.db"))
    req = build_request("storage", "read", "fio", {"size": "16K", "repetitions": 3, "dir": str(target)},
                        {"env": "viaenv"})
    run = store.get_run(execute(req, store))
    assert run["runtime"] == "fio" and run["settings"]["env"] == "viaenv" and run["n_samples"] == 12
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


@needs_root
def test_unshare_namespaces(tmp_path, rtprobe):
    if subprocess.run(["unshare", "--mount", "--pid", "--fork", "true"], capture_output=True).returncode:
        pytest.skip("unshare --mount --pid --fork is not permitted here")
    define_environment("ns", ["unshare", "--mount", "--pid", "--fork"], root="/")
    store = Store(str(tmp_path / "s.db"))
    run = store.get_run(execute(storage_request("ns", str(tmp_path), "write_sync"), store))
    assert run["settings"]["env"] == "ns" and run["n_samples"] == 5
    assert run["source"].startswith("unshare --mount --pid --fork ")
    assert not [p for p in tmp_path.iterdir() if p.name.startswith("rtprobe-storage-")]


@needs_root
def test_chroot_with_copied_probe(tmp_path, rtprobe):
    jail = make_jail(tmp_path / "jail")
    define_environment("jail", ["chroot", str(jail)], root=str(jail))
    store = Store(str(tmp_path / "s.db"))
    run = store.get_run(execute(storage_request("jail", "/"), store))  # "/" is the jail's root, inside
    assert run["params"]["dir"] == "/" and run["n_samples"] == 5
    assert list((jail / "tmp").iterdir()) == []
    assert not [p for p in jail.iterdir() if p.name.startswith("rtprobe-storage-")]


@needs_root
def test_chroot_without_libraries_fails_with_what_chroot_said(tmp_path, rtprobe):
    jail = tmp_path / "empty"
    (jail / "tmp").mkdir(parents=True)
    define_environment("empty", ["chroot", str(jail)], root=str(jail))
    store = Store(str(tmp_path / "s.db"))
    with pytest.raises(RtscopeError, match=r"environment 'empty' failed to start: start check: .* exited 127: "
                                           r"chroot: failed to run command"):
        execute(storage_request("empty", "/"), store)
    assert store.runs() == [] and list((jail / "tmp").iterdir()) == []


@needs_root
def test_probe_error_inside_names_the_environment(tmp_path, rtprobe):
    jail = make_jail(tmp_path / "jail")
    define_environment("jail", ["chroot", str(jail)], root=str(jail))
    store = Store(str(tmp_path / "s.db"))
    with pytest.raises(ProbeError, match=r"rtprobe@jail failed \(exit 1\): rtprobe storage: cannot use directory "
                                         r"'/no/such': No such file or directory"):
        execute(storage_request("jail", "/no/such"), store)
    assert store.runs() == [] and list((jail / "tmp").iterdir()) == []


@needs_root
def test_sigterm_inside_a_chroot_leaves_nothing(tmp_path, rtprobe):
    jail = make_jail(tmp_path / "jail")
    script = tmp_path / "run.py"
    script.write_text(textwrap.dedent(f"""
        from rtscope.settings.environments import define_environment
        from rtscope.experiment.runner import execute
        from rtscope.experiment.spec import build_request
        from rtscope.store import Store
        define_environment("jail", ["chroot", {str(jail)!r}], root={str(jail)!r})
        req = build_request("storage", "write_sync", "native", {{"size": "64K", "repetitions": 10000000, "dir": "/"}},
                            {{"env": "jail"}})
        execute(req, Store({str(tmp_path / 's.db')!r}))
    """))
    proc = subprocess.Popen([sys.executable, str(script)], stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 20
    while not [p for p in jail.iterdir() if p.name.startswith("rtprobe-storage-")]:
        assert time.monotonic() < deadline and proc.poll() is None, "the run did not start"
        time.sleep(0.05)
    time.sleep(0.3)
    proc.send_signal(signal.SIGTERM)
    _, err = proc.communicate(timeout=30)
    assert proc.returncode != 0 and "Terminated" in err
    assert list((jail / "tmp").iterdir()) == []
    assert not [p for p in jail.iterdir() if p.name.startswith("rtprobe-storage-")]
    assert Store(str(tmp_path / "s.db")).runs() == []


@pytest.mark.skipif(not IS_ROOT or shutil.which("podman") is None or shutil.which("mmdebstrap") is None,
                    reason="needs root, podman and mmdebstrap (a container of rtscope's guest root file system)")
def test_a_container_rtscope_makes_per_run(tmp_path, rtprobe):
    """container = "podman": image imported from rtscope's root file system, one container per run, removed."""
    define_environment("pod", container="podman")
    store = Store(str(tmp_path / "s.db"))
    run = store.get_run(execute(storage_request("pod", "/tmp", "write_sync"), store))
    assert run["settings"]["env"] == "pod" and run["n_samples"] == 5
    notes = " ".join(run["trailer"]["notes"])
    assert "container rtscope-run-" in notes and "localhost/rtscope-guest:" in notes
    left = subprocess.run(["podman", "ps", "-a", "--format", "{{.Names}}"], capture_output=True, text=True).stdout
    assert "rtscope-run-" not in left
    with pytest.raises(UsageError, match="container = \"podman\" makes its own container"):
        define_environment("bad", ["podman", "exec"], container="podman")
    with pytest.raises(UsageError, match="unknown container engine 'docker'; valid: podman"):
        define_environment("bad", container="docker")
