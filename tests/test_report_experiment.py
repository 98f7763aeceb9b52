"""The report says what it reports: the experiment's name, description and tags, and the target, all escaped."""

from __future__ import annotations

import re

from report_fixtures import EVIL
import pytest

pytestmark = pytest.mark.fast

ESCAPED = "&lt;script&gt;window.rtsInjected=1&lt;/script&gt;&lt;img src=x onerror=alert(1)&gt;"


def test_report_of_an_experiment_shows_its_name_description_tags_and_target_escaped(cli, db, tmp_path, rtprobe,
                                                                                    clean_targets):
    quoted = EVIL.replace("\\", "\\\\").replace('"', '\\"')
    spec = tmp_path / "evil.toml"
    spec.write_text(f'''name = "study {quoted}"
description = "jitter of {quoted}"
tags = ["tag {quoted}"]
target = "box"
[targets.box]
kind = "local"
description = "the desk {quoted}"
[[workload]]
name = "exec"
variants = ["sum"]
runtime = "native"
[workload.params]
iterations = 30
pause_ms = 0
''')
    r = cli("run", spec, "--db", db)
    assert r.code == 0, r.err
    out = tmp_path / "r.html"
    r = cli("report", "--db", db, "--experiment", "1", "-o", out)
    assert r.code == 0, r.err
    page = out.read_text()
    assert "window.rtsInjected=1</script>" not in page and "<img src=x" not in page
    assert re.search(r"<title>rtscope report: study " + re.escape(ESCAPED), page)
    assert f"<b>experiment 1: study {ESCAPED}" in page
    assert f"jitter of {ESCAPED}" in page
    assert f"tag {ESCAPED}" in page
    assert f"the desk {ESCAPED}" in page            # the target's description, in the environment table
