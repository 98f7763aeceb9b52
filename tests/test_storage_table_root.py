"""rtscope storage-table on real environments side by side (root): local, a namespace wrapper and a chroot on a
loop-mounted ext2 image mounted sync, whose differences the table shows. The table from fixtures and short
native runs: tests/test_storage_table.py."""

from __future__ import annotations

import json
import shutil
import subprocess

import pytest

from rtscope.settings.environments import define_environment
from rtscope.store import Store
from mounts import mounted
from test_storage_table import run_storage

pytestmark = pytest.mark.real



@pytest.fixture
def slow_jail(tmp_path):
    """A chroot on a loop-mounted ext2 image mounted `sync`: every write goes to the (loop) disk at once."""
    for tool in ("mkfs.ext2", "losetup"):
        if not shutil.which(tool):
            pytest.skip(f"{tool} not found (e2fsprogs / util-linux)")
    img = tmp_path / "slow.img"
    with open(img, "wb") as f:
        f.truncate(32 << 20)
    subprocess.run(["mkfs.ext2", "-q", "-F", str(img)], check=True)
    with mounted(["-o", "loop,sync", str(img)], tmp_path / "slow", "a loop device (an ext2 image)") as mnt:
        from test_environments import make_jail
        make_jail(mnt)
        yield mnt


def test_environments_side_by_side(cli, db, tmp_path, rtprobe, slow_jail):
    """local, a namespace wrapper and a slow chroot: the table shows real differences."""
    if subprocess.run(["unshare", "--mount", "--pid", "--fork", "true"], capture_output=True).returncode:
        pytest.skip("unshare --mount --pid --fork is not permitted here")
    define_environment("ns", ["unshare", "--mount", "--pid", "--fork"], root="/")
    define_environment("slow", ["chroot", str(slow_jail)], root=str(slow_jail))
    target = tmp_path / "disk"
    target.mkdir()
    store = Store(db)
    for variant in ("write_sync", "write", "read"):
        for env, d in (("local", str(target)), ("ns", str(target)), ("slow", "/")):
            run_storage(store, variant, env, d)
    r = cli("storage-table", "--db", db)
    assert r.code == 0, r.err
    assert all(c in r.out for c in ("local", "ns", "slow"))
    [table] = json.loads(cli("storage-table", "--db", db, "--json").out)
    assert table["columns"] == ["local", "ns", "slow"]
    mean = {(c["variant"], c["column"]): c["pass_mean_ns"] for c in table["cells"]}
    # On a sync mount every write waits for the device: far slower than the page cache.
    assert mean["write", "slow"] > 5 * mean["write", "local"]
    assert mean["write", "slow"] > 5 * mean["write", "ns"]
    # Everywhere, a pass that ends in fsync costs more than one that does not.
    assert mean["write_sync", "local"] > mean["write", "local"]
    assert not [p for p in target.iterdir()] and list((slow_jail / "tmp").iterdir()) == []
