"""Virtual machines rtscope boots itself: Debian kernels, small root file systems, QEMU guests (docs/kernels.md).

Below the targets (`targets.qemu` boots its guest through this package): it imports only the leaf modules.
"""
