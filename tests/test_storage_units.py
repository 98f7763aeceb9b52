"""Workload storage on the native runtime, as a normal task: parameters, the rtprobe command, small runs end to
end in a temporary directory, bad input. A full or read-only file system (root mounts one):
tests/test_storage.py."""

from __future__ import annotations

import pytest

from rtscope.errors import ProbeError, UsageError
from rtscope.analysis.results import run_stats
from rtscope.experiment.runner import execute
from rtscope.experiment.spec import build_request
from rtscope.runtimes import RUNTIMES
from rtscope.runtimes.base import Site
from rtscope.targets import LocalTarget
from rtscope.store import Store
from rtscope.workloads import byte_count

pytestmark = pytest.mark.fast


def leftovers(path) -> list[str]:
    return sorted(p.name for p in path.iterdir() if p.name.startswith(("rtprobe-storage-", "rtscope-fio-")))


@pytest.mark.parametrize("raw, value", [(4096, 4096), ("4K", 4096), ("4KiB", 4096), ("1g", 1 << 30),
                                        ("16 k", 16384), (8192.0, 8192)])
def test_byte_counts(raw, value):
    assert byte_count(1, 1 << 40)(raw) == value


@pytest.mark.parametrize("raw, problem", [("4MB", "not a byte count"), ("x", "not a byte count"),
                                          (0, "must be 1.."), (True, "not a byte count"), ("", "not a byte count"),
                                          ("2T", "must be 1..")])
def test_bad_byte_counts(raw, problem):
    with pytest.raises(ValueError, match=problem):
        byte_count(1, 1 << 40)(raw)


def test_defaults_are_the_studys():
    req = build_request("storage", "write_sync", "native")
    assert req.params == {"size": 4096, "repetitions": 100_000, "block_size": 4096, "dir": ".", "direct": False,
                          "fdatasync": False, "drop_caches": False}


def test_rtprobe_command(tmp_path):
    req = build_request("storage", "read", "native", {"size": "64K", "repetitions": 3, "dir": str(tmp_path),
                                                      "direct": "true"}, {"cpu": 0})
    argv = RUNTIMES["native"].command(req, str(tmp_path / "out.rts"), Site(LocalTarget()))
    assert argv[1:3] == ["storage", "read"]
    pairs = dict(zip(argv[3::2], argv[4::2]))
    assert pairs["--size"] == "65536" and pairs["--repetitions"] == "3" and pairs["--block-size"] == "4096"
    assert pairs["--direct"] == "true" and pairs["--drop-caches"] == "false" and pairs["--dir"] == str(tmp_path)
    assert argv[-2:] == ["--output", str(tmp_path / "out.rts")] and "--cpu" in argv


@pytest.mark.parametrize("variant, params, message", [
    ("write", {"size": 5000}, "size 5000 is not a multiple of block_size 4096 (nearest multiples: 4096, 8192)"),
    ("write", {"size": 1024}, "smallest valid size: 4096"),
    ("read", {"direct": True, "block_size": 1000, "size": 1000}, "multiple of 512"),
    ("write", {"fdatasync": True}, "fdatasync=true applies to variant write_sync only"),
    ("write_sync", {"drop_caches": True}, "drop_caches=true applies to variant read only"),
    ("write", {"dir": " "}, "dir must not be empty"),
])
def test_bad_parameters_are_refused_before_anything_runs(tmp_path, variant, params, message):
    # Workload rules hold for every runtime and are enforced when the request is built (so `rtscope check`
    # reports them too), before any probe or store exists.
    for runtime in ("native", "fio"):
        with pytest.raises(UsageError, match=message.replace("(", r"\(").replace(")", r"\)")):
            build_request("storage", variant, runtime, {"dir": str(tmp_path), **params})
    assert leftovers(tmp_path) == []


def test_unknown_variant_and_parameter():
    with pytest.raises(UsageError, match="valid variants: write_sync, write, read"):
        build_request("storage", "fsync", "native")
    with pytest.raises(UsageError, match="valid storage parameters: block_size, dir, direct"):
        build_request("storage", "write", "native", {"blocksize": 4096})


@pytest.mark.parametrize("variant", ["write_sync", "write", "read"])
def test_run_end_to_end(tmp_path, rtprobe, variant):
    store = Store(str(tmp_path / "s.db"))
    req = build_request("storage", variant, "native", {"size": "32K", "block_size": "8K", "repetitions": 7,
                                                        "dir": str(tmp_path)})
    run = store.get_run(execute(req, store))
    assert (run["workload"], run["variant"], run["runtime"]) == ("storage", variant, "native")
    assert run["n_samples"] == 7 and [c["name"] for c in run["columns"]] == ["duration", "sync", "block_max"]
    data = store.samples(run.id)
    block = run["trailer"]["histograms"]["block"]
    assert block["n"] == 7 * 4 and run["trailer"]["counters"]["blocks_per_pass"] == 4
    assert (data["block_max"] <= data["duration"]).all() and block["max"] == data["block_max"].max()
    assert ((data["sync"] > 0) if variant == "write_sync" else (data["sync"] == 0)).all()
    st = run_stats(store, run)
    assert st["n"] == 7 and st["min"] > 0
    assert leftovers(tmp_path) == []


def test_missing_directory_is_a_clear_error_and_stores_nothing(tmp_path, rtprobe):
    store = Store(str(tmp_path / "s.db"))
    req = build_request("storage", "write", "native", {"repetitions": 2, "dir": str(tmp_path / "nope")})
    with pytest.raises(ProbeError, match="cannot use directory .*nope': No such file or directory"):
        execute(req, store)
    assert store.runs() == []
