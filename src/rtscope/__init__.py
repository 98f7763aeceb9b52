"""rtscope: measure, compare and improve the real-time behaviour of IoT and edge stacks."""

__version__ = "0.1.0"

from .api import load  # noqa: E402  (pandas is imported only when load() is called)
