"""A defined target as data: its name, kind, URL and table (`[targets.NAME]`), secrets redacted when shown.

Only data: `registry.make()` turns one into a Target, so the target kinds can name this type without importing
the registry that lists them.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

SECRET_KEYS = ("cookie",)  # never stored with an experiment nor printed
SECRET_LINE = re.compile(r"^(\s*(?:%s)\s*=\s*).*$" % "|".join(SECRET_KEYS), re.M)
SECRET_SHOWN = "(secret, not shown)"


@dataclass(frozen=True)
class TargetDefinition:
    name: str
    kind: str
    url: str | None = None
    description: str = ""
    options: dict[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict:
        return {"name": self.name, "kind": self.kind, "url": self.url, "description": self.description,
                **redact_table(self.options)}


def redact_table(table: dict) -> dict:
    return {k: SECRET_SHOWN if k in SECRET_KEYS else v for k, v in table.items()}
