"""The order in which `make test`'s first phase hands files to its two workers (docs/testing.md): the longest
first. pytest-xdist's `--dist loadfile` gives a worker a whole file at a time, in collection order when
`--no-loadscope-reorder` is given (by default it starts the files with the most tests first: the many quick
unit-test files, and the few-test QEMU files last, where a 3-minute file started near the end kept one worker
busy while the other had nothing left). Longest first, every worker takes the next file when it is free, and the
phase ends within about one short file of its even share.

SECONDS are what each file took in a run of that phase (`--durations=0`, summed per file, 2026-11-29, on this
shared 2-core machine); only their order matters, and a file missing here (new, or under 10 s) comes after these
in its own order. Keep it roughly current: a new file of a minute or more belongs here. test_qemu_target and
test_gpio: their tests' seconds in a clean-clone run of 2026-11-29 (qemu_target 67 + 47 + about 15; gpio less the
fresh Erlang VMs its blink, GenServer and refusal no longer start); by themselves on a quiet machine the same day,
test_qemu_target took 99 s and test_gpio 90 s."""

from __future__ import annotations

SECONDS = {
    # test_tune and test_wheel: that run's 146 and 137 s less what their tests' changes saved, measured per test
    "test_tune": 131, "test_qemu_target": 130, "test_gpio": 112, "test_cli_output": 111,
    "test_fleet_faults": 106, "test_wheel": 102, "test_board_faults": 100, "test_report_readable": 88, "test_postgres_store": 88,
    "test_store_outage": 83, "test_fleet_monitor": 74, "test_serve": 63, "test_ssh_session": 58,
    "test_labgrid_target": 52, "test_ssh_target": 51, "test_beam_node": 47, "test_prometheus": 44,
    "test_kernel_cmdline_qemu": 37, "test_exceedance_browser": 29, "test_tail": 29, "test_figures_geometry": 27,
    "test_tail_rows": 23, "test_monitor_crash": 23, "test_governor_signals": 21, "test_gate": 21,
    "test_exceedance": 18, "test_report": 18, "test_report_lab": 16, "test_experiment": 15, "test_timer": 15,
    "test_readme_study": 15, "test_browser": 13, "test_make_demo": 13, "test_environments": 12,
    "test_claims_studies": 12, "test_paired": 10,
}


# Two of the longest files emulate their guests under TCG (each vCPU a host thread using all the CPU it gets):
# started together, three or four guests share the two cores, nearer their hang timeouts. They start first and third
# whatever their seconds: xdist gives each worker two files at first (the 1st and 3rd to one, the 2nd and 4th to the
# other), so both are the same worker's, one after the other.
APART = ("test_qemu_target", "test_gpio")


def longest_first(items: list) -> None:
    """Reorder the collected tests in place: whole files, the longest first (but APART's first and third); a
    file's own tests keep their order (its module fixtures are made once either way). Deterministic, so both
    workers collect the same order."""
    first_seen: dict[str, int] = {}
    for i, item in enumerate(items):
        first_seen.setdefault(item.path.stem, i)
    files = sorted(first_seen, key=lambda f: (-SECONDS.get(f, 0), first_seen[f]))
    if all(f in files for f in APART) and len(files) > 2:
        rest = [f for f in files if f not in APART]
        files = [APART[0], rest[0], APART[1], *rest[1:]]
    rank = {f: i for i, f in enumerate(files)}
    items.sort(key=lambda item: rank[item.path.stem])
