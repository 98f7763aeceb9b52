"""The virtual Raspberry Pi 3 of the GPIO tests (test_gpio.py, test_gpio_explain.py): qemu-system-aarch64 -M virt
with Debian's arm64 kernel, a PL061 GPIO controller, Erlang and Elixir for arm64 in its root file system. One guest
per test module (its module-scoped fixture); a GPIO run in it with setting explain."""

from __future__ import annotations

import json

import pytest

from rtscope import targets
from rtscope.experiment.runner import execute
from rtscope.experiment.spec import build_request
from rtscope.store import Store


@pytest.fixture(scope="module")
def pi3(tmp_path_factory):
    import tempfile
    saved = tempfile.tempdir
    tempfile.tempdir = str(tmp_path_factory.mktemp("guest"))  # this module's guest, nobody else's
    before = dict(targets.TARGETS)
    targets.define("pi3", {"kind": "qemu", "arch": "aarch64", "kernel": "debian:stock", "accel": "tcg",
                           "packages": ["elixir", "erlang-ssh"]}, replace=True)
    try:
        with targets.Pool() as pool:
            yield pool.get("pi3")
    finally:
        targets.TARGETS.clear()
        targets.TARGETS.update(before)
        tempfile.tempdir = saved


def explained_run(pi3, tmp_path, cli, variant: str, **params):
    """A native GPIO run on the guest's CPU 1 at SCHED_FIFO 80 with explain = 10: (run, samples, explain's JSON);
    the run's tracefs instance is gone after it."""
    db = str(tmp_path / "explain.db")
    store = Store(db)
    req = build_request("gpio", variant, "native", params,
                        {"target": "pi3", "cpu": 1, "rt_priority": 80, "mlock": True, "explain": 10})
    run = store.get_run(execute(req, store, target=pi3))
    left = pi3.run(["sh", "-c", "ls /sys/kernel/tracing/instances"]).stdout.split()
    assert [x for x in left if x.startswith("rtscope-")] == []  # the run's tracefs instance is gone
    out = json.loads(cli("explain", run.id, "--db", db, "--json").out)
    return run, store.samples(run.id), out
