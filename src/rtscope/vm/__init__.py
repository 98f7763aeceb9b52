"""Virtual machines rtscope boots itself: Debian kernels, small root file systems, QEMU guests (docs/kernels.md)."""
