# Static builds of taskmem for the targets rtscope deploys to (docs/targets.md), with Debian's cross compilers:
#   make cross        build/cross/{x86_64,aarch64,armhf}/taskmem
# (the foreign ones are run under qemu-user by `make -C probes cross-test`, with rtprobe's).

CROSS_ARCHES       = x86_64 aarch64 armhf
CROSS_PREFIX_x86_64  = x86_64-linux-gnu-
CROSS_PREFIX_aarch64 = aarch64-linux-gnu-
CROSS_PREFIX_armhf   = arm-linux-gnueabihf-

.PHONY: cross $(addprefix cross-,$(CROSS_ARCHES))

cross: $(addprefix cross-,$(CROSS_ARCHES))

$(addprefix cross-,$(CROSS_ARCHES)): cross-%:
	$(MAKE) --no-print-directory BUILD=$(BUILD)/cross/$* CC=$(CROSS_PREFIX_$*)gcc CXX=$(CROSS_PREFIX_$*)g++ \
	  OPT="-O2 -static" $(BUILD)/cross/$*/taskmem
