"""rtscope: measure, compare and improve the real-time behaviour of IoT and edge stacks.

One folder per layer (docs/architecture.md lists every module); a capability that spans layers names its modules
with one prefix: `explain_*` (here `explain_trace`, the leaf that attributes a kernel trace), `plan_*`, `tail_*`.
"""

from .version import __version__

__all__ = ["__version__", "load"]


def __getattr__(name: str):
    """`rtscope.load` (the Python API) on first use: importing any rtscope module does not load the top layer."""
    if name == "load":
        from .api import load
        return load
    raise AttributeError(f"module 'rtscope' has no attribute {name!r}")
