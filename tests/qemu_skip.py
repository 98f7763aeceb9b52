"""Why the QEMU guest tests cannot run on this machine (for their skip marks), else None."""

from __future__ import annotations

import os

PACKAGES = {"x86_64": "qemu-system-x86", "aarch64": "qemu-system-arm"}


def qemu_unavailable(*arches: str, root_for: str) -> str | None:
    """Not root (`root_for` says what needs it), or the qemu-system binary of an architecture missing."""
    if os.geteuid() != 0:
        return f"needs root ({root_for})"
    missing = [PACKAGES[a] for a in arches if not os.path.exists(f"/usr/bin/qemu-system-{a}")]
    if missing:
        return f"{' and '.join(missing)} {'is' if len(missing) == 1 else 'are'} not installed"
    return None
