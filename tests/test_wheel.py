"""The wheel (`make dist`, docs/install.md): built once, installed into a fresh virtualenv outside the checkout,
then used from an empty directory in a mount namespace where a tmpfs hides this checkout - so everything it
runs comes from the wheel: the demo (native and BEAM), a timer run on an SSH target of another architecture
(the aarch64 probe under qemu-user), `rtscope doctor`. Plus: the build refuses a missing or dynamic probe.
"""

from __future__ import annotations

import importlib.util
import json
import os
import shutil
import subprocess
import sys
import tomllib
import zipfile
from pathlib import Path

import pytest

import sshd
from rtscope.layout import PIECES, PROBE_ARCHES, PROBE_TOOLS, git_commit, probe
from rtscope.paths import REPO_DIR
from rtscope.version import __version__

FILE_ARCH = {"x86_64": "x86-64", "aarch64": "ARM aarch64", "armhf": "ARM, EABI5"}  # as `file` names them


def _why_not() -> str | None:
    if os.geteuid() != 0:
        return "needs root (a mount namespace hides the checkout)"
    if subprocess.run(["unshare", "--mount", "true"], capture_output=True).returncode:
        return "unshare --mount is not permitted here"
    if importlib.util.find_spec("build") is None:
        return "the build frontend is not installed (pip install -e '.[test]')"
    return None


WHY = _why_not()
pytestmark = [pytest.mark.real, pytest.mark.skipif(WHY is not None, reason=WHY or "")]


@pytest.fixture(scope="module")
def wheel(tmp_path_factory) -> Path:
    """`python -m build` as `make dist` runs it (sdist, then the wheel from the sdist), once per session."""
    out = tmp_path_factory.mktemp("dist")
    proc = subprocess.run([sys.executable, "-m", "build", "--outdir", str(out), str(REPO_DIR)],
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    (built,) = out.glob("*.whl")
    assert built.name == f"rtscope-{__version__}-py3-none-any.whl"
    assert len(list(out.glob("*.tar.gz"))) == 1
    return built


def _closure(requires: list[str]) -> list:
    """The installed distributions (of the Python running the tests) that `requires` needs, with theirs in turn:
    exactly what pip would install for them, no extra, no test tool."""
    from importlib import metadata
    from packaging.requirements import Requirement
    from packaging.utils import canonicalize_name
    found: dict[str, metadata.Distribution] = {}
    todo = [(Requirement(r), "") for r in requires]
    while todo:
        req, extra = todo.pop()
        if req.marker is not None and not req.marker.evaluate({"extra": extra}):
            continue
        name = canonicalize_name(req.name)
        if name not in found:
            found[name] = metadata.distribution(req.name)
            todo += [(Requirement(r), "") for r in found[name].requires or ()]
        for wanted in req.extras:   # psycopg[binary]: the extra's requirements too
            todo += [(Requirement(r), wanted) for r in found[name].requires or () if "extra" in r]
    return list(found.values())


@pytest.fixture(scope="module")
def installed(wheel, tmp_path_factory) -> Path:
    """A fresh virtualenv with the wheel installed by pip. Its dependencies are put there as pip would (every file
    their RECORD lists) from the distributions this test's Python has, hard-linked: only the wheel's declared
    requirements and theirs (resolved from the wheel's own METADATA), checked by `pip check`; none of them from
    this checkout (the tests hide it), with the byte code Python wrote for them. Installing them from pip's cache
    took 30 s of the module's time, and every command run in the venv compiled them again."""
    venv = tmp_path_factory.mktemp("venv")
    # without pip of its own (ensurepip took 7 s): this pip installs into it (--python)
    subprocess.run([sys.executable, "-m", "venv", "--clear", "--without-pip", str(venv)], check=True, timeout=120)
    pip = [sys.executable, "-m", "pip", "--python", str(venv / "bin" / "python")]
    (site,) = venv.glob("lib/python3*/site-packages")
    with zipfile.ZipFile(wheel) as z:
        meta = z.read(next(n for n in z.namelist() if n.endswith(".dist-info/METADATA"))).decode()
    requires = [line.split(":", 1)[1].strip() for line in meta.splitlines() if line.startswith("Requires-Dist:")]
    assert any(r.startswith("numpy") for r in requires), meta
    for dist in _closure(requires):
        assert dist.files is not None, f"{dist.metadata['Name']} has no RECORD: cannot be installed from here"
        for f in dist.files:
            source = Path(dist.locate_file(f))
            if f.parts[0] == ".." or not source.is_file():   # console scripts (their #! is this venv's python)
                continue
            target = site / f
            target.parent.mkdir(parents=True, exist_ok=True)
            os.link(source, target)
            if source.suffix == ".py":    # its byte code, where Python wrote it (valid: the same file, mtime)
                cached = source.parent / "__pycache__" / f"{source.stem}.{sys.implementation.cache_tag}.pyc"
                if cached.is_file() and not (target.parent / "__pycache__" / cached.name).exists():
                    (target.parent / "__pycache__").mkdir(exist_ok=True)
                    os.link(cached, target.parent / "__pycache__" / cached.name)
    proc = subprocess.run([*pip, "install", "-q", "--no-compile", "--no-deps", "--no-index", str(wheel)],
                          capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    proc = subprocess.run([*pip, "check"], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]     # every requirement met, in range
    return venv


SYSTEM_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"


def hidden(venv: Path, cwd: Path, *args: str, timeout: float = 300,
           path: str = SYSTEM_PATH) -> subprocess.CompletedProcess:
    """`rtscope ARGS` of the installed venv, run in `cwd` with this checkout hidden under a tmpfs, no rtscope
    variable or other Python path in the environment, and PATH = the venv's bin + `path`."""
    env = {k: v for k, v in os.environ.items()
           if not k.startswith("RTSCOPE_") and k not in ("PYTHONPATH", "VIRTUAL_ENV", "PYTHONHOME")}
    env["COLUMNS"] = "200"
    script = (f'mount -t tmpfs -o size=1m tmpfs {REPO_DIR} && cd {cwd} && PATH="{venv / "bin"}:{path}" '
              '&& exec "$@"')
    return subprocess.run(["unshare", "--mount", "--propagation", "private", "sh", "-c", script, "sh",
                           str(venv / "bin" / "rtscope"), *args], env=env, capture_output=True, text=True,
                          timeout=timeout)


def ok(proc: subprocess.CompletedProcess) -> str:
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    return proc.stdout


# ---- what the wheel holds --------------------------------------------------------------------------------

def test_wheel_holds_static_probes_for_three_arches_the_harness_and_the_specs(wheel, tmp_path):
    with zipfile.ZipFile(wheel) as z:
        names = set(z.namelist())
        for tool in PROBE_TOOLS:
            for arch in PROBE_ARCHES:
                member = f"rtscope/data/{probe(tool, arch)}"
                assert member in names, f"{member} missing"
                assert z.getinfo(member).external_attr >> 16 & 0o111, f"{member} is not executable"
                path = tmp_path / f"{arch}-{tool}"
                path.write_bytes(z.read(member))
                said = subprocess.run(["file", "-b", str(path)], capture_output=True, text=True).stdout
                assert "statically linked" in said and FILE_ARCH[arch] in said, f"{member}: {said}"
        assert "rtscope/data/beam/ebin/rtscope.app" in names
        ebin = REPO_DIR / PIECES["beam/ebin"]
        assert {f"rtscope/data/beam/ebin/{p.name}" for p in ebin.glob("*.beam")} <= names
        assert "rtscope/data/beam/vm_flags.json" in names
        assert {f"rtscope/data/specs/{p.name}" for p in (REPO_DIR / "specs").glob("*.toml")} <= names
        assert "rtscope/report/vendor/plotly-cartesian-4.1.1.min.js.gz" in names
        assert "rtscope/system_deps.txt" in names
        assert {"rtscope/serve/lab/rtscope-alerts.yml", "rtscope/serve/lab/rtscope-grafana-dashboard.json"} <= names
        info = json.loads(z.read("rtscope/data/build.json"))
    assert info == {"version": __version__, "commit": git_commit(REPO_DIR)}
    assert info["commit"], "the wheel records the commit it was built from"
    assert wheel.stat().st_size <= 15 * 1024 * 1024


def _setup_module():
    """setup.py's hooks, loaded as a module (its setup() call runs only as __main__)."""
    spec = importlib.util.spec_from_file_location("rtscope_setup", REPO_DIR / "setup.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_build_refuses_a_missing_or_dynamic_probe(tmp_path):
    setup = _setup_module()
    root = tmp_path / "checkout"
    for rel in PIECES.values():  # a checkout with every piece, then one made dynamic and one removed
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).symlink_to(REPO_DIR / rel)
    setup.copy_pieces(root, tmp_path / "ok", to_checkout_paths=False)
    assert os.access(tmp_path / "ok" / probe("rtprobe", "armhf"), os.X_OK)

    dynamic = root / PIECES[probe("rtprobe", "x86_64")]
    dynamic.unlink()
    shutil.copy(REPO_DIR / "probes" / "build" / "rtprobe", dynamic)  # the host build: dynamically linked
    (root / PIECES[probe("taskmem", "armhf")]).unlink()
    with pytest.raises(setup.SetupError) as e:
        setup.copy_pieces(root, tmp_path / "bad", to_checkout_paths=False)
    said = str(e.value)
    assert "probes/x86_64/rtprobe" in said and "not a static x86_64 executable: dynamically linked" in said
    assert "probes/armhf/taskmem" in said and "is missing" in said
    assert "make cross beam" in said
    # an aarch64 binary where the armhf one belongs: the wrong architecture
    wrong = root / PIECES[probe("rtprobe", "armhf")]
    wrong.unlink()
    wrong.symlink_to(REPO_DIR / PIECES[probe("rtprobe", "aarch64")])
    assert "ELF machine 183, not 40" in setup.elf_problem(wrong, 40)


# ---- installed, the checkout out of reach ----------------------------------------------------------------

def test_installed_wheel_runs_the_demo_from_an_empty_directory(installed, tmp_path):
    if shutil.which("elixir") is None:
        pytest.skip("elixir is not installed: the demo's BEAM runs need it (sudo apt-get install -y elixir)")
    here = tmp_path / "empty"
    here.mkdir()
    version = ok(hidden(installed, here, "--version"))
    assert version.strip() == f"rtscope {__version__} (commit {git_commit(REPO_DIR)})"
    ok(hidden(installed, here, "demo"))
    runs = json.loads(ok(hidden(installed, here, "runs", "--json")))
    assert sorted((r["variant"], r["runtime"]) for r in runs) == sorted(
        (v, rt) for v in ("sum", "fib", "sleep") for rt in ("native", "beam"))
    iterations = tomllib.loads((REPO_DIR / "specs" / "demo.toml").read_text())["workload"][0]["params"]["iterations"]
    assert all(r["n_samples"] == iterations for r in runs)
    assert sorted(p.name for p in here.iterdir()) == ["rtscope.db"]  # it wrote its store and nothing else
    ok(hidden(installed, here, "report", "-o", "report.html"))
    html = (here / "report.html").read_text()
    assert "Plotly" in html and "sleep (beam" in html and "fib (native" in html  # the vendored bundle, the runs

    listed = ok(hidden(installed, here, "specs", "--json"))
    assert {s["name"] for s in json.loads(listed)} == {p.stem for p in (REPO_DIR / "specs").glob("*.toml")}
    assert all(s["path"].startswith(str(installed)) for s in json.loads(listed))
    ok(hidden(installed, here, "specs", "--copy", "mine"))
    assert (here / "mine" / "demo.toml").read_text() == (REPO_DIR / "specs" / "demo.toml").read_text()
    assert "tasks.toml: OK" in ok(hidden(installed, here, "check", "tasks"))
    bad = hidden(installed, here, "check", "nosuch")
    assert bad.returncode == 2 and "not a shipped spec" in bad.stderr and "kernel-latency" in bad.stderr


def test_installed_doctor_names_pieces_tools_and_the_install_command(installed, tmp_path):
    report = json.loads(ok(hidden(installed, tmp_path, "doctor", "--json")))
    assert report["source"] == "installed" and report["commit"] == git_commit(REPO_DIR)
    assert all(p["present"] and p["path"].startswith(str(installed)) for p in report["pieces"])
    assert {p["piece"] for p in report["pieces"]} == set(PIECES)
    by_package = {d["package"]: d for d in report["dependencies"]}
    assert {"elixir", "rt-tests", "fio", "stress-ng", "podman", "mmdebstrap", "qemu-system-x86"} <= set(by_package)
    assert all(d["use"] == "run" for d in report["dependencies"])
    missing = sorted({d["package"] for d in report["dependencies"] if not d["present"]})
    assert report["install"] == (f"sudo apt-get install -y {' '.join(missing)}" if missing else None)
    text = ok(hidden(installed, tmp_path, "doctor", "--all"))
    assert "gcc-aarch64-linux-gnu" in text and "what it enables" in text
    # a machine without those tools (nothing but the venv on PATH): each one missing, and the one command
    bare = ok(hidden(installed, tmp_path, "doctor", path="/nonexistent"))
    assert "| elixir | elixir | no | the BEAM runtime" in " ".join(bare.replace("│", "|").split())
    install = [line for line in bare.splitlines() if "apt-get" in line]
    assert len(install) == 1 and {"elixir", "rt-tests", "fio", "stress-ng", "podman", "mmdebstrap",
                                  "qemu-system-arm"} <= set(install[0].split())


# ---- an SSH target of another architecture ---------------------------------------------------------------

@pytest.fixture
def aarch64_board(tmp_path):
    """A real sshd (tests/sshd.py) whose uname is an aarch64 program run by qemu-user: the target is aarch64."""
    if sshd.available():
        pytest.skip(sshd.available())
    if shutil.which("aarch64-linux-gnu-gcc") is None:
        pytest.skip("no aarch64 cross compiler for the board's uname (make test installs gcc-aarch64-linux-gnu)")
    if not Path("/proc/sys/fs/binfmt_misc/qemu-aarch64").exists():
        pytest.skip("binfmt_misc runs no aarch64 programs here (apt-get install -y qemu-user-static)")
    uname = tmp_path / "uname-aarch64"
    subprocess.run(["aarch64-linux-gnu-gcc", "-static", "-O2", "-o", str(uname),
                    str(REPO_DIR / "tests" / "fixtures" / "board" / "uname.c")], check=True)
    server = sshd.SshServer(tmp_path / "board", "rtscope-a64",
                            setup=(f"mount --bind {uname} {shutil.which('uname')}",)).start()
    yield server
    server.stop()


def test_installed_wheel_deploys_its_aarch64_probe_to_an_aarch64_ssh_target(installed, wheel, aarch64_board,
                                                                            tmp_path):
    here = tmp_path / "empty"
    here.mkdir()
    (here / "board.toml").write_text(
        f'name = "wheel-board"\ntarget = "board"\n{aarch64_board.table("board")}\n'
        '[[workload]]\nname = "timer"\nvariants = "absolute"\nruntime = "native"\n'
        '[workload.params]\ninterval_us = 1000\nloops = 200\n')
    ok(hidden(installed, here, "run", "board.toml"))
    (run,) = json.loads(ok(hidden(installed, here, "runs", "--json")))
    assert run["workload"] == "timer" and run["n_samples"] == 200 and run["settings"]["target"] == "board"
    shown = json.loads(ok(hidden(installed, here, "show", str(run["id"]), "--json")))
    assert shown["run"]["environment"]["machine"] == "aarch64"
    deployed = list((aarch64_board.workdir / "cache").glob("*/rtprobe"))
    with zipfile.ZipFile(wheel) as z:
        assert [p.read_bytes() for p in deployed] == [z.read(f"rtscope/data/{probe('rtprobe', 'aarch64')}")]
