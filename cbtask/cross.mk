# Static builds of taskmem for the targets rtscope deploys to (docs/targets.md), with Debian's cross compilers:
#   make cross        build/cross/{x86_64,aarch64,armhf}/taskmem
# (the foreign ones are run under qemu-user by `make -C probes cross-test`, with rtprobe's).

CROSS_ARCHES       = x86_64 aarch64 armhf
CROSS_PREFIX_x86_64  = x86_64-linux-gnu-
CROSS_PREFIX_aarch64 = aarch64-linux-gnu-
CROSS_PREFIX_armhf   = arm-linux-gnueabihf-
# GCC's note that armhf passed some arguments differently before GCC 7.1 (-Wpsabi) concerns linking with code
# built by such a compiler; a static program built by one compiler has no such code.
CROSS_FLAGS_armhf    = -Wno-psabi

.PHONY: cross $(addprefix cross-,$(CROSS_ARCHES))

cross: $(addprefix cross-,$(CROSS_ARCHES))

$(addprefix cross-,$(CROSS_ARCHES)): cross-%:
	$(MAKE) --no-print-directory BUILD=$(BUILD)/cross/$* CC=$(CROSS_PREFIX_$*)gcc CXX=$(CROSS_PREFIX_$*)g++ \
	  OPT="-O2 -static $(CROSS_FLAGS_$*)" $(BUILD)/cross/$*/taskmem
