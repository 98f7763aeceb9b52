"""fio as a peer: the job mapping, json+ reports converted into storage runs (import and runtime)."""

from __future__ import annotations

import json

import numpy as np
import pytest

from rtscope.errors import RtscopeError, UsageError
from rtscope.importers.fio import convert, expand_bins, fio_bytes
from rtscope.paths import repo_file
from rtscope.experiment.runner import execute
from rtscope.experiment.spec import build_request
from rtscope.runtimes import RUNTIMES
from rtscope.runtimes.fio import fio_args
from rtscope.store import Store

pytestmark = pytest.mark.fast

FIXTURES = repo_file("tests", "fixtures", "fio")
needs_fio = pytest.mark.skipif(RUNTIMES["fio"].unavailable() is not None, reason="fio is not installed (apt-get install fio)")


def report(name: str) -> dict:
    return json.loads((FIXTURES / name).read_text())


@pytest.mark.parametrize("text, value", [("4k", 4096), ("4096", 4096), ("1g", 1 << 30), ("64K", 65536),
                                         ("1GiB", 1 << 30), ("2m", 2 << 20), ("x", None), ("", None)])
def test_fio_sizes(text, value):
    assert fio_bytes(text) == value


def test_expand_bins():
    assert expand_bins({"300": 1, "100": 2, "200": 0}).tolist() == [100, 100, 300]
    assert expand_bins({}).size == 0


def options(argv: list[str]) -> dict[str, str]:
    return dict(a[2:].split("=", 1) for a in argv)


@pytest.mark.parametrize("variant, params, expect, absent", [
    ("write_sync", {}, {"rw": "write", "fsync": "4", "end_fsync": "1", "invalidate": "0"}, ["pre_read", "fdatasync"]),
    ("write_sync", {"fdatasync": True}, {"fdatasync": "4", "end_fsync": "1"}, ["fsync"]),
    ("write", {}, {"rw": "write", "invalidate": "0"}, ["fsync", "end_fsync", "pre_read"]),
    ("read", {}, {"rw": "read", "pre_read": "1", "invalidate": "0"}, ["fsync"]),
    ("read", {"drop_caches": True}, {"invalidate": "1"}, ["pre_read"]),
    ("read", {"direct": True}, {"direct": "1"}, ["pre_read", "invalidate"]),
])
def test_fio_job_mapping(variant, params, expect, absent):
    req = build_request("storage", variant, "fio", {"size": "16K", "repetitions": 7, "block_size": "4K",
                                                    "dir": "/d", **params}, {"cpu": 1})
    opts = options(fio_args(req, "/d/f.dat", "/w/fio.json"))
    base = {"name": "storage", "filename": "/d/f.dat", "bs": "4096", "size": "16384", "loops": "7",
            "ioengine": "psync", "iodepth": "1", "overwrite": "1", "fallocate": "none", "unlink": "1",
            "cpus_allowed": "1", "output-format": "json+", "output": "/w/fio.json"}
    assert {k: opts.get(k) for k in {**base, **expect}} == {**base, **expect}
    assert not set(absent) & set(opts)


def test_import_write_sync_report():
    [sf] = convert(FIXTURES / "write_sync.json", None, {"kernel": "preempt_rt"})
    job = report("write_sync.json")["jobs"][0]
    h = sf.header
    assert (h["workload"], h["variant"], h["runtime"], h["tool"], h["tool_version"]) == \
        ("storage", "write_sync", "fio", "fio", "fio-3.33")
    assert h["params"] == {"size": 16384, "repetitions": 3, "block_size": 4096, "dir": "/srv/data", "direct": False,
                           "fdatasync": False, "drop_caches": False}
    assert h["settings"] == {"kernel": "preempt_rt"}
    lat = sf.data["latency"]
    assert lat.size == job["write"]["lat_ns"]["N"] == 12 and (np.diff(lat) >= 0).all()
    assert sorted(set(lat.tolist())) == sorted(int(k) for k in job["write"]["lat_ns"]["bins"])
    c = sf.trailer["counters"]
    assert c["passes"] == 3 and c["ios"] == 12 and c["sync_ios"] == job["sync"]["total_ios"]
    assert c["runtime_ns"] == job["job_runtime"] * 1_000_000
    assert sf.trailer["fio"]["sync_lat_ns"]["N"] == job["sync"]["lat_ns"]["N"]
    assert any("total (submission + completion)" in n for n in sf.trailer["notes"])


def test_import_completion_latency_when_no_total_bins():
    [sf] = convert(FIXTURES / "write_clat.json", None, {})
    assert sf.header["variant"] == "write" and sf.trailer["fio"]["latency"] == "clat"
    assert sf.n == report("write_clat.json")["jobs"][0]["write"]["clat_ns"]["N"]
    assert sf.header["params"]["repetitions"] == 2 and sf.header["params"]["size"] == 32768


def test_import_warm_read_and_variant_override():
    [sf] = convert(FIXTURES / "read.json", None, {})
    assert sf.header["variant"] == "read" and sf.header["params"]["drop_caches"] is False and sf.n == 64
    with pytest.raises(UsageError, match="valid variants: write_sync, write, read"):
        convert(FIXTURES / "read.json", "cold", {})


def test_import_two_jobs_with_global_options():
    reads, writes = convert(FIXTURES / "two_jobs.json", None, {})
    assert reads.header["fio_job"] == "seqread" and reads.header["variant"] == "read"
    # fio's default invalidate=1 drops the cache at open: cold reads.
    assert reads.header["params"] == {"size": 65536, "repetitions": 1, "block_size": 8192, "dir": "/srv/data",
                                      "direct": False, "fdatasync": False, "drop_caches": True}
    assert writes.header["variant"] == "write_sync" and writes.header["params"]["fdatasync"] is True
    assert reads.n == 8 and writes.n == 8


@pytest.mark.parametrize("name, message", [
    ("plain.json", "no latency bins in the report: run fio with --output-format=json\\+"),
    ("randrw.json", "rw=randrw mixes directions .* valid rw: read, randread, write, randwrite"),
])
def test_import_refuses_what_it_cannot_convert(name, message):
    with pytest.raises(UsageError, match=message):
        convert(FIXTURES / name, None, {})


def test_import_refuses_non_fio_files(tmp_path):
    (tmp_path / "x.json").write_text('{"jobs": []}')
    with pytest.raises(UsageError, match="not a fio JSON report"):
        convert(tmp_path / "x.json", None, {})
    (tmp_path / "y.json").write_text("garbage")
    with pytest.raises(UsageError, match="not a fio JSON report"):
        convert(tmp_path / "y.json", None, {})
    with pytest.raises(UsageError, match="cannot read"):
        convert(tmp_path / "missing.json", None, {})


def test_import_cli_all_or_nothing(cli, db):
    r = cli("import", "fio", FIXTURES / "write_sync.json", FIXTURES / "plain.json", "--db", db)
    assert r.code == 2 and "json+" in r.err
    assert Store(db).runs() == []
    r = cli("import", "fio", FIXTURES / "write_sync.json", FIXTURES / "two_jobs.json", "--db", db)
    assert r.code == 0, r.err
    runs = Store(db).runs()
    assert [x["variant"] for x in runs] == ["write_sync", "read", "write_sync"]
    assert all(x["runtime"] == "fio" and x["workload"] == "storage" for x in runs)


@needs_fio
@pytest.mark.parametrize("variant", ["write_sync", "write", "read"])
def test_fio_runtime_end_to_end(tmp_path, variant):
    store = Store(str(tmp_path / "s.db"))
    target = tmp_path / "target"
    target.mkdir()
    req = build_request("storage", variant, "fio", {"size": "32K", "repetitions": 5, "dir": str(target)})
    run = store.get_run(execute(req, store))
    assert (run["runtime"], run["tool"]) == ("fio", "fio") and run["tool_version"].startswith("fio-")
    assert run["n_samples"] == 8 * 5 and run["params"]["repetitions"] == 5
    assert run["trailer"]["counters"]["passes"] == 5
    assert (store.primary_samples(run) > 0).all()
    assert list(target.iterdir()) == []


@needs_fio
def test_fio_runtime_missing_directory(tmp_path):
    store = Store(str(tmp_path / "s.db"))
    req = build_request("storage", "write", "fio", {"repetitions": 2, "dir": str(tmp_path / "nope")})
    with pytest.raises(RtscopeError, match="cannot use directory .*nope': No such file or directory"):
        execute(req, store)
    assert store.runs() == []
