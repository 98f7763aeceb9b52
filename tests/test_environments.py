"""Setting `env`: runs through real wrappers that need root (unshare, chroot, a podman container rtscope makes)
or a tool (fio through `env`); those skip with the reason when not root. The definitions and the wrappers that
need nothing: tests/test_environments_units.py."""

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

from rtscope.settings import containers
from rtscope.settings.environments import define_environment
from rtscope.errors import ProbeError, RtscopeError, UsageError
from rtscope.paths import rtprobe as rtprobe_path
from rtscope.experiment.runner import execute
from rtscope.experiment.spec import build_request
from rtscope.runtimes import RUNTIMES
from rtscope.store import Store
from test_environments_units import storage_request, via_env

pytestmark = pytest.mark.real

IS_ROOT = os.geteuid() == 0
needs_root = pytest.mark.skipif(not IS_ROOT, reason="needs root (chroot, unshare, mount)")


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


# ---- runs through wrappers that need root or a tool -------------------------------------------------------

@pytest.mark.skipif(RUNTIMES["fio"].unavailable() is not None, reason="fio is not installed")
def test_fio_through_a_wrapper(tmp_path):
    inner, target = via_env(tmp_path)
    store = Store(str(tmp_path / "s.db"))
    req = build_request("storage", "read", "fio", {"size": "16K", "repetitions": 3, "dir": str(target)},
                        {"env": "viaenv"})
    run = store.get_run(execute(req, store))
    assert run["runtime"] == "fio" and run["settings"]["env"] == "viaenv" and run["n_samples"] == 12
    assert list(inner.iterdir()) == [] and list(target.iterdir()) == []


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
    # fsync reaches the disk in rtscope's container: podman mounts a `--rm` container's root with fsync=volatile
    # (a write+fsync then took 1.2 us in a container, against 89 us without it)
    box = containers.Container(*containers.engine_for(tmp_path))
    box.start()
    try:
        mounts = subprocess.run(box.prefix + ["cat", "/proc/mounts"], capture_output=True, text=True, check=True)
    finally:
        box.remove()
    [root] = [line for line in mounts.stdout.splitlines() if line.split()[1] == "/"]
    assert "volatile" not in root, root
    with pytest.raises(UsageError, match="container = \"podman\" makes its own container"):
        define_environment("bad", ["podman", "exec"], container="podman")
    with pytest.raises(UsageError, match="unknown container engine 'docker'; valid: podman"):
        define_environment("bad", container="docker")
