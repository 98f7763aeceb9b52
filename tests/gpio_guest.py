"""The virtual Raspberry Pi 3 of the GPIO tests (test_gpio.py, test_gpio_explain.py): qemu-system-aarch64 -M virt
with Debian's arm64 kernel, a PL061 GPIO controller, Erlang and Elixir for arm64 in its root file system. One guest
per test module (its module-scoped fixture)."""

from __future__ import annotations

import pytest

from rtscope import targets


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
