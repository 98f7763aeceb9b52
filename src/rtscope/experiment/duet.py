"""A duet's command: the arms' processes started side by side on the target, a CPU each, at one start gate.

design.py chooses which configurations run as a duet; this module makes the one command that runs them. It is a
POSIX shell script (a board's busybox has one), so the arms start, are stopped (the target's process group) and
fail as one run:

| step | what |
| --- | --- |
| start | every arm in the background, `taskset -c CPU`, with RTSCOPE_DUET_GATE (a path prefix on the target), RTSCOPE_DUET_ARM (its number) and RTSCOPE_DUET_ARMS in its environment |
| the gate | each arm's harness, once ready to measure (a VM booted, its files open), creates `GATE.ARM` and waits until every arm's file is there, then measures: the arms' k-th samples are taken at about the same time, whatever each took to start (BEAM `RtScope.Harness`, rtprobe `rtp_run_open`) |
| a failed arm | its exit status is kept and `GATE.abort` created: an arm waiting at the gate gives up at once instead of at the gate's timeout (DUET_GATE_S) |
| the end | the script waits for every arm and exits with the status of the lowest-numbered arm that failed (0 when all measured); each arm's words go to the one stderr |
"""

from __future__ import annotations

import shlex

DUET_GATE_S = 120   # how long an arm waits at the gate for the others (the harnesses' own default too)


def duet_command(argvs: list[list[str]], cpus: list[int], gate: str) -> list[str]:
    """One argv that runs argvs[i] pinned to cpus[i], all of them released together at `gate`."""
    if len(argvs) != len(cpus):
        raise ValueError("a duet needs one CPU per arm")
    g = shlex.quote(gate)
    lines = ["rc=0"]
    for i, (argv, cpu) in enumerate(zip(argvs, cpus)):
        env = ["env", f"RTSCOPE_DUET_GATE={gate}", f"RTSCOPE_DUET_ARM={i}", f"RTSCOPE_DUET_ARMS={len(argvs)}",
               f"RTSCOPE_DUET_GATE_S={DUET_GATE_S}"]
        lines.append(f"( taskset -c {int(cpu)} {shlex.join(env + argv)}; s=$?; "
                     f"[ $s -eq 0 ] || : > {g}.abort; exit $s ) &")
        lines.append(f"p{i}=$!")
    for i in range(len(argvs)):
        lines.append(f"wait $p{i} || {{ s=$?; [ $rc -ne 0 ] || rc=$s; }}")
    lines.append("exit $rc")
    return ["sh", "-c", "\n".join(lines)]
