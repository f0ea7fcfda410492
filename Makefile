# cmsafe: `make test` and `make demo` install what they need (scripts/setup-deps), build,
# and run on a real RDMA stack in a Soft-RoCE guest (scripts/rxe-vm). `make check` is the
# host-only part of `make test`, `make help` lists the targets: each target a user or a maintainer
# runs has a `## GROUP: text` comment on its rule line, which `make help` prints (GROUP: use, test,
# bench or dev). The rules are in mk/, a file per topic (mk/README.md); this file holds what
# every topic uses, the suite's parts and the targets a user starts from.

CARGO   ?= cargo
CC      ?= cc
CXX     ?= g++
PROFILE := release
LIBOUT  := $(CURDIR)/target/$(PROFILE)
CTESTS  := target/c-tests
# The setup the API tests and the raw librdmacm programs share (c-tests/README.md).
RXE_SETUP := c-tests/rxe_setup.c c-tests/rxe_setup.h
BENCH   := target/bench
RXE_VM  := scripts/rxe-vm
# The guests' RDMA transport for make demo and make pair-test: roce (Soft-RoCE) or iwarp
# (Soft-iWARP).
TRANSPORT ?= roce

SAN_FLAGS   := -fsanitize=address,undefined -fno-omit-frame-pointer
CTEST_FLAGS := -std=c11 -Wall -Wextra -Wpedantic -Werror -g -O1 -Iinclude -Ic-tests
CTEST_LIBS  := -L$(LIBOUT) -Wl,-rpath,$(LIBOUT) -lcmsafe -lrdmacm -libverbs -lpthread -ldl
# What the C tests are built after: the library in this tree (make build). scripts/deb-test
# builds them against the installed packages instead (pkg-config, no -Iinclude, no rpath), with
# CTEST_BUILD empty, CTEST_FLAGS and CTEST_LIBS its own.
CTEST_BUILD ?= build

# Version and SONAME from Cargo.toml, by the rule's one place, scripts/soname (build.rs links the
# library with the same name). The file installed is libcmsafe.so.VERSION.
cmsafe_soname   := $(shell scripts/soname)
CMSAFE_VERSION  := $(word 1,$(cmsafe_soname))
CMSAFE_SONAME   := $(word 2,$(cmsafe_soname))
CMSAFE_REALNAME := libcmsafe.so.$(CMSAFE_VERSION)

# The topics, in an order where each file's prerequisites name only variables defined above it
# (make expands a rule's prerequisites as it reads the rule).
MK_TOPICS := rust tools host-tests lint c-tests preload storm bench stacks arm64 install packages
MAKEFILES_READ := $(firstword $(MAKEFILE_LIST)) $(MK_TOPICS:%=mk/%.mk)
.DEFAULT_GOAL := all
include $(MK_TOPICS:%=mk/%.mk)

.PHONY: all help deps build-deps build preload check test demo clean

all: build preload ## use: the library and the preload (make build preload)

# The targets with a `## GROUP: text` comment on their rule line, by group, in the order of the
# Makefile and then of mk/'s files as included.
help: ## use: this list
	@awk -F ':[^#]*## ' '/^[a-zA-Z0-9_-]+:[^=#]*## [a-z]+: / { \
	    g = $$2; sub(/:.*/, "", g); d = $$2; sub(/^[a-z]+: /, "", d); \
	    line[g] = line[g] sprintf("  %-22s %s\n", $$1, d) } \
	  END { \
	    title["use"] = "To build, install and try cmsafe"; \
	    title["test"] = "The parts of make test, each alone"; \
	    title["bench"] = "make bench and its parts (bench/README.md)"; \
	    title["dev"] = "Maintaining the tree"; \
	    print "make TARGET (each installs what it needs on Debian 12: scripts/setup-deps)"; \
	    n = split("use test bench dev", gs, " "); \
	    for (i = 1; i <= n; i++) if (line[gs[i]] != "") printf "\n%s:\n%s", title[gs[i]], line[gs[i]] }' \
	  $(MAKEFILES_READ)

# What the tests, the demo and the benchmarks need: the build's packages and the rest (the guests,
# the real programs, the tools); build-deps: what building needs and no more (a compiler,
# pkg-config, librdmacm-dev, libibverbs-dev). Rust comes from rustup. DEPS_FLAGS: setup-deps'
# options (--arm64 for the cross build's own packages instead).
DEPS_FLAGS ?=
deps: ## dev: install every package the tests and benchmarks need (scripts/setup-deps)
	@scripts/setup-deps $(DEPS_FLAGS)

build-deps: ## dev: install only what building needs (scripts/setup-deps --build)
	@scripts/setup-deps --build $(DEPS_FLAGS)

# Programs linked against target/release load the library by its SONAME: build links it there.
build: build-deps $(LIBOUT)/$(CMSAFE_SONAME) ## use: target/release/libcmsafe.so (cargo build --release)
	$(CARGO) build --$(PROFILE) --locked

$(LIBOUT)/$(CMSAFE_SONAME):
	@mkdir -p $(LIBOUT)
	ln -sfn libcmsafe.so $@

# The LD_PRELOAD library: the core without its C ABI, so it exports only the interposed names.
preload: build-deps ## use: target/release/libcmsafe_preload.so, the LD_PRELOAD library
	$(CARGO) build --$(PROFILE) --locked -p cmsafe-preload

# The host-only part of `make test`, no guest and nothing installed beyond what `make build`
# installs but the timeline fuzzer's Hypothesis, pinned, into a virtualenv under target/, the
# fuzz targets' tools (fuzz-check: Rust's nightly toolchain, cargo-fuzz under target/), and
# Coccinelle (lint-check: scripts/setup-deps --lint), nightly's Miri (miri): about three minutes
# once target/ is built, about 25 s of it the fuzz targets' bounded runs and 65 s Miri's.
check: makefile-check fmt-check clippy cargo-test header-check abi-check lists-check timeline-check timeline-fuzz audit-check harness-check host-check fuzz-check lint-check miri ## use: host only: fmt, clippy, cargo test, header drift, ABI, lists, timeline, launcher, harness, host tests, fuzzing, lint rules, Miri
	@echo "make check: all passed"

# make test, planned and not run (make -n): every file a part needs has a rule. Make expands a
# rule's prerequisites when it reads the rule, so a variable defined further down is still
# empty there and names a file nobody builds; the whole suite would meet it only when its turn
# came, after half an hour in the guests.
.PHONY: makefile-check
makefile-check: ## test: a dry run of make test finds a rule for everything it needs
	@$(MAKE) --no-print-directory -n $(filter-out makefile-check,$(TEST_PARTS)) >/dev/null

# The whole suite, in this order (about an hour on 2 cores, most of it in the guests).
TEST_PARTS := deps makefile-check fmt-check clippy cargo-test msrv loom header-check guest-test \
      abi-check lists-check timeline-check timeline-fuzz audit-check harness-check host-check lint-check workspace-check header-compile-check man-check version-check install-check migrate-test storm-test \
      preload-test usdt-test services-test soak-test insn-test copy-insn-test pair-test \
      stacks-test deb-test iwarp-test
test: MIGRATE_SOURCES := optional
test: $(TEST_PARTS) ## use: the whole suite, on a real stack in guests (CI runs it)
	@echo "make test: all passed"

# TRANSPORT=iwarp runs it on Soft-iWARP (siw0) instead of Soft-RoCE (scripts/rxe-vm --help).
demo: deps $(C_TEST_BINS) $(EXAMPLE_BINS) ## use: boot a Soft-RoCE guest and show the main job
	$(RXE_VM) --transport $(TRANSPORT) -- scripts/demo-in-guest

clean: ## use: cargo clean (target/)
	$(CARGO) clean

