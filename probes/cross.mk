# Static builds of rtprobe for the targets rtscope deploys to (docs/targets.md), with Debian's cross compilers:
#   make cross        build/cross/{x86_64,aarch64,armhf}/rtprobe
#   make cross-test   each one checked (static, right machine) and, for the foreign arches, run under qemu-user
# armhf is the Raspberry Pi 3 in 32-bit mode (Raspberry Pi OS armhf), aarch64 the same board in 64-bit mode.

CROSS_ARCHES      = x86_64 aarch64 armhf
CROSS_CC_x86_64   = x86_64-linux-gnu-gcc
CROSS_CC_aarch64  = aarch64-linux-gnu-gcc
CROSS_CC_armhf    = arm-linux-gnueabihf-gcc

.PHONY: cross cross-test $(addprefix cross-,$(CROSS_ARCHES))

cross: $(addprefix cross-,$(CROSS_ARCHES))

# One make per arch with its own compiler and object tree; -static at link time (CFLAGS reach the link).
$(addprefix cross-,$(CROSS_ARCHES)): cross-%:
	$(MAKE) --no-print-directory BUILD=$(BUILD)/cross/$* CC=$(CROSS_CC_$*) CFLAGS="-O2 -static" \
	  $(BUILD)/cross/$*/rtprobe

cross-test: cross
	sh tests/test_cross.sh $(BUILD)/cross $(PYTHON)
