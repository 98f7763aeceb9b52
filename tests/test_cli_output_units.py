"""What the commands print, the rule in code (issue 31): every table is cli.common.Table, whose columns can never
cut a value. The commands themselves at 80 columns, on a pseudo-terminal and piped: tests/test_cli_output.py."""

from __future__ import annotations

import pytest

from rtscope.paths import repo_file

pytestmark = pytest.mark.fast


def test_every_table_is_the_one_that_never_cuts():
    """The rule in code: every table is cli.common.Table, whose columns cannot cut (no ellipsis, no crop)."""
    from rtscope.cli.common import Table
    sources = [p for p in repo_file("src", "rtscope").rglob("*.py") if p.name != "common.py"]
    assert sources and not [p for p in sources if "rich.table import Table" in p.read_text()]
    for cut in ({"overflow": "ellipsis"}, {"overflow": "crop"}, {"no_wrap": True}):
        with pytest.raises(ValueError, match="never cuts"):
            Table().add_column("value", **cut)
    table = Table()
    table.add_column("value")
    assert (table.columns[0].overflow, table.columns[0].no_wrap) == ("fold", False)
