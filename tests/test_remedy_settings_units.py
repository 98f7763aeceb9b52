"""The settings remedies are made of, without touching this machine's settings: their values parsed and bad ones
named, a run refused naming why a value cannot be applied, the refusal on a target without a shell, and when a
QEMU guest boots again for kernel_cmdline (the decision only). Applied to the real procfs/sysfs and put back
(root): tests/test_remedy_settings.py."""

from __future__ import annotations

from pathlib import Path

import pytest

from rtscope.settings import kernel_cmdline, kernel_files
from rtscope.settings.registry import SETTINGS
from rtscope.store import Store

pytestmark = pytest.mark.fast


# ---- values -------------------------------------------------------------------------------------------------

def test_values_parsed_and_bad_ones_named():
    p = SETTINGS["irq_affinity"].value
    assert p(" 38, virtio0-input.0 @ 0,1") == "38,virtio0-input.0@0-1"
    assert p("*@1") == "*@1"
    for bad, says in (("38", "IRQs@CPUs"), ("@0", "no IRQ"), ("*,3@0", "give it alone"), ("38@x", "CPU list"),
                      ("38@", "CPU list")):
        with pytest.raises(Exception, match=says):
            p(bad)
    assert SETTINGS["workqueue_cpumask"].value([0, 2, 3]) == "0,2-3"
    assert SETTINGS["rt_runtime_us"].value("-1") == -1
    with pytest.raises(Exception, match="stop every real-time task"):
        SETTINGS["rt_runtime_us"].value(0)
    with pytest.raises(Exception, match=r"must be >= -1"):
        SETTINGS["rt_runtime_us"].value(-5)
    with pytest.raises(Exception, match="must be >= 0"):
        SETTINGS["cpu_dma_latency"].value(-1)
    assert SETTINGS["kernel_cmdline"].value(" isolcpus=1   nohz_full=1 ") == "isolcpus=1 nohz_full=1"
    with pytest.raises(Exception, match="set by rtscope's own boot"):
        SETTINGS["kernel_cmdline"].value("console=ttyS1")
    assert kernel_files.from_mask("2,00000001") == (1 << 33) | 1 and kernel_files.from_mask("3\n") == 3


# ---- through the CLI: a value that cannot be applied --------------------------------------------------------

def exec_spec(tmp_path: Path, settings: str, extra: str = "", name: str = "remedies", params: str = "") -> Path:
    p = tmp_path / f"{name}.toml"
    p.write_text(f'name = "{name}"\n{extra}[[workload]]\nname = "exec"\nvariants = "sum"\n'
                 f'[workload.params]\niterations = 200\npause_ms = 0\n{params}[workload.settings]\n{settings}')
    return p


def test_unavailable_value_fails_the_run_naming_why(tmp_path, cli):
    db = str(tmp_path / "s.db")
    r = cli("run", exec_spec(tmp_path, 'irq_affinity = "no-such-irq@0"\n'), "--db", db)
    assert r.code != 0
    said = " ".join((r.out + r.err).split())
    assert "no IRQ named 'no-such-irq'" in said
    r = cli("run", exec_spec(tmp_path, 'kernel_cmdline = "isolcpus=1"\n', name="k"), "--db", db)
    assert r.code != 0 and "targets of kind qemu" in " ".join((r.out + r.err).split())
    assert not Path(db).exists() or Store(db).runs() == []


def test_refused_on_a_target_without_a_shell(clean_targets):
    """A running BEAM node runs the harness only: the settings that run commands there say so."""
    from rtscope import targets
    node = targets.make(targets.define("node", {"url": "erlang://rtscope@nerves.local", "cookie": "c"}))
    for name, value in (("irq_affinity", "*@0"), ("workqueue_cpumask", "0"), ("rt_runtime_us", -1),
                        ("cpu_dma_latency", 0), ("kernel_cmdline", "isolcpus=1")):
        said = SETTINGS[name].unavailable(value, node)
        assert said is not None and ("target node (erlang)" in said or "targets of kind qemu" in said), (name, said)


def test_a_vm_boots_again_only_when_its_runs_command_line_changes(monkeypatch, clean_targets):
    """The decision only (test_kernel_cmdline_qemu.py boots a real guest): the first run's command line is the
    first boot's, the same one boots nothing, a run without one boots the guest back to none."""
    from types import SimpleNamespace
    from rtscope import targets
    vm = targets.make(targets.define("vm", {"kind": "qemu", "arch": "x86_64", "kernel_args": "quiet"}))
    boots = []
    running = SimpleNamespace(proc=SimpleNamespace(poll=lambda: None))
    monkeypatch.setattr(type(vm), "open", lambda self: (boots.append(self.extra_args), setattr(self, "guest", running)))
    monkeypatch.setattr(type(vm), "close", lambda self: setattr(self, "guest", None))
    vm.expect({"kernel_cmdline": "isolcpus=1  nohz_full=1"})  # the pool tells it before opening
    vm.open()
    kernel_cmdline.prepare("isolcpus=1 nohz_full=1", vm)
    kernel_cmdline.prepare(None, vm)
    kernel_cmdline.prepare(None, vm)
    kernel_cmdline.prepare("rcu_nocbs=1", vm)
    assert boots == ["isolcpus=1 nohz_full=1", "", "rcu_nocbs=1"]
    assert kernel_cmdline.unavailable("isolcpus=1", vm) is None
