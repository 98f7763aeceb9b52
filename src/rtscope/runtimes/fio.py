"""Runtime `fio`: workload storage run by fio, the reference tool, as the job equivalent to `rtprobe storage`.

The mapping (docs/storage.md has the full table): one job, one file of `size`
bytes in `dir`, `bs=block_size`, `loops=repetitions`, psync engine at queue
depth 1, the file written in full before the timed loops (`overwrite=1`,
`fallocate=none`) and removed afterwards (`unlink=1`); write_sync adds
`fsync=<blocks per pass>` (or `fdatasync=`) and `end_fsync=1`; warm reads use
`pre_read=1`, cold ones `invalidate=1`; `direct=1` for O_DIRECT. fio writes a
json+ report, which `collect` converts into a sample file (importers/fio.py).
"""

from __future__ import annotations

import os
import posixpath
import subprocess
import uuid
from dataclasses import dataclass
from pathlib import Path

from .. import samplefile
from ..errors import ProbeError, RtscopeError
from ..importers.fio import convert_job, load_report
from ..settings import environments
from ..targets import LocalTarget, Target
from .base import RunRequest, Runtime, Site

REPORT = "fio.json"
INSTALL = "sudo apt-get install -y fio"


def fio_args(req: RunRequest, filename: str, report: str) -> list[str]:
    """fio's options for a storage request (everything on the command line, no job file)."""
    p = req.params
    blocks = p["size"] // p["block_size"]
    argv = ["--name=storage", f"--filename={filename}", f"--rw={'read' if req.variant == 'read' else 'write'}",
            f"--bs={p['block_size']}", f"--size={p['size']}", f"--loops={p['repetitions']}",
            "--ioengine=psync", "--iodepth=1", "--numjobs=1", f"--direct={int(bool(p['direct']))}",
            "--overwrite=1", "--fallocate=none", "--unlink=1", "--lat_percentiles=1"]
    if req.variant == "write_sync":
        argv += [f"--{'fdatasync' if p['fdatasync'] else 'fsync'}={blocks}", "--end_fsync=1"]
    if req.variant == "read":
        if p["drop_caches"]:
            argv.append("--invalidate=1")
        elif not p["direct"]:
            argv += ["--invalidate=0", "--pre_read=1"]
    else:
        argv.append("--invalidate=0")
    if "cpu" in req.settings:
        argv.append(f"--cpus_allowed={req.settings['cpu']}")
    return argv + ["--output-format=json+", f"--output={report}"]


def check_target(directory: str, size: int) -> None:
    """The checks rtprobe makes before writing, for a directory this host can see."""
    d = Path(directory)
    if not d.exists():
        raise RtscopeError(f"fio storage: cannot use directory '{directory}': No such file or directory")
    if not d.is_dir():
        raise RtscopeError(f"fio storage: '{directory}' is not a directory")
    if not os.access(d, os.W_OK | os.X_OK):
        raise RtscopeError(f"fio storage: directory '{directory}' is not writable")
    st = os.statvfs(d)
    avail = st.f_bavail * st.f_frsize
    need = size + (size >> 20) * st.f_frsize + st.f_frsize
    if avail < need:
        raise RtscopeError(f"fio storage: not enough free space in '{directory}': the test file needs {size} bytes, "
                           f"{avail} bytes are available")


def _here(req: RunRequest) -> bool:
    """Whether this host sees the directory fio writes to (local target, no wrapper with its own files)."""
    on_local = req.settings.get("target", "local") == "local"
    return on_local and environments.resolve(req.settings.get("env", environments.LOCAL)).mode == "shared"


@dataclass
class Fio(Runtime):
    def unavailable(self, target: Target | None = None) -> str | None:
        target = target or LocalTarget()
        return None if target.which("fio") else f"fio is not installed on target {target.name} ({INSTALL})"

    def prepare(self, req: RunRequest) -> None:
        if _here(req):
            check_target(req.params["dir"], req.params["size"])

    def command(self, req: RunRequest, out: str, site: Site) -> list[str]:
        filename = f"{req.params['dir'].rstrip('/') or '/'}/rtscope-fio-{uuid.uuid4().hex[:12]}.dat"
        args = fio_args(req, filename, posixpath.join(posixpath.dirname(out), REPORT))
        if _here(req):
            return ["fio", *args]
        # Inside another filesystem rtscope cannot check free space first, and fio keeps its file when a write
        # fails: remove it whatever fio's exit status.
        return ["sh", "-c", 'f=$1; shift; fio "$@"; rc=$?; rm -f -- "$f"; exit $rc', "sh", filename, *args]

    def collect(self, req: RunRequest, out: Path, workdir: Path, proc: subprocess.CompletedProcess) -> Path:
        report_path = out.with_name(REPORT)
        if not report_path.exists():
            raise ProbeError(f"fio wrote no report {report_path}: {(proc.stderr or proc.stdout or '').strip()[-2000:]}")
        report = load_report(report_path)
        if len(report["jobs"]) != 1:
            raise ProbeError(f"fio report {report_path} has {len(report['jobs'])} jobs, expected 1")
        probe_settings = {k: v for k, v in req.settings.items() if k in self.settings}
        sf = convert_job(report, report["jobs"][0], "fio", req.variant, probe_settings, req.params)
        sf.header.pop("imported_from", None)
        samplefile.write(out, sf.header, sf.data, sf.trailer)
        return out

    def outputs(self, req: RunRequest, out: str) -> list[str]:
        return [REPORT]

    def version(self, site: Site | None = None) -> str | None:
        target = site.target if site else LocalTarget()
        try:
            res = target.run(["fio", "--version"], timeout=10)
        except RtscopeError:
            return None
        return res.stdout.strip() or None


RUNTIME = Fio(
    name="fio",
    help=f"fio, the reference storage benchmark, running the job equivalent to rtprobe storage ({INSTALL})",
    workloads={"storage": ("write_sync", "write", "read")},
    settings=("cpu",),
)
