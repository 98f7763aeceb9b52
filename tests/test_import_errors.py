"""Every importer refuses a file that is not its format with one line naming that file (issue 31: `rtscope import
cyclictest /etc/passwd` did not say which file), exits 2 and leaves the store as it was, also when the bad file
comes after good ones."""

from __future__ import annotations

import pytest

from rtscope.importers import KINDS
from rtscope.paths import repo_file
from rtscope.store import Store

pytestmark = pytest.mark.fast

GOOD = {"cyclictest": repo_file("tests", "fixtures", "cyclictest", "verbose_study2.txt")}


def wrong_files(tmp_path):
    """Files no importer takes: /etc/passwd's lines, a binary, an empty file, a CSV of other columns, JSON of
    something else; their names have a space, so that the test sees the whole name."""
    text = tmp_path / "not a log.txt"
    text.write_text("root:x:0:0:root:/root:/bin/bash\ndaemon:x:1:1:daemon:/usr/sbin:/usr/sbin/nologin\n")
    binary = tmp_path / "a binary"
    binary.write_bytes(bytes(range(256)) * 8)
    empty = tmp_path / "empty file"
    empty.write_text("")
    csv = tmp_path / "other columns.csv"
    csv.write_text("when,what\n1,2\n")
    json_ = tmp_path / "other thing.json"
    json_.write_text('{"jobs": 3, "thread": []}')
    return [text, binary, empty, csv, json_]


@pytest.mark.parametrize("kind", list(KINDS))
def test_a_wrong_file_is_named_and_nothing_is_stored(cli, db, make_samplefile, tmp_path, kind):
    assert cli("import", "rts", make_samplefile([1, 2, 3]), "--db", db).code == 0
    before = [(r.id, r.source) for r in Store(db).runs()]
    variant = ["--variant", "sum"] if kind == "nerves-csv" else []
    for path in wrong_files(tmp_path):
        r = cli("import", kind, path, *variant, "--db", db)
        assert r.code == 2, (kind, path, r.out, r.err)
        assert r.err.startswith("rtscope: error: ") and "Traceback" not in r.err, r.err
        assert str(path) in " ".join(r.err.split()), (kind, path, r.err)
        assert [(x.id, x.source) for x in Store(db).runs()] == before


def test_the_bad_one_among_good_files_is_named(cli, db, tmp_path):
    bad = wrong_files(tmp_path)[0]
    r = cli("import", "cyclictest", GOOD["cyclictest"], bad, "--db", db)
    assert r.code == 2 and str(bad) in " ".join(r.err.split()), r.err
    assert str(GOOD["cyclictest"]) not in r.err
    assert Store(db).runs() == []
