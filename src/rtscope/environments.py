"""System setting `env`: run the probe inside an execution environment.

An environment is a named command prefix (`docker exec -i c1`, `ssh board`,
`chroot /srv/jail`, `unshare --mount --pid --fork`) that rtscope puts in front
of the probe's command line, plus what rtscope needs to know to get the probe
in and its sample file out. `local` (no prefix) is built in; others come from
`define_environment` (a spec's `[environments]` table, see docs/environments.md)
or from the shorthand KIND:ARG (`docker:c1`, `podman:c1`, `ssh:board`,
`chroot:/srv/jail`).

How files cross the boundary, by what the definition says:

- shared (`root = "/"`, or a prefix that binds `{run_dir}`): the environment
  sees the host's files at the same paths; nothing is copied.
- root (`root = HOST_PATH`, e.g. a chroot directory): rtscope makes a run
  directory under `root/workdir`, copies rtprobe into it and reads the sample
  file back through the host path.
- wrapper (no `root`): everything goes through the prefix itself (`mktemp`,
  `sh -c 'cat > ...'`, `cat`, `rm -rf`), so it works over ssh and `docker exec -i`.

Before the run a start check runs the probe's `--version` (or `fio --version`)
inside; a wrapper that cannot start fails there with what it printed, and the
run directory inside is removed whatever happens. With a non-shared
environment the probe is launched by a small helper (`python -m
rtscope.environments exec ...`) that rewrites the probe path and `--output`,
runs the command, and brings the sample file back.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import shutil
import signal
import subprocess
import sys
import tempfile
import tomllib
import uuid
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import Any, Iterator

from . import paths
from .errors import RtscopeError, UsageError, choices
from .settings import RunContext, Setting, register

LOCAL = "local"
START_TIMEOUT = 120.0      # seconds for the start check (a container or ssh login may be slow)
TRANSFER_TIMEOUT = 300.0   # seconds for copying the probe in or the sample file out
OUTPUT_TAIL = 2000         # characters of a failed command's output kept in errors
RUN_DIR = "{run_dir}"      # prefix placeholder: the host's per-run directory (for bind mounts)
PROBE = "{probe}"          # prefix placeholder: the host's rtprobe path (for bind mounts)
NAME_RE = re.compile(r"^[A-Za-z0-9_.-]+$")
KEYS = {"prefix", "root", "probe_path", "workdir", "description"}
ENV_FILE_VAR = "RTSCOPE_ENVIRONMENTS"  # a TOML file with an [environments] table, read on first use


@dataclass(frozen=True)
class Environment:
    name: str
    prefix: tuple[str, ...] = ()
    root: str | None = None        # host path of the environment's "/"; "/" = the host's own files
    probe_path: str | None = None  # rtprobe inside; None = the host path (shared) or a per-run copy
    workdir: str | None = None     # inside: where the per-run directory is made (default /tmp)
    description: str = ""

    @property
    def is_local(self) -> bool:
        return not self.prefix

    @property
    def mode(self) -> str:
        """How files cross: 'shared', 'root' or 'wrapper' (see the module doc)."""
        if self.is_local or self.root == "/" or any(RUN_DIR in word for word in self.prefix):
            return "shared"
        return "root" if self.root else "wrapper"

    def to_dict(self) -> dict:
        return {"name": self.name, "prefix": list(self.prefix), "root": self.root, "probe_path": self.probe_path,
                "workdir": self.workdir, "description": self.description}


ENVIRONMENTS: dict[str, Environment] = {LOCAL: Environment(LOCAL, description="this machine, no wrapper")}

# KIND:ARG shorthands -> (prefix words before/with ARG, root is ARG?)
KINDS: dict[str, tuple[tuple[str, ...], bool]] = {
    "docker": (("docker", "exec", "-i"), False),
    "podman": (("podman", "exec", "-i"), False),
    "ssh": (("ssh", "-o", "BatchMode=yes"), False),
    "chroot": (("chroot",), True),
}


def _absolute(value: Any, key: str, where: str) -> str | None:
    if value is None:
        return None
    if not isinstance(value, str) or not value.startswith("/"):
        raise UsageError(f"environment {key} in {where} must be an absolute path, got {value!r}")
    return value


def define_environment(name: str, prefix: list[str] | tuple[str, ...], *, root: str | None = None,
                       probe_path: str | None = None, workdir: str | None = None, description: str = "",
                       where: str = "", replace: bool = False) -> Environment:
    """Validate and register an environment; `env=NAME` then selects it.

    Defining the same name again with the same definition is a no-op; with a
    different one it is an error unless `replace` is set.
    """
    place = where or f"environment {name!r}"
    if not isinstance(name, str) or not NAME_RE.match(name):
        raise UsageError(f"invalid environment name {name!r} in {place}: use letters, digits, '_', '.', '-'")
    if name == LOCAL:
        raise UsageError(f"environment name {LOCAL!r} is built in (this machine, no wrapper); choose another name")
    if isinstance(prefix, str):
        raise UsageError(f"environment {name} prefix in {place} must be a list of words, e.g. "
                         f"{json.dumps(shlex.split(prefix))}, got a string")
    if not isinstance(prefix, (list, tuple)) or not prefix or not all(isinstance(w, str) and w for w in prefix):
        raise UsageError(f"environment {name} prefix in {place} must be a non-empty list of non-empty strings, "
                         f"e.g. [\"docker\", \"exec\", \"-i\", \"c1\"]")
    env = Environment(name, tuple(prefix), _absolute(root, "root", place), _absolute(probe_path, "probe_path", place),
                      _absolute(workdir, "workdir", place), str(description or ""))
    old = ENVIRONMENTS.get(name)
    if old is not None and old != env and not replace:
        raise UsageError(f"environment {name!r} is defined twice with different definitions ({place})")
    ENVIRONMENTS[name] = env
    return env


def load_environments(table: Any, source: str = "<spec>", *, replace: bool = False) -> list[Environment]:
    """Define every environment of a spec's `[environments]` table (docs/environments.md)."""
    if not isinstance(table, dict):
        raise UsageError(f"{source}: [environments] must be a table of tables, e.g. "
                         f"[environments.c1] prefix = [\"docker\", \"exec\", \"-i\", \"c1\"]")
    out = []
    for name, body in table.items():
        where = f"{source}, [environments.{name}]"
        if not isinstance(body, dict):
            raise UsageError(f"{where}: must be a table with at least prefix = [...]")
        extra = sorted(set(body) - KEYS)
        if extra:
            raise UsageError(f"{where}: unknown key {extra[0]!r}; valid keys: {choices(sorted(KEYS))}")
        if "prefix" not in body:
            raise UsageError(f"{where}: missing key 'prefix' (the command put in front of the probe)")
        out.append(define_environment(name, body["prefix"], root=body.get("root"), probe_path=body.get("probe_path"),
                                      workdir=body.get("workdir"), description=body.get("description", ""),
                                      where=where, replace=replace))
    return out


def load_environments_file(path: str | os.PathLike, *, replace: bool = False) -> list[Environment]:
    """Environments from a TOML file with an [environments] table."""
    try:
        raw = tomllib.loads(Path(path).read_text())
    except OSError as e:
        raise UsageError(f"cannot read environments file {path}: {e.strerror}") from None
    except tomllib.TOMLDecodeError as e:
        raise UsageError(f"{path}: not valid TOML: {e}") from None
    if "environments" not in raw:
        raise UsageError(f"{path}: no [environments] table")
    return load_environments(raw["environments"], str(path), replace=replace)


_env_file_loaded = False


def _load_env_file() -> None:
    global _env_file_loaded
    if not _env_file_loaded and os.environ.get(ENV_FILE_VAR):
        _env_file_loaded = True
        load_environments_file(os.environ[ENV_FILE_VAR], replace=True)


def resolve(value: Any) -> Environment:
    """The environment a setting value names: a defined name or KIND:ARG."""
    text = str(value).strip()
    _load_env_file()
    if text in ENVIRONMENTS:
        return ENVIRONMENTS[text]
    kind, sep, arg = text.partition(":")
    if sep and kind in KINDS:
        if not arg:
            raise ValueError(f"{kind}: needs an argument, e.g. {kind}:{'/srv/jail' if kind == 'chroot' else 'c1'}")
        words, arg_is_root = KINDS[kind]
        if arg_is_root and not arg.startswith("/"):
            raise ValueError(f"chroot: needs an absolute directory, got {arg!r}")
        ENVIRONMENTS[text] = Environment(text, (*words, arg), root=arg if arg_is_root else None,
                                         description=f"shorthand {text}")
        return ENVIRONMENTS[text]
    raise ValueError(f"unknown environment {text!r}; defined: {choices(sorted(ENVIRONMENTS))}; "
                     f"or KIND:ARG with KIND one of {choices(KINDS)}")


def parse_env(value: Any) -> str:
    return resolve(value).name


# ---- one run inside an environment ---------------------------------------------------------------


def _said(proc: subprocess.CompletedProcess) -> str:
    out = proc.stderr if isinstance(proc.stderr, str) else (proc.stderr or b"").decode(errors="replace")
    if not out.strip():
        out = proc.stdout if isinstance(proc.stdout, str) else (proc.stdout or b"").decode(errors="replace")
    return out.strip()[-OUTPUT_TAIL:] or "no output"


def _run(argv: list[str], what: str, env: Environment, timeout: float, stdin: bytes | None = None,
         text: bool = True) -> subprocess.CompletedProcess:
    """Run a helper command through (or beside) the environment; RtscopeError naming it when it fails."""
    try:
        proc = subprocess.run(argv, input=stdin, capture_output=True, timeout=timeout,
                              text=text and stdin is None, start_new_session=True)
    except FileNotFoundError:
        raise RtscopeError(f"environment {env.name!r} failed to start: {argv[0]!r} not found "
                           f"(prefix: {shlex.join(env.prefix)})") from None
    except OSError as e:
        raise RtscopeError(f"environment {env.name!r} failed to start: {shlex.join(argv)}: {e.strerror}") from None
    except subprocess.TimeoutExpired:
        raise RtscopeError(f"environment {env.name!r}: {what} did not finish within {timeout:.0f} s: "
                           f"{shlex.join(argv)}") from None
    if proc.returncode != 0:
        raise RtscopeError(f"environment {env.name!r} failed to start: {what}: `{shlex.join(argv)}` exited "
                           f"{proc.returncode}: {_said(proc)}")
    return proc


class Session:
    """The per-run state of one environment: inner run directory, probe path, helper command."""

    def __init__(self, env: Environment, ctx: RunContext):
        self.env = env
        self.ctx = ctx
        self.host_run_dir = str(ctx.workdir)
        self.native = getattr(ctx.request, "runtime", "native") == "native"
        self.host_probe = str(paths.rtprobe()) if self.native else None
        self.prefix = [w.replace(RUN_DIR, self.host_run_dir).replace(PROBE, self.host_probe or "")
                       for w in env.prefix]
        self.inner_dir: str | None = None   # the per-run directory inside (root and wrapper modes)
        self.inner_probe: str | None = self.host_probe

    # -- setup and cleanup
    def setup(self) -> None:
        mode = self.env.mode
        if mode == "root":
            self._setup_root()
        elif mode == "wrapper":
            self._setup_wrapper()
        elif self.env.probe_path and self.native:
            self.inner_probe = self.env.probe_path
        self._start_check()

    def _host_path(self, inner: str) -> Path:
        return Path(self.env.root) / PurePosixPath(inner).relative_to("/")

    def _setup_root(self) -> None:
        root = Path(self.env.root)
        if not root.is_dir():
            raise RtscopeError(f"environment {self.env.name!r} failed to start: its root {root} is not a directory")
        base = self.env.workdir or "/tmp"
        host_base = self._host_path(base)
        if not host_base.is_dir():
            raise RtscopeError(f"environment {self.env.name!r}: workdir {base} does not exist inside it "
                               f"(host path {host_base}); create it or set workdir")
        host_dir = Path(tempfile.mkdtemp(prefix="rtscope-run-", dir=host_base))
        self.inner_dir = str(PurePosixPath(base) / host_dir.name)
        if self.native:
            if self.env.probe_path:
                self.inner_probe = self.env.probe_path
            else:
                shutil.copy2(self.host_probe, host_dir / "rtprobe")
                os.chmod(host_dir / "rtprobe", 0o755)
                self.inner_probe = f"{self.inner_dir}/rtprobe"

    def _setup_wrapper(self) -> None:
        base = self.env.workdir or "/tmp"
        made = _run(self.prefix + ["mktemp", "-d", f"{base}/rtscope-run-XXXXXX"], "creating the run directory",
                    self.env, START_TIMEOUT)
        inner = made.stdout.strip().splitlines()[-1] if made.stdout.strip() else ""
        if not inner.startswith(base + "/rtscope-run-"):
            raise RtscopeError(f"environment {self.env.name!r}: mktemp printed {made.stdout.strip()!r}, "
                               f"expected a directory under {base}")
        self.inner_dir = inner
        if self.native:
            if self.env.probe_path:
                self.inner_probe = self.env.probe_path
            else:
                target = f"{inner}/rtprobe"
                _run(self.prefix + ["sh", "-c", 'cat > "$1" && chmod 755 "$1"', "sh", target],
                     "copying rtprobe in (the prefix must pass stdin, e.g. docker exec -i)", self.env,
                     TRANSFER_TIMEOUT, stdin=Path(self.host_probe).read_bytes())
                self.inner_probe = target

    def _start_check(self) -> None:
        argv = self.prefix + ([self.inner_probe, "--version"] if self.native else ["fio", "--version"])
        _run(argv, "start check", self.env, START_TIMEOUT)

    def cleanup(self) -> None:
        if not self.inner_dir:
            return
        if self.env.mode == "root":
            shutil.rmtree(self._host_path(self.inner_dir), ignore_errors=True)
        else:
            try:
                subprocess.run(self.prefix + ["rm", "-rf", "--", self.inner_dir], capture_output=True,
                               timeout=TRANSFER_TIMEOUT, start_new_session=True)
            except (OSError, subprocess.TimeoutExpired):
                self.ctx.notes.append(f"environment {self.env.name}: could not remove {self.inner_dir} inside")
        self.inner_dir = None

    # -- the probe's command
    def command_prefix(self) -> list[str]:
        if self.env.mode == "shared" and self.inner_probe == self.host_probe:
            return list(self.prefix)  # same files, same paths: the prefix alone does it
        config = {"name": self.env.name, "prefix": self.prefix, "mode": self.env.mode, "root": self.env.root,
                  "host_probe": self.host_probe, "inner_probe": self.inner_probe, "inner_dir": self.inner_dir}
        run_dir = Path(self.host_run_dir)
        config_path = run_dir / f"environment-{uuid.uuid4().hex[:8]}.json"
        config_path.write_text(json.dumps(config))
        helper = [sys.executable, "-m", "rtscope.environments", "exec", str(config_path), "--"]
        if os.statvfs(run_dir).f_flag & os.ST_NOEXEC:
            return helper
        # A launcher named after what runs where, so a failure reads "rtprobe@jail failed (exit 1): ...".
        tool = "rtprobe" if self.native else getattr(self.ctx.request, "runtime", "probe")
        launcher = run_dir / f"{tool}@{self.env.name}"
        launcher.write_text("#!/bin/sh\nexec " + shlex.join(helper) + ' "$@"\n')
        launcher.chmod(0o755)
        return [str(launcher)]


@contextmanager
def enter(value: Any, ctx: RunContext) -> Iterator[None]:
    """Setting `env`: the probe runs inside the environment; the inner run directory is always removed."""
    env = resolve(value)
    if env.is_local:
        yield
        return
    session = Session(env, ctx)
    try:
        session.setup()
        ctx.command_prefix = session.command_prefix() + ctx.command_prefix
        ctx.notes.append(f"measured inside environment {env.name} ({shlex.join(env.prefix)}); "
                         f"the machine state recorded is the host's")
        yield
    finally:
        session.cleanup()


register(Setting(
    "env", parse_env, f"{LOCAL}, a defined environment, or KIND:ARG with KIND one of {', '.join(KINDS)}",
    "run the probe inside this environment (command-prefix wrapper: container, chroot, namespace, ssh); "
    "see docs/environments.md", scope="system", apply=enter))


# ---- the helper that runs inside the probe's process group ----------------------------------------


def _rewrite(argv: list[str], config: dict) -> tuple[list[str], str | None, str | None]:
    """Probe path and --output value as seen inside; returns (argv, host output, inner output)."""
    argv = list(argv)
    if config["host_probe"] and argv and argv[0] == config["host_probe"]:
        argv[0] = config["inner_probe"]
    host_out = inner_out = None
    if config["inner_dir"]:
        for i, word in enumerate(argv):
            if word == "--output" and i + 1 < len(argv):
                host_out = argv[i + 1]
                inner_out = f"{config['inner_dir']}/{Path(host_out).name}"
                argv[i + 1] = inner_out
                break
            if word.startswith("--output="):
                host_out = word.split("=", 1)[1]
                inner_out = f"{config['inner_dir']}/{Path(host_out).name}"
                argv[i] = f"--output={inner_out}"
                break
    return argv, host_out, inner_out


def _fetch(config: dict, inner_out: str, host_out: str) -> str | None:
    """Bring the output file back to the host; None, or what went wrong."""
    if config["mode"] == "root":
        src = Path(config["root"]) / PurePosixPath(inner_out).relative_to("/")
        try:
            shutil.copyfile(src, host_out)
        except OSError as e:
            return f"cannot copy {src} to {host_out}: {e.strerror}"
        return None
    try:
        proc = subprocess.run(config["prefix"] + ["cat", "--", inner_out], capture_output=True,
                              timeout=TRANSFER_TIMEOUT)
    except (OSError, subprocess.TimeoutExpired) as e:
        return f"cannot run cat inside: {e}"
    if proc.returncode != 0:
        return f"cat {inner_out} inside exited {proc.returncode}: {_said(proc)}"
    Path(host_out).write_bytes(proc.stdout)
    return None


def _exec(config_path: str, argv: list[str]) -> int:
    config = json.loads(Path(config_path).read_text())
    argv, host_out, inner_out = _rewrite(argv, config)
    stopped: list[int] = []

    def on_signal(signum, _frame):  # the probe got it too (same process group): wait for it to clean up
        stopped.append(signum)

    for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
        signal.signal(sig, on_signal)
    try:
        proc = subprocess.Popen(config["prefix"] + argv, stdin=subprocess.DEVNULL)
    except OSError as e:
        print(f"rtscope: environment {config['name']!r} failed to start: {config['prefix'][0]}: {e.strerror}",
              file=sys.stderr)
        return 1
    while True:
        try:
            rc = proc.wait()
            break
        except InterruptedError:
            continue
    if stopped:
        return 128 + stopped[0]
    if rc != 0:
        return rc if rc > 0 else 128 - rc
    if host_out and inner_out:
        problem = _fetch(config, inner_out, host_out)
        if problem:
            print(f"rtscope: environment {config['name']!r}: the run finished but its output could not be "
                  f"brought back: {problem}", file=sys.stderr)
            return 1
    return 0


def main(args: list[str]) -> int:
    if len(args) >= 3 and args[0] == "exec" and args[2] == "--":
        return _exec(args[1], args[3:])
    print("usage: python -m rtscope.environments exec CONFIG.json -- COMMAND...  (used by rtscope itself)",
          file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
