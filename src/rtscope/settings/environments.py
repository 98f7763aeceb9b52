"""System setting `env`: run the probe inside an execution environment on the run's target.

An environment is a named command prefix (`docker exec -i c1`, `chroot
/srv/jail`, `unshare --mount --pid --fork`) that rtscope puts in front of the
probe's command line *on the target* (docs/targets.md), plus what rtscope
needs to know to get the probe in and its output out. `local` (no prefix) is
built in; others come from `define_environment` (a spec's `[environments]`
table, see docs/environments.md) or from the shorthand KIND:ARG (`docker:c1`,
`podman:c1`, `chroot:/srv/jail`). Another machine is not an environment but a
target: the old `ssh:HOST` shorthand is refused with what to write instead.

How files cross the boundary, by what the definition says:

- shared (`root = "/"`, or a prefix that binds `{run_dir}`): the environment
  sees the target's files at the same paths; nothing is copied.
- root (`root = PATH` on the target, e.g. a chroot directory): rtscope makes a
  run directory under `root/workdir`, copies rtprobe into it and reads the
  outputs back through the target's path.
- wrapper (no `root`): everything goes through the prefix itself (`mktemp`,
  `sh -c 'cat > ...'`, `cat`, `rm -rf`), so it works with `docker exec -i`.

Before the run a start check runs the probe's `--version` (or `fio
--version`) inside; a wrapper that cannot start fails there with what it
printed, and the run directory inside is removed whatever happens.
"""

from __future__ import annotations

import dataclasses
import json
import os
import posixpath
import re
import shlex
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterator

from .. import paths
from ..errors import ProbeError, RtscopeError, UsageError, choices
from ..fileio import read_toml_table
from ..signals import held_signals
from ..targets import Completed, Target
from ..targets.deploy import place_file
from . import containers
from .base import RunContext, Setting

LOCAL = "local"
START_TIMEOUT = 120.0      # seconds for the start check (a container or ssh login may be slow)
TRANSFER_TIMEOUT = 300.0   # seconds for copying the probe in or the sample file out
RUN_DIR = "{run_dir}"      # prefix placeholder: the host's per-run directory (for bind mounts)
PROBE = "{probe}"          # prefix placeholder: the host's rtprobe path (for bind mounts)
NAME_RE = re.compile(r"^[A-Za-z0-9_.-]+$")
KEYS = {"prefix", "root", "probe_path", "workdir", "description", "container"}
ENV_FILE_VAR = "RTSCOPE_ENVIRONMENTS"  # a TOML file with an [environments] table, read on first use


@dataclass(frozen=True)
class Environment:
    name: str
    prefix: tuple[str, ...] = ()
    root: str | None = None        # host path of the environment's "/"; "/" = the host's own files
    probe_path: str | None = None  # rtprobe inside; None = the host path (shared) or a per-run copy
    workdir: str | None = None     # inside: where the per-run directory is made (default /tmp)
    description: str = ""
    container: str | None = None   # "podman": a container rtscope makes per run (containers.py); no prefix

    @property
    def is_local(self) -> bool:
        return not self.prefix and not self.container

    @property
    def mode(self) -> str:
        """How files cross: 'shared', 'root' or 'wrapper' (see the module doc)."""
        if self.is_local or self.root == "/" or any(RUN_DIR in word for word in self.prefix):
            return "shared"
        return "root" if self.root else "wrapper"

    def to_dict(self) -> dict:
        return {"name": self.name, "prefix": list(self.prefix), "root": self.root, "probe_path": self.probe_path,
                "workdir": self.workdir, "description": self.description, "container": self.container}


ENVIRONMENTS: dict[str, Environment] = {LOCAL: Environment(LOCAL, description="this machine, no wrapper")}

# KIND:ARG shorthands -> (prefix words before/with ARG, root is ARG?)
KINDS: dict[str, tuple[tuple[str, ...], bool]] = {
    "docker": (("docker", "exec", "-i"), False),
    "podman": (("podman", "exec", "-i"), False),
    "chroot": (("chroot",), True),
}


def _absolute(value: Any, key: str, where: str) -> str | None:
    if value is None:
        return None
    if not isinstance(value, str) or not value.startswith("/"):
        raise UsageError(f"environment {key} in {where} must be an absolute path, got {value!r}")
    return value


def define_environment(name: str, prefix: list[str] | tuple[str, ...] = (), *, root: str | None = None,
                       probe_path: str | None = None, workdir: str | None = None, description: str = "",
                       container: str | None = None, where: str = "", replace: bool = False) -> Environment:
    """Validate and register an environment; `env=NAME` then selects it.

    Defining the same name again with the same definition is a no-op; with a
    different one it is an error unless `replace` is set.
    """
    place = where or f"environment {name!r}"
    if not isinstance(name, str) or not NAME_RE.match(name):
        raise UsageError(f"invalid environment name {name!r} in {place}: use letters, digits, '_', '.', '-'")
    if name == LOCAL:
        raise UsageError(f"environment name {LOCAL!r} is built in (this machine, no wrapper); choose another name")
    if container is not None:
        if container not in containers.ENGINES:
            raise UsageError(f"environment {name} in {place}: unknown container engine {container!r}; valid: "
                             f"{choices(containers.ENGINES)}")
        if prefix or root:
            raise UsageError(f"environment {name} in {place}: container = \"{container}\" makes its own container "
                             "and prefix; give no prefix or root")
    elif isinstance(prefix, str):
        raise UsageError(f"environment {name} prefix in {place} must be a list of words, e.g. "
                         f"{json.dumps(shlex.split(prefix))}, got a string")
    elif not isinstance(prefix, (list, tuple)) or not prefix or not all(isinstance(w, str) and w for w in prefix):
        raise UsageError(f"environment {name} prefix in {place} must be a non-empty list of non-empty strings, "
                         f"e.g. [\"docker\", \"exec\", \"-i\", \"c1\"]")
    env = Environment(name, tuple(prefix), _absolute(root, "root", place), _absolute(probe_path, "probe_path", place),
                      _absolute(workdir, "workdir", place), str(description or ""), container)
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
        if "prefix" not in body and "container" not in body:
            raise UsageError(f"{where}: missing key 'prefix' (the command put in front of the probe), or "
                             "container = \"podman\" (a container rtscope makes)")
        out.append(define_environment(name, body.get("prefix", ()), root=body.get("root"),
                                      probe_path=body.get("probe_path"), workdir=body.get("workdir"),
                                      description=body.get("description", ""), container=body.get("container"),
                                      where=where, replace=replace))
    return out


def load_environments_file(path: str | os.PathLike, *, replace: bool = False) -> list[Environment]:
    """Environments from a TOML file with an [environments] table."""
    return load_environments(read_toml_table(path, "environments", "environments"), str(path), replace=replace)


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
    if sep and kind == "ssh":
        raise ValueError(f"{text!r}: another machine is a target, not an environment: define [targets.NAME] "
                         f"url = \"ssh://{arg or 'user@host'}\" and select it with target = \"NAME\" (or "
                         f"`rtscope run SPEC --target ssh://{arg or 'user@host'}`); see docs/targets.md")
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


def _run(target: Target, argv: list[str], what: str, env: Environment, timeout: float, stdin: bytes | None = None,
         binary: bool = False) -> Completed:
    """Run a helper command through (or beside) the environment on the target; RtscopeError naming it."""
    try:
        proc = target.run(argv, timeout=timeout, stdin=stdin, binary=binary)
    except ProbeError as e:
        if "did not finish" in str(e):
            raise RtscopeError(f"environment {env.name!r}: {what} did not finish within {timeout:.0f} s: "
                               f"{shlex.join(argv)}") from None
        if "No such file" in str(e):
            raise RtscopeError(f"environment {env.name!r} failed to start: {argv[0]!r} not found "
                               f"(prefix: {shlex.join(env.prefix)})") from None
        raise RtscopeError(f"environment {env.name!r} failed to start: {shlex.join(argv)}: {e}") from None
    if proc.returncode != 0:
        raise RtscopeError(f"environment {env.name!r} failed to start: {what}: `{shlex.join(argv)}` exited "
                           f"{proc.returncode}: {proc.said()}")
    return proc


def _probe_on(target: Target) -> tuple[str, Path]:
    """rtprobe on the target (deployed there unless it is this machine), and the host's file to copy into an
    environment: $RTSCOPE_RTPROBE when set, else the static build for the target's arch when there is one (it
    runs whatever the C library inside), else the host's build."""
    local = paths.for_arch("rtprobe", target.arch, target.is_local)
    copy = paths.rtprobe() if os.environ.get("RTSCOPE_RTPROBE") else paths.for_arch("rtprobe", target.arch)
    return place_file(target, local), copy


class Session:
    """The per-run state of one environment on the run's target: inner run directory, probe path, fetching."""

    def __init__(self, env: Environment, ctx: RunContext):
        self.env, self.ctx, self.target = env, ctx, ctx.target
        self.native = getattr(ctx.request, "runtime", "native") == "native"
        self.probe, self.local_probe = _probe_on(self.target) if self.native else (None, None)
        self.prefix = [w.replace(RUN_DIR, ctx.run_dir).replace(PROBE, self.probe or "") for w in env.prefix]
        self.inner_dir: str | None = None   # the per-run directory inside (root and wrapper modes)
        self.inner_probe: str | None = self.probe

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

    def _on_target(self, inner: str) -> str:
        """The target's path of a path inside a root-mode environment."""
        return posixpath.join(self.env.root, inner.lstrip("/"))

    def _setup_root(self) -> None:
        root = self.env.root
        base = self.env.workdir or "/tmp"
        if self.target.run(["test", "-d", root], timeout=START_TIMEOUT).returncode != 0:
            raise RtscopeError(f"environment {self.env.name!r} failed to start: its root {root} is not a directory")
        if self.target.run(["test", "-d", self._on_target(base)], timeout=START_TIMEOUT).returncode != 0:
            raise RtscopeError(f"environment {self.env.name!r}: workdir {base} does not exist inside it "
                               f"(host path {self._on_target(base)}); create it or set workdir")
        made = self.target.mkdtemp(parent=self._on_target(base))
        self.inner_dir = posixpath.join(base, posixpath.basename(made))
        if self.native:
            if self.env.probe_path:
                self.inner_probe = self.env.probe_path
            else:
                self.target.check(["cp", self.probe, posixpath.join(made, "rtprobe")], "copying rtprobe in")
                self.inner_probe = f"{self.inner_dir}/rtprobe"

    def _setup_wrapper(self) -> None:
        base = self.env.workdir or "/tmp"
        made = _run(self.target, self.prefix + ["mktemp", "-d", f"{base}/rtscope-run-XXXXXX"],
                    "creating the run directory", self.env, START_TIMEOUT)
        inner = made.stdout.strip().splitlines()[-1] if made.stdout.strip() else ""
        if not inner.startswith(base + "/rtscope-run-"):
            raise RtscopeError(f"environment {self.env.name!r}: mktemp printed {made.stdout.strip()!r}, "
                               f"expected a directory under {base}")
        self.inner_dir = inner
        if self.native:
            if self.env.probe_path:
                self.inner_probe = self.env.probe_path
            else:
                copy = f"{inner}/rtprobe"
                _run(self.target, self.prefix + ["sh", "-c", 'cat > "$1" && chmod 755 "$1"', "sh", copy],
                     "copying rtprobe in (the prefix must pass stdin, e.g. docker exec -i)", self.env,
                     TRANSFER_TIMEOUT, stdin=self.local_probe.read_bytes())
                self.inner_probe = copy

    def _start_check(self) -> None:
        argv = self.prefix + ([self.inner_probe, "--version"] if self.native else ["fio", "--version"])
        _run(self.target, argv, "start check", self.env, START_TIMEOUT)

    def cleanup(self) -> None:
        if not self.inner_dir:
            return
        with held_signals():
            if self.env.mode == "root":
                self.target.remove_tree(self._on_target(self.inner_dir))
            else:
                try:
                    self.target.run(self.prefix + ["rm", "-rf", "--", self.inner_dir], timeout=TRANSFER_TIMEOUT)
                except RtscopeError:
                    self.ctx.notes.append(f"environment {self.env.name}: could not remove {self.inner_dir} inside")
        self.inner_dir = None

    # -- files of the run
    def fetch(self, name: str, local: Path) -> bool:
        """Bring output file `name` back from the inner run directory; False when the run did not write it."""
        inner = f"{self.inner_dir}/{name}"
        if self.env.mode == "root":
            try:
                self.target.get(self._on_target(inner), local)
            except (OSError, RtscopeError) as e:
                if "No such file" in str(e):
                    return False
                raise RtscopeError(f"environment {self.env.name!r}: the run finished but {name} could not be "
                                   f"brought back: {e}") from None
            return True
        proc = self.target.run(self.prefix + ["cat", "--", inner], timeout=TRANSFER_TIMEOUT, binary=True)
        if proc.returncode != 0:
            if "No such file" in proc.said():
                return False
            raise RtscopeError(f"environment {self.env.name!r}: the run finished but its output could not be "
                               f"brought back: cat {inner} inside exited {proc.returncode}: {proc.said()}")
        local.write_bytes(proc.stdout)
        return True

    def wire(self, ctx: RunContext) -> None:
        """Point the run at the environment: the prefix, the probe and output paths as seen inside."""
        ctx.command_prefix = self.prefix + ctx.command_prefix
        if self.native and self.inner_probe != self.probe:
            ctx.tool_paths["rtprobe"] = self.inner_probe
        if self.inner_dir:
            ctx.out_dir = self.inner_dir
            ctx.fetch = self.fetch
        tool = "rtprobe" if self.native else getattr(ctx.request, "runtime", "probe")
        ctx.command_name = f"{tool}@{self.env.name}"


@contextmanager
def _container(env: Environment, ctx: RunContext) -> Iterator[Environment]:
    """For `container = "podman"`: a fresh container for this run, the environment wrapping it, then removed."""
    if not ctx.target.is_local:
        raise RtscopeError(f"environment {env.name!r} (container = \"{env.container}\") runs on the local target "
                           f"only: rtscope builds its image here; not on target {ctx.target.name}")
    engine, tag = containers.engine_for(Path(ctx.workdir))
    box = containers.Container(engine, tag)
    box.start()
    ctx.notes.extend(engine.notes)
    ctx.notes.append(f"container {box.name} of image {tag} (rtscope's Debian guest root file system)")
    try:
        yield dataclasses.replace(env, prefix=tuple(box.prefix), container=None)
    finally:
        with held_signals():
            box.remove()


@contextmanager
def enter(value: Any, ctx: RunContext) -> Iterator[None]:
    """Setting `env`: the probe runs inside the environment; the inner run directory is always removed."""
    env = resolve(value)
    if env.is_local:
        yield
        return
    with ExitStack() as stack:
        if env.container:
            env = stack.enter_context(_container(env, ctx))
        yield from _inside(env, ctx)


def _inside(env: Environment, ctx: RunContext) -> Iterator[None]:
    session = Session(env, ctx)
    try:
        session.setup()
        session.wire(ctx)
        ctx.notes.append(f"measured inside environment {env.name} ({shlex.join(env.prefix)}) on target "
                         f"{ctx.target.name}; the machine state recorded is the target's")
        yield
    finally:
        session.cleanup()


SETTINGS = (Setting(
    "env", parse_env, f"{LOCAL}, a defined environment, or KIND:ARG with KIND one of {', '.join(KINDS)}",
    "run the probe inside this environment on the run's target (command-prefix wrapper: container, chroot, "
    "namespace); see docs/environments.md", scope="system", apply=enter),)
