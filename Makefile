# rtscope: `make demo` runs a short experiment here; `make check` the fast tier (minutes); `make test` every test suite.
# Both set everything up on a fresh machine: Debian packages (as root), a virtualenv, the probes.

PYTHON ?= python3
VENV   ?= .venv
BIN    := $(VENV)/bin
# Compiling runs in parallel; so do the tests, two at a time, but those marked `alone` (docs/testing.md).
NPROC  := $(shell nproc 2>/dev/null || echo 2)
JOBS    = $(if $(filter -j%,$(MAKEFLAGS)),,-j$(NPROC))# none under a parallel make: its sub-makes share its jobs
STAMP  := $(VENV)/.installed

# An environment that says not to write byte code (PYTHONDONTWRITEBYTECODE) would have every Python process
# compile each module it imports again: 0.5-1.5 s a command here, and the suite starts hundreds of them. What
# make runs writes it (into .venv and the ignored __pycache__ directories), once.
unexport PYTHONDONTWRITEBYTECODE

.PHONY: all setup setup-quietly system-deps venv probes cross beam cbtask dist demo check test test-python test-probes test-cross test-beam test-cbtask check-specs check-imports bench clean

all: setup

setup: system-deps venv probes cbtask cross beam

system-deps:
	@bash scripts/system-deps.sh

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip
	$(BIN)/pip install -q --no-compile -e '.[test]'  # modules compile as they are first imported
	@touch $@

venv: $(STAMP)

probes:
	$(MAKE) $(JOBS) -C probes

# Static rtprobe and taskmem for x86_64, aarch64, armhf: what rtscope deploys to targets (docs/targets.md).
cross: probes cbtask
	$(MAKE) $(JOBS) -C probes cross
	$(MAKE) $(JOBS) -C cbtask cross

beam:
	@if command -v mix >/dev/null 2>&1 && [ -f beam/mix.exs ]; then \
	  cd beam && MIX_ENV=prod mix compile >/dev/null; \
	else echo "rtscope: Elixir not installed: BEAM runtime unavailable (sudo apt-get install -y elixir erlang-dev)"; fi

cbtask:
	@if [ -f cbtask/Makefile ]; then $(MAKE) $(JOBS) -C cbtask; fi

# One wheel for x86_64, aarch64 and armhf Linux hosts, and its sdist (docs/install.md): the static probes of
# `make cross`, the compiled BEAM harness, the specs; setup.py's hook refuses a missing or non-static probe.
dist: setup
	rm -rf dist
	$(BIN)/python -m build --outdir dist .
	@ls -l dist

# `make demo` says what it builds, a line a step, and keeps the compilers' output in $(BUILD_LOG): a failed
# step shows its errors and names the log. The Debian packages' check speaks for itself.
BUILD_LOG := build.log

define build_step
	@printf 'building %s ... ' "$(2)"; \
	if $(MAKE) --no-print-directory $(1) >> $(BUILD_LOG) 2>&1 </dev/null; then echo done; \
	else echo failed; grep -E -i -m 20 'error|fatal|no rule' $(BUILD_LOG) || tail -n 20 $(BUILD_LOG); \
	  echo "the whole build output is in $(BUILD_LOG)"; exit 1; fi
endef

setup-quietly: system-deps
	@: > $(BUILD_LOG)
	$(call build_step,venv,the Python virtualenv .venv)
	$(call build_step,probes,the C probe rtprobe)
	$(call build_step,cbtask,the C++ callback-task runtime)
	$(call build_step,cross,static probes for x86_64 aarch64 armhf)
	$(call build_step,beam,the BEAM harness)
	@grep '^rtscope:' $(BUILD_LOG) || true
	@echo "(the build's output is in $(BUILD_LOG))"

demo: setup-quietly
	$(BIN)/rtscope demo

# The fast tier (docs/testing.md): Python and the built probes only, no root, tracefs, QEMU, sshd, PostgreSQL,
# Erlang VM or browser; at most 3 minutes here. `make test` runs it too, with the real tier.
check: system-deps venv probes check-specs check-imports
	$(BIN)/python -m pytest -q -rs -m fast -n 2 --durations=10

# The builds two at a time, then the C, C++ and cross suites, the specs and the import contracts two at a time (each
# one's output kept together), then the ExUnit suite (its explain tests time out beside a loaded CPU) and the Python
# tests' two phases.
test:
	@$(MAKE) --no-print-directory system-deps
	@$(MAKE) -j$(NPROC) --output-sync=target --no-print-directory venv probes cbtask cross beam
	@$(MAKE) -j$(NPROC) --output-sync=target --no-print-directory test-probes test-cbtask test-cross check-specs \
	  check-imports
	@$(MAKE) --no-print-directory test-beam
	@$(MAKE) --no-print-directory test-python

# Two phases (docs/testing.md): every test but the `alone` ones, two at a time (pytest-xdist, a file's tests in one
# process, its module fixtures made once); then the `alone` ones one after the other, with nothing beside them:
# they judge real timing, load every CPU, or read or change what the whole machine shares.
# A failure in the first phase fails the target after the second has run too. The first phase starts its files the
# longest first (--no-loadscope-reorder keeps tests/ordering.py's order; xdist's own puts the files with most tests first).
test-python: setup
	status=0; \
	$(BIN)/python -m pytest -q -rs -m "not alone" -n 2 --dist loadfile --no-loadscope-reorder --durations=20 \
	  || status=$$?; \
	$(BIN)/python -m pytest -q -rs -m alone -p no:xdist --durations=20 || status=$$?; \
	exit $$status

# Every shipped spec must validate (runs this machine cannot make are skipped by the specs themselves).
check-specs: venv probes
	@ls specs/*.toml | xargs -P $(NPROC) -I{} sh -c '$(BIN)/rtscope check {} >/dev/null || $(BIN)/rtscope check {}'
	@echo "specs: all valid"

# The layers of docs/architecture.md: no module imports a layer above its own (contract in pyproject.toml).
check-imports: venv
	$(BIN)/lint-imports

test-probes:
	$(MAKE) $(JOBS) -C probes test-build
	$(MAKE) -C probes test

test-cross: cross
	$(MAKE) -C probes cross-test

test-cbtask:
	@if [ -f cbtask/Makefile ]; then $(MAKE) $(JOBS) -C cbtask test-build && $(MAKE) -C cbtask test; fi

test-beam:
	@if [ -f beam/mix.exs ]; then cd beam && MIX_ENV=test mix test; fi

bench: setup
	@for b in bench/*.sh; do echo "== $$b"; bash $$b || exit 1; done
	@for b in bench/*.py; do [ -f "$$b" ] || continue; echo "== $$b"; $(BIN)/python $$b || exit 1; done

clean:
	$(MAKE) -C probes clean
	@if [ -f cbtask/Makefile ]; then $(MAKE) -C cbtask clean; fi
	rm -rf $(VENV) beam/_build
