"""BEAM node targets' definitions, before any node is reached: the erlang:// URL and the target's table refused
with what is wrong (no node name, a port, an unknown key, both cookie and cookie file, a cookie file that cannot
be read). Real nodes over Erlang distribution and nerves_ssh: tests/test_beam_node.py."""

from __future__ import annotations

import pytest

from rtscope import targets
from rtscope.errors import UsageError

pytestmark = pytest.mark.fast


def test_node_urls_and_tables(tmp_path):
    with pytest.raises(UsageError, match=r"write erlang://NAME@HOST, e\.g\. erlang://rtscope@nerves-1234\.local"):
        targets.define("n", {"url": "erlang://nerves.local"})
    with pytest.raises(UsageError, match="without a port"):
        targets.define("n", {"url": "erlang://rtscope@nerves.local:4369"})
    with pytest.raises(UsageError, match="unknown key 'identity' for a erlang target; valid keys: .*cookie_file"):
        targets.define("n", {"url": "erlang://rtscope@nerves.local", "identity": "x"})
    d = targets.define("n", {"url": "erlang://rtscope@nerves.local", "cookie": "a", "cookie_file": "b"})
    with pytest.raises(UsageError, match="give cookie or cookie_file, not both"):
        targets.make(d)
    d = targets.define("m", {"url": "erlang://rtscope@nerves.local", "cookie_file": str(tmp_path / "none")})
    with pytest.raises(UsageError, match="cannot read the cookie file"):
        targets.make(d)
