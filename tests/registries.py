"""rtscope's registries of defined targets and environments, kept as they were around a test or a fixture: a spec
parsed defines its [targets.*] and [environments.*] for the whole process, and a later test's own definition of
the same name would be a redefinition (or a QEMU target left defined would boot for every later command)."""

from __future__ import annotations

from contextlib import contextmanager
from typing import Iterator


@contextmanager
def definitions_forgotten() -> Iterator[None]:
    """What is defined inside the block is forgotten when it ends."""
    from rtscope import targets
    from rtscope.settings import environments
    registries = (targets.TARGETS, environments.ENVIRONMENTS)
    before = [dict(r) for r in registries]
    try:
        yield
    finally:
        for registry, kept in zip(registries, before):
            registry.clear()
            registry.update(kept)
