"""The wheel: its size (goal <= 15 MB) and the time from `pip install` of it to the first stored run.

Builds the wheel as `make dist` does (python -m build: the sdist, then the wheel from it), creates a fresh
virtualenv outside the checkout, installs the wheel with pip, then, in an empty directory, runs a one-run
spec (exec sum, native, 300 calls) and times each step. With --cold pip uses no cache (every dependency
downloaded, as on a machine that has Python and nothing else); by default pip's cache is used when warm.

Run: .venv/bin/python bench/wheel_install.py [--cold] [--wheel dist/rtscope-*.whl]
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
import zipfile
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
ONE_RUN = ('name = "first"\n[[workload]]\nname = "exec"\nvariants = "sum"\nruntime = "native"\n'
           '[workload.params]\niterations = 300\n')


def timed(argv: list, **kw) -> float:
    start = time.monotonic()
    proc = subprocess.run([str(a) for a in argv], capture_output=True, text=True, **kw)
    if proc.returncode:
        sys.exit(f"{' '.join(map(str, argv))} failed:\n{proc.stdout[-2000:]}{proc.stderr[-2000:]}")
    return time.monotonic() - start


def mb(n: int) -> str:
    return f"{n / 1e6:.2f} MB"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--cold", action="store_true", help="pip install --no-cache-dir: download every dependency")
    ap.add_argument("--wheel", type=Path, help="an already built wheel (default: build one now)")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory(prefix="rtscope-wheel-bench-") as tmp:
        tmp = Path(tmp)
        wheel = args.wheel
        if wheel is None:
            took = timed([sys.executable, "-m", "build", "--outdir", tmp / "dist", REPO], timeout=600)
            (wheel,) = (tmp / "dist").glob("*.whl")
            print(f"build (sdist + wheel):      {took:6.1f} s")
        with zipfile.ZipFile(wheel) as z:
            infos = z.infolist()
        data = sum(i.compress_size for i in infos if i.filename.startswith("rtscope/data/probes/"))
        vendor = sum(i.compress_size for i in infos if "/vendor/" in i.filename)
        print(f"wheel {wheel.name}: {mb(wheel.stat().st_size)} (goal <= 15 MB); "
              f"probes {mb(data)}, plotly bundle {mb(vendor)}, {len(infos)} files")

        venv = tmp / "venv"
        t_venv = timed([sys.executable, "-m", "venv", venv], timeout=300)
        pip = [venv / "bin" / "pip", "install", "-q", *(["--no-cache-dir"] if args.cold else []), wheel]
        t_pip = timed(pip, timeout=1800)
        size = sum(p.stat().st_size for p in venv.rglob("*") if p.is_file() and not p.is_symlink())
        here = tmp / "empty"
        here.mkdir()
        (here / "first.toml").write_text(ONE_RUN)
        rtscope = venv / "bin" / "rtscope"
        t_version = timed([rtscope, "--version"], cwd=here, timeout=120)
        t_run = timed([rtscope, "run", "first.toml"], cwd=here, timeout=300)
        runs = json.loads(subprocess.run([rtscope, "runs", "--json"], cwd=here, capture_output=True,
                                         text=True, check=True).stdout)
        assert len(runs) == 1 and runs[0]["n_samples"] == 300, runs
        print(f"python -m venv:             {t_venv:6.1f} s")
        print(f"pip install the wheel:      {t_pip:6.1f} s ({'cold: no cache' if args.cold else 'pip cache as is'}; "
              f"the venv is {mb(size)})")
        print(f"rtscope --version:          {t_version:6.2f} s")
        print(f"first run stored:           {t_run:6.1f} s (rtscope run, exec sum native, 300 calls)")
        print(f"pip install -> first run:   {t_pip + t_run:6.1f} s")


if __name__ == "__main__":
    main()
