"""The xenomai runtime on an SSH target (a real sshd in its own namespaces, a stand-in `latency` there printing a
recorded output): the SSH target, the command line rtscope builds and the parsing of what comes back are real.
The importer: tests/test_xenomai.py."""

from __future__ import annotations

import pytest

import sshd
from rtscope import targets
from rtscope.experiment.runner import execute
from rtscope.experiment.spec import build_request
from rtscope.store import Store
from test_xenomai import FIXTURES

pytestmark = pytest.mark.real


WHY = sshd.available()


@pytest.mark.skipif(WHY is not None, reason=WHY or "")
def test_runtime_on_an_ssh_target(tmp_path):
    output = tmp_path / "latency-output.txt"  # the checkout is hidden on the target: a copy it can read
    output.write_text((FIXTURES / "latency-histogram.txt").read_text())
    fake = tmp_path / "latency"
    fake.write_text("#!/bin/sh\necho \"$@\" > " + str(tmp_path / "args") + "\n"
                    f"grep -v '^HS' {output}\ngrep '^HS' {output} >&2\n")
    fake.chmod(0o755)
    server = sshd.SshServer(tmp_path / "x", "rtscope-xenomai",
                            setup=("mount -t tmpfs tmpfs /usr/local/bin", f"cp {fake} /usr/local/bin/latency")).start()
    before = dict(targets.TARGETS)
    try:
        targets.define("xeno", {"url": server.url, "identity": str(server.user_key),
                                "known_hosts": str(server.known_hosts), "workdir": str(server.workdir)})
        req = build_request("timer", "absolute", "xenomai", {"interval_us": 1000, "loops": 2000},
                            {"target": "xeno", "rt_priority": 80, "cpu": 0})
        store = Store(str(tmp_path / "s.db"))
        with targets.Pool() as pool:
            run = store.get_run(execute(req, store, target=pool.get("xeno")))
    finally:
        server.stop()
        targets.TARGETS.clear()
        targets.TARGETS.update(before)
    assert (tmp_path / "args").read_text().split() == ["-p", "1000", "-T", "2", "-h", "-s", "-P", "80", "-c", "0"]
    assert run["runtime"] == "xenomai" and run["environment"]["hostname"] == "rtscope-xenomai"
    assert run["trailer"]["histograms"]["thread0"]["n"] == 2000
