#!/usr/bin/env python3
"""How fast the rtscope command starts: `--help`, every `COMMAND --help`, `runs` and `show RUN`.

Each command is run REPEAT times in a fresh interpreter (wall time: median and min; CPU time: median of
user+system), beside `python -c pass` (the interpreter alone) and, with --baseline REV, beside the same
commands of another git revision (its src/rtscope from `git archive`, run by the same interpreter). Each
line also names the heavy libraries the command imported (from `python -X importtime`).

`runs` and `show` read the demo store, which the bench fills once with `rtscope demo` (or pass --db).

    .venv/bin/python bench/cli_startup.py                    # now
    .venv/bin/python bench/cli_startup.py --baseline 6e67de2 # now beside the commit before the lazy imports

Goals (issue 26): `--help` and `COMMAND --help` <= 0.15 s wall, `runs` / `show RUN` <= 0.30 s wall (median).
Timings are noisy on a shared machine: run it when the machine is quiet, and compare within one run.
"""

from __future__ import annotations

import argparse
import os
import resource
import statistics
import subprocess
import sys
import tarfile
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
HEAVY = ("numpy", "scipy", "pandas", "sqlalchemy", "matplotlib", "plotly", "paramiko", "jinja2", "psycopg",
         "labgrid", "yaml", "markdown_it")
GOALS = {"help": 0.15, "store": 0.30}
# The figures issue 26 reported before this work (2-core test machine), shown for reference.
REPORTED_BEFORE = {"--help": 0.46, "runs": 0.43}
CLI = "import sys; sys.argv[0] = 'rtscope'; from rtscope.cli import main; main()"


def child_env(src: Path) -> dict:
    """The environment of a timed command: rtscope from `src`, its bytecode cached (by the warm-up run) as an
    installed rtscope's is; PYTHONDONTWRITEBYTECODE would have every run compile its modules again."""
    env = {**os.environ, "PYTHONPATH": str(src)}
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    return env


def run_once(argv: list[str], env: dict) -> tuple[float, float, int]:
    """(wall s, cpu s, exit code) of one run of argv."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t = time.perf_counter()
    rc = subprocess.run(argv, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL).returncode
    wall = time.perf_counter() - t
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return wall, (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime), rc


def heavy_imports(argv: list[str], env: dict) -> list[str]:
    """The heavy top-level packages argv imports, from -X importtime's log on stderr."""
    out = subprocess.run([argv[0], "-X", "importtime", *argv[1:]], env=env, stdout=subprocess.DEVNULL,
                         stderr=subprocess.PIPE, text=True).stderr
    found = set()
    for line in out.splitlines():
        if line.startswith("import time:") and "|" in line:
            name = line.rsplit("|", 1)[1].strip()
            if name in HEAVY:
                found.add(name)
    return sorted(found)


def measure(argv: list[str], env: dict, repeat: int) -> dict:
    run_once(argv, env)  # warm the page cache and the bytecode
    samples = [run_once(argv, env) for _ in range(repeat)]
    codes = {rc for _, _, rc in samples}
    return {"wall": statistics.median(w for w, _, _ in samples), "min": min(w for w, _, _ in samples),
            "cpu": statistics.median(c for _, c, _ in samples), "rc": codes.pop() if len(codes) == 1 else codes}


def source_of(rev: str, into: Path) -> Path:
    """src/ of a git revision, unpacked into `into`."""
    archive = into / "src.tar"
    with open(archive, "wb") as f:
        subprocess.run(["git", "-C", str(ROOT), "archive", rev, "src"], stdout=f, check=True)
    with tarfile.open(archive) as tar:
        tar.extractall(into, filter="data")
    return into / "src"


def commands(db: str, run_id: int) -> list[tuple[str, list[str], str]]:
    """(label, arguments, goal key)."""
    sys.path.insert(0, str(ROOT / "src"))
    from rtscope.cli import app  # noqa: E402  (the command names, from this tree)
    import typer.main
    group = typer.main.get_command(app)
    names = list(group.commands)
    found = [("--help", ["--help"], "help")]
    found += [(f"{n} --help", [n, "--help"], "help") for n in names]
    found += [("runs", ["runs", "--db", db], "store"), (f"show {run_id}", ["show", str(run_id), "--db", db], "store")]
    return found


def demo_store(work: Path) -> tuple[str, int]:
    db = str(work / "demo.db")
    env = child_env(ROOT / "src")
    print("filling the demo store (rtscope demo) ...", file=sys.stderr)
    subprocess.run([sys.executable, "-c", CLI, "demo", "--db", db], env=env, check=True,
                   stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    return db, 1


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--repeat", type=int, default=11, help="runs per command (the median is shown)")
    ap.add_argument("--baseline", metavar="REV", help="also time this git revision's CLI (e.g. the commit "
                                                         "before a change)")
    ap.add_argument("--db", help="store for runs/show (default: a fresh demo store)")
    ap.add_argument("--run", type=int, default=1, help="run id for `show` (with --db)")
    ap.add_argument("--only", help="only the commands whose label contains this text")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory(prefix="rtscope-startup-") as tmp:
        work = Path(tmp)
        db, run_id = (args.db, args.run) if args.db else demo_store(work)
        trees = {"now": ROOT / "src"}
        if args.baseline:
            (work / "base").mkdir()
            trees[args.baseline] = source_of(args.baseline, work / "base")
        envs = {name: child_env(src) for name, src in trees.items()}
        py = measure([sys.executable, "-c", "pass"], envs["now"], args.repeat)
        print(f"python -c pass: {py['wall']:.3f} s wall (median of {args.repeat}), {py['cpu']:.3f} s CPU")
        head = f"{'command':26} {'goal':>6}" + "".join(f" {name[:10]:>10} {'CPU':>6}" for name in trees)
        print(head + "  heavy imports (now)")
        misses = []
        for label, argv, goal in commands(db, run_id):
            if args.only and args.only not in label:
                continue
            line = f"{'rtscope ' + label:26} {GOALS[goal]:>6.2f}"
            for name, env in envs.items():
                m = measure([sys.executable, "-c", CLI, *argv], env, args.repeat)
                if m["rc"] != 0:
                    line += f" {'exit ' + str(m['rc']):>10} {'':>6}"
                    continue
                line += f" {m['wall']:>10.3f} {m['cpu']:>6.3f}"
                if name == "now" and m["wall"] > GOALS[goal]:
                    misses.append(label)
            heavy = heavy_imports([sys.executable, "-c", CLI, *argv], envs["now"])
            print(line + "  " + (", ".join(heavy) or "-"), flush=True)
        print(f"reported in issue 26 before this work: " +
              ", ".join(f"rtscope {k} {v:.2f} s" for k, v in REPORTED_BEFORE.items()))
        print("over the goal now: " + (", ".join(misses) or "none"))


if __name__ == "__main__":
    main()
