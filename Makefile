# cmsafe: `make test` and `make demo` install what they need (scripts/setup-deps), build,
# and run on a real RDMA stack in a Soft-RoCE guest (scripts/rxe-vm). `make check` is the
# host-only part of `make test`, `make help` lists the targets: each target a user or a maintainer
# runs has a `## GROUP: text` comment on its rule line, which `make help` prints (GROUP: use, test,
# bench or dev).

CARGO   ?= cargo
CC      ?= cc
PROFILE := release
LIBOUT  := $(CURDIR)/target/$(PROFILE)
CTESTS  := target/c-tests
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

C_TEST_PROGRAMS := test_private_data test_ack_happened seed_incident \
                   test_event_types test_pdata_lengths test_event_order test_many_clients \
                   test_threads test_threads_tsan test_shared_event test_shared_event_tsan \
                   test_fetch_modes test_alloc_failure test_misuse test_logging test_new_events \
                   test_new_events_plain test_flight
C_TEST_BINS     := $(addprefix $(CTESTS)/,$(C_TEST_PROGRAMS))
EXAMPLE_BINS    := $(CTESTS)/token_server $(CTESTS)/token_client

.PHONY: all help deps build-deps build preload header header-check fmt-check clippy cargo-test \
        c-tests guest-test check test demo clean

all: build preload ## use: the library and the preload (make build preload)

# The targets with a `## GROUP: text` comment on their rule line, by group, in the Makefile's order.
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
	  $(firstword $(MAKEFILE_LIST))

# What the tests, the demo and the benchmarks need: the build's packages and the rest (the guests,
# the real programs, the tools); build-deps: what building needs and no more (a compiler,
# pkg-config, librdmacm-dev, libibverbs-dev). Rust comes from rustup. DEPS_FLAGS: setup-deps'
# options (--arm64 for the cross build's own packages instead).
DEPS_FLAGS ?=
deps: ## dev: install every package the tests and benchmarks need (scripts/setup-deps)
	@scripts/setup-deps $(DEPS_FLAGS)

build-deps: ## dev: install only what building needs (scripts/setup-deps --build)
	@scripts/setup-deps --build $(DEPS_FLAGS)

build: build-deps ## use: target/release/libcmsafe.so (cargo build --release)
	$(CARGO) build --$(PROFILE) --locked

# The LD_PRELOAD library: the core without its C ABI, so it exports only the interposed names.
preload: build-deps ## use: target/release/libcmsafe_preload.so, the LD_PRELOAD library
	$(CARGO) build --$(PROFILE) --locked -p cmsafe-preload

header: ## dev: regenerate include/cmsafe.h with cbindgen
	$(CARGO) run -q -p gen-header --locked

header-check: ## test: include/cmsafe.h against a fresh cbindgen run (header drift)
	$(CARGO) run -q -p gen-header --locked -- --check

fmt-check: ## test: cargo fmt --check, the whole workspace and the fuzz crate
	$(CARGO) fmt --all -- --check
	$(CARGO) fmt --manifest-path fuzz/Cargo.toml -- --check

clippy: build-deps ## test: cargo clippy -D warnings, the whole workspace, every target
	$(CARGO) clippy --workspace --all-targets --locked -- -D warnings

cargo-test: build-deps ## test: cargo test on the host (the real-stack tests run in the guest)
	$(CARGO) test --workspace --locked

# The host-only part of `make test`, no guest and nothing installed beyond what `make build`
# installs but the timeline fuzzer's Hypothesis, pinned, into a virtualenv under target/, the
# fuzz targets' tools (fuzz-check: Rust's nightly toolchain, cargo-fuzz under target/), and
# Coccinelle (lint-check: scripts/setup-deps --lint): under two minutes once target/ is built,
# about 25 s of it the fuzz targets' bounded runs.
check: makefile-check fmt-check clippy cargo-test header-check abi-check lists-check timeline-check timeline-fuzz audit-check harness-check host-check fuzz-check lint-check ## use: host only: fmt, clippy, cargo test, header drift, ABI, lists, timeline, launcher, harness, host tests, fuzzing, lint rules
	@echo "make check: all passed"

# make test, planned and not run (make -n): every file a part needs has a rule. Make expands a
# rule's prerequisites when it reads the rule, so a variable defined further down is still
# empty there and names a file nobody builds; the whole suite would meet it only when its turn
# came, after half an hour in the guests.
.PHONY: makefile-check
makefile-check: ## test: a dry run of make test finds a rule for everything it needs
	@$(MAKE) --no-print-directory -n $(filter-out makefile-check,$(TEST_PARTS)) >/dev/null

# The timeline converter (bin/cmsafe-timeline, docs/preload.md "Timeline"): its unit tests on the
# small reports under tests/timeline/data, then its output on the committed real run's reports
# (rping and ucmatose in the Soft-RoCE guest) and on a storm's checked by its own --check, and the
# pictures in the docs (docs/img) held to what the converter draws now: the same reports give
# the same bytes, so a difference is a drawing changed without its picture (make
# timeline-picture), and each parsed as XML. Python's standard library only, no guest: a few
# seconds.
.PHONY: timeline-check timeline-picture
TIMELINE_REAL := $(wildcard tests/timeline/data/real/*.json)
# The docs' picture: the real run's ucmatose client and server (4 connections), from the client's
# first event to its last destroy (the server's report begins 3.5 s earlier, with a destroy).
TIMELINE_PICTURE := docs/img/timeline-real.svg
TIMELINE_PICTURE_ARGS := --svg-window 3535000:3910000 \
  tests/timeline/data/real/ucmatose-client-197.json tests/timeline/data/real/ucmatose-server-193.json
# A storm's: the legacy storm server's report of one wave of 100 connections under the safe-mode
# preload (make storm-picture records it, with the picture).
TIMELINE_STORM := $(wildcard tests/timeline/data/storm/*.json)
TIMELINE_STORM_PICTURE := docs/img/timeline-storm.svg
timeline-check: build-deps ## test: the timeline converter's unit tests and its output on a real run's reports
	python3 -m py_compile bin/cmsafe-timeline
	@rm -rf bin/__pycache__
	PYTHONDONTWRITEBYTECODE=1 python3 -m unittest discover -s tests/timeline
	@mkdir -p target
	bin/cmsafe-timeline -o target/timeline-real.json $(TIMELINE_REAL)
	bin/cmsafe-timeline --check target/timeline-real.json $(TIMELINE_REAL)
	bin/cmsafe-timeline --svg target/timeline-real.svg $(TIMELINE_PICTURE_ARGS)
	@cmp -s target/timeline-real.svg $(TIMELINE_PICTURE) || { echo "$(TIMELINE_PICTURE) is not \
	  what bin/cmsafe-timeline draws now: make timeline-picture" >&2; exit 1; }
	bin/cmsafe-timeline -o target/timeline-storm.json $(TIMELINE_STORM)
	bin/cmsafe-timeline --check target/timeline-storm.json $(TIMELINE_STORM)
	bin/cmsafe-timeline --svg target/timeline-storm.svg $(TIMELINE_STORM)
	@cmp -s target/timeline-storm.svg $(TIMELINE_STORM_PICTURE) || { echo \
	  "$(TIMELINE_STORM_PICTURE) is not what bin/cmsafe-timeline draws now: make timeline-picture" \
	  >&2; exit 1; }
	python3 -c 'import sys, xml.etree.ElementTree as ET; [ET.parse(p) for p in sys.argv[1:]]' \
	  target/timeline-real.svg target/timeline-storm.svg

# The converter fuzzed (tests/timeline/fuzz_timeline.py: any bytes, mutated reports, mutated
# timelines to --check): a timeline or one line of error, never a traceback. Hypothesis comes
# from PyPI, pinned with its hashes (tests/timeline/fuzz-requirements.txt), into a virtualenv of
# its own under target/, made once (python3-venv: scripts/setup-deps --build). timeline-fuzz, in
# make check: a fixed number of examples from a fixed seed, about 5 seconds; fuzz-timeline: as
# many as FUZZ_EXAMPLES each, at random, what fails kept in target/fuzz-timeline-db and tried
# first the next time. Each failure found becomes a test in tests/timeline/test_hostile.py.
.PHONY: timeline-fuzz fuzz-timeline
FUZZ_VENV     := target/fuzz-venv
FUZZ_EXAMPLES ?= 20000
FUZZ_RUN      := PYTHONDONTWRITEBYTECODE=1 $(FUZZ_VENV)/bin/python -m unittest discover \
  -s tests/timeline -p 'fuzz_*.py'
$(FUZZ_VENV)/installed: tests/timeline/fuzz-requirements.txt | build-deps
	rm -rf $(FUZZ_VENV)
	python3 -m venv $(FUZZ_VENV)
	$(FUZZ_VENV)/bin/pip install -q --disable-pip-version-check --require-hashes \
	  --only-binary :all: -r tests/timeline/fuzz-requirements.txt
	touch $@

timeline-fuzz: $(FUZZ_VENV)/installed ## test: the timeline converter fuzzed, briefly, from a fixed seed
	$(FUZZ_RUN)

fuzz-timeline: $(FUZZ_VENV)/installed ## dev: the timeline converter fuzzed at length (FUZZ_EXAMPLES each)
	CMSAFE_FUZZ=long CMSAFE_FUZZ_EXAMPLES=$(FUZZ_EXAMPLES) $(FUZZ_RUN)

# cmsafe-audit, the launcher (tests/audit): its bash part's syntax (the file is also Python's),
# its options, the environment it gives the program, the reports it converts, and the signals:
# the program's dispositions and mask exactly those of a run without it, a signal to the
# launcher passed on once. A stand-in preload built with cc and stand-in programs: no RDMA, no
# guest; about 15 seconds.
.PHONY: audit-check
audit-check: build-deps ## test: cmsafe-audit's options, environment, reports and signals
	bash -n bin/cmsafe-audit
	python3 -m py_compile bin/cmsafe-audit
	@rm -rf bin/__pycache__
	PYTHONDONTWRITEBYTECODE=1 python3 -m unittest discover -s tests/audit

timeline-picture: ## dev: redraw the docs' pictures (docs/img) from the committed reports
	bin/cmsafe-timeline --svg $(TIMELINE_PICTURE) $(TIMELINE_PICTURE_ARGS)
	bin/cmsafe-timeline --svg $(TIMELINE_STORM_PICTURE) $(TIMELINE_STORM)

# The guest harnesses' package (tests/harness/cmsafe_harness): its checks held to logs recorded
# on the real stack, and its processes' supervision, on the host. Python's standard library only
# (3.9 and newer: every stack root runs it), no guest: a few seconds.
.PHONY: harness-check
harness-check: build-deps ## test: the guest harnesses' checks on recorded logs, on the host
	PYTHONDONTWRITEBYTECODE=1 python3 -m unittest discover -s tests/harness -t tests/harness

# The fuzz targets (fuzz/; docs/testing.md, "Fuzzing"): what the libraries read from outside
# the program's control (an event's contents, its addresses, the settings, a report's path),
# under libFuzzer with AddressSanitizer and overflow checks. scripts/fuzz installs what it lacks:
# Rust's nightly toolchain (rustup) and cargo-fuzz (into target/tools). fuzz-check: clippy on the
# fuzz crate, every input kept in fuzz/regressions and fuzz/seeds run once, then each target for
# a bounded number of runs from a fixed seed: about 25 s once built. fuzz: each target for
# FUZZ_TIME seconds, its corpus kept and grown in target/fuzz/corpus.
.PHONY: fuzz-check fuzz
FUZZ_TIME ?= 300
fuzz-check: build-deps ## test: the fuzz targets' kept inputs, then a short bounded run of each
	scripts/fuzz --check

fuzz: build-deps ## dev: each fuzz target for FUZZ_TIME seconds (300), before resolving an issue
	scripts/fuzz --time $(FUZZ_TIME)

# The preload's host tests (docs/testing.md, "Host tests of the preload"): programs run raw and
# under the preload in audit and safe mode on a stand-in librdmacm (tests/host/standin: built as
# librdmacm.so.1, librdmacm's calls at RDMACM_1.0, events queued by the program itself), for the
# paths a real stack cannot produce on demand: signals, exit, fork, the report file, setuid.
# Python's standard library runs them, each with a deadline: a few seconds, no guest.
HOST_TESTS    := target/host-tests
HOST_LIB      := $(CURDIR)/$(HOST_TESTS)/lib
HOST_CFLAGS   := -std=c11 -Wall -Wextra -Wpedantic -Werror -g -O1 -Itests/host/standin -Iinclude
HOST_PROGRAMS := $(addprefix $(HOST_TESTS)/bin/,events signals exit report plugin cut)
# The plugin, under a name that merely contains "librdmacm" and under one that does not.
HOST_PLUGINS  := $(addprefix $(HOST_LIB)/,libmy-librdmacm-helper.so libmy-helper.so)
# The setuid programs, compiled here and linked by the tests in a directory of their own, with
# copies of the libraries: a setuid program's loader takes no LD_PRELOAD path and no $$ORIGIN.
HOST_OBJECTS  := $(addprefix $(HOST_TESTS)/obj/,secure.o secure_api.o)
HOST_STANDIN  := $(HOST_LIB)/librdmacm.so.1
# The programs of libcmsafe's own API, linked against the release build of it too (scale: the
# benchmark of cost as live ids grow, raw, under the preload and on the API).
HOST_API      := $(addprefix $(HOST_TESTS)/bin/,api_abort scale)

$(HOST_STANDIN): tests/host/standin/rdmacm.c tests/host/standin/standin.h tests/host/standin/rdmacm.map
	@mkdir -p $(HOST_LIB)
	$(CC) $(HOST_CFLAGS) -fPIC -shared -Wl,-soname,librdmacm.so.1 \
	  -Wl,--version-script=tests/host/standin/rdmacm.map -o $@ $< -lpthread

$(HOST_TESTS)/bin/%: tests/host/programs/%.c tests/host/programs/host.h $(HOST_STANDIN)
	@mkdir -p $(HOST_TESTS)/bin
	$(CC) $(HOST_CFLAGS) -o $@ $< $(HOST_STANDIN) -Wl,-rpath,$(HOST_LIB) -ldl

$(HOST_API): $(HOST_TESTS)/bin/%: tests/host/programs/%.c tests/host/programs/host.h include/cmsafe.h $(HOST_STANDIN) | build
	@mkdir -p $(HOST_TESTS)/bin
	$(CC) $(HOST_CFLAGS) -o $@ $< $(CURDIR)/target/release/libcmsafe.so $(HOST_STANDIN) \
	  -Wl,-rpath,$(HOST_LIB):$(CURDIR)/target/release

$(HOST_PLUGINS): tests/host/programs/helper_plugin.c $(HOST_STANDIN)
	$(CC) $(HOST_CFLAGS) -fPIC -shared -o $@ $< $(HOST_STANDIN) -Wl,-rpath,$(HOST_LIB)

$(HOST_TESTS)/obj/%.o: tests/host/programs/%.c tests/host/programs/host.h tests/host/standin/standin.h include/cmsafe.h
	@mkdir -p $(HOST_TESTS)/obj
	$(CC) $(HOST_CFLAGS) -c -o $@ $<

.PHONY: host-tests host-check
host-tests: $(HOST_STANDIN) $(HOST_PROGRAMS) $(HOST_API) $(HOST_PLUGINS) $(HOST_OBJECTS) ## dev: build the stand-in librdmacm and the host tests' programs (target/host-tests)

host-check: build preload host-tests ## test: the preload's host tests on a stand-in librdmacm: signals, exit, fork, report file, setuid
	PYTHONDONTWRITEBYTECODE=1 python3 -m unittest discover -s tests/host -t tests/host

# cmsafe-lint and cmsafe-migrate (tools/lint, docs/lint.md): static checks of the event
# lifecycle as Coccinelle semantic patches, and the port of raw librdmacm code onto the API.
# lint-check (in make check): the rules on their cases (tools/lint/tests/cases), the recall set
# (every misuse program of c-tests/ at its line), the commands' output and statuses, installed
# too; spatch on the host, no guest, about 20 s of CPU. lint-field: the same on others' code
# (Debian 12's sources, fetched under target/lint-field by tools/lint/field/fetch-sources),
# every finding matched with a person's verdict (tools/lint/field/verdicts.txt), written to
# bench/results/lint.md; a finding nobody read fails it. migrate-test (in make test): the ports
# of rdma-core's examples built against the installed library and run in one guest.
.PHONY: lint-deps lint-check lint-field migrate-test
lint-deps: ## dev: install what cmsafe-lint runs on (scripts/setup-deps --build --lint)
	@scripts/setup-deps --build --lint

lint-check: lint-deps ## test: cmsafe-lint's rules, the c-tests recall set and its command line
	PYTHONDONTWRITEBYTECODE=1 python3 -m unittest discover -s tools/lint/tests

lint-field: lint-deps ## bench: cmsafe-lint on Debian's sources of RDMA programs: bench/results/lint.md
	@mkdir -p bench/results
	tools/lint/field/fetch-sources target/lint-field/src
	PYTHONDONTWRITEBYTECODE=1 python3 tools/lint/field/field.py --src target/lint-field/src \
	  --verdicts tools/lint/field/verdicts.txt --out bench/results/lint.md

migrate-test: deps lint-deps build preload ## test: cmsafe-migrate's ports of rdma-core's examples, installed, on the real stack
	tools/lint/migrate/migrate-test

$(CTESTS)/%: c-tests/%.c c-tests/cm_util.c c-tests/cm_util.h c-tests/transport.h c-tests/harness.h include/cmsafe.h $(CTEST_BUILD)
	@mkdir -p $(CTESTS)
	$(CC) $(CTEST_FLAGS) $(SAN_FLAGS) -o $@ $< c-tests/cm_util.c $(CTEST_LIBS)

# The same test built with ThreadSanitizer instead (ASan and TSan do not mix): NAME_tsan.
$(CTESTS)/%_tsan: c-tests/%.c c-tests/cm_util.c c-tests/cm_util.h c-tests/transport.h c-tests/harness.h include/cmsafe.h $(CTEST_BUILD)
	@mkdir -p $(CTESTS)
	$(CC) $(CTEST_FLAGS) -fsanitize=thread -fno-omit-frame-pointer -o $@ $< c-tests/cm_util.c $(CTEST_LIBS)

# The seed incident's raw server, unchanged, rebuilt with cmsafe_compat.h: safe mode from source.
# Without sanitizers, for the runs under the preload (AddressSanitizer must come first in the
# library list, and LD_PRELOAD would come before it): c-tests/new-events.
$(CTESTS)/test_new_events_plain: c-tests/test_new_events.c c-tests/cm_util.c c-tests/cm_util.h \
    c-tests/transport.h \
    c-tests/harness.h include/cmsafe.h $(CTEST_BUILD)
	@mkdir -p $(CTESTS)
	$(CC) $(CTEST_FLAGS) -o $@ $< c-tests/cm_util.c $(CTEST_LIBS)

$(CTESTS)/seed_incident_compat: c-tests/seed_incident.c $(CTESTS)/cm_util.o include/cmsafe_compat.h $(CTEST_BUILD)
	$(CC) $(CTEST_FLAGS) $(SAN_FLAGS) -include cmsafe_compat.h -o $@ c-tests/seed_incident.c \
	  $(CTESTS)/cm_util.o $(CTEST_LIBS)

$(CTESTS)/cm_util.o: c-tests/cm_util.c c-tests/cm_util.h c-tests/transport.h c-tests/harness.h include/cmsafe.h
	@mkdir -p $(CTESTS)
	$(CC) $(CTEST_FLAGS) $(SAN_FLAGS) -c -o $@ c-tests/cm_util.c

$(CTESTS)/%: examples/%.c include/cmsafe.h $(CTEST_BUILD)
	@mkdir -p $(CTESTS)
	$(CC) $(CTEST_FLAGS) -o $@ $< $(CTEST_LIBS)

# The Rust API's real-stack tests, built here and run in the guest (cargo itself stays outside).
$(CTESTS)/real_stack: build
	@mkdir -p $(CTESTS)
	exe=$$($(CARGO) test --$(PROFILE) --locked --test real_stack --no-run --message-format=json \
	  | grep -o '"executable":"[^"]*"' | tail -n1 | cut -d'"' -f4) && cp "$$exe" $@

c-tests: $(C_TEST_BINS) $(CTESTS)/real_stack $(CTESTS)/seed_incident_compat ## dev: build the C and C++ tests (target/c-tests)

# The C and C++ tests without the Rust API's (cargo's): what scripts/deb-test builds against the
# installed packages.
.PHONY: c-tests-c
c-tests-c: $(C_TEST_BINS) $(CTESTS)/seed_incident_compat $(CTESTS)/cpp_events

guest-test: deps c-tests ## test: the C and C++ tests in the Soft-RoCE guest, under the sanitizers
	$(RXE_VM) -- c-tests/run-in-guest

# The iWARP slice of make test, in one guest: the same C tests and the preload's misuse programs
# (raw, audit, safe: 127 checks, 3 apart; docs/stacks.md, "The preload's misuse suite on iWARP")
# on Soft-iWARP (siw0, built for the guest's kernel on the first run and cached under target/;
# scripts/rxe-vm --help). iwarp-misuse-test runs the misuse programs alone.
.PHONY: iwarp-test iwarp-misuse-test
iwarp-test: deps c-tests preload preload-tests ## test: the C tests and the CM misuse programs again on Soft-iWARP
	$(RXE_VM) --transport iwarp -- sh -c 'c-tests/run-in-guest; a=$$?; \
	  PRELOAD_MISUSE_ONLY=cm scripts/preload-misuse-tests; b=$$?; [ $$a -eq 0 ] && [ $$b -eq 0 ]'

iwarp-misuse-test: deps preload preload-tests ## test: the misuse programs alone on Soft-iWARP
	$(RXE_VM) --transport iwarp -- scripts/preload-misuse-tests

# Other stacks (issue 30): the suite on every Debian suite we run on (scripts/stacks), each in its
# own root (scripts/stack-root) and guest (scripts/rxe-vm --stack): the installed build checked
# with pkg-config, the C tests, the preload's misuse tests, the real programs, the demo and a
# short storm, and the table stack by part in bench/results/stacks.md (written only by a run of
# every stack and part). STACKS and PARTS choose a slice, whose table is printed:
# `make stacks STACKS="bullseye sid" PARTS="c-tests misuse"`. bookworm runs the host's own
# build (built first); bookworm/iwarp is bookworm on Soft-iWARP (the table's transport column);
# arm64 the cross build (make cross-arm64, built first) on the arm64 guest (scripts/rxe-vm --arch
# arm64). The first run of a stack builds its root (docs/testing.md, "Other stacks").
# `make stacks-smoke` is the short slice: the oldest and the newest stack, install, C tests and
# misuse tests; it prints the table without writing bench/results/stacks.md.
# In `make test`: the oldest and the newest stack we run on (bullseye: Linux 5.10, rdma-core
# 33.2, glibc 2.31; sid: Linux 7.x, rdma-core 65, glibc 2.43), each built from source in its
# root: the installed build, the C tests and rdma-core 60's event types. A cold machine builds
# both roots first (about 10 minutes; docs/testing.md, "Other stacks").
TEST_STACKS ?= bullseye sid
TEST_STACK_PARTS ?= install c-tests new-events
.PHONY: stacks-test
stacks-test: deps ## test: the oldest and the newest Debian stack (bullseye, sid)
	scripts/stacks --stacks "$(TEST_STACKS)" --parts "$(TEST_STACK_PARTS)"

.PHONY: stacks stacks-smoke stacks-host-bins
STACKS ?= bullseye bookworm bookworm/iwarp trixie sid arm64
PARTS ?= install c-tests new-events misuse real demo storm packages
SMOKE_STACKS ?= bullseye sid
SMOKE_PARTS ?= install c-tests new-events misuse
stacks-host-bins: build preload preload-tests c-tests storm-bins $(EXAMPLE_BINS) ## dev: what the bookworm rows of make stacks run
stacks_all := bullseye bookworm bookworm/iwarp trixie sid arm64
parts_all := install c-tests new-events misuse real demo storm packages
stacks_builds = $(if $(filter bookworm bookworm/iwarp,$(1)),stacks-host-bins) $(if $(filter arm64,$(1)),cross-arm64)
stacks: deps $(call stacks_builds,$(STACKS)) ## dev: the suite on the Debian stacks, iWARP, arm64; STACKS, PARTS
	@out=; if [ "$(strip $(STACKS))" = "$(stacks_all)" ] && { [ "$(strip $(PARTS))" = "$(parts_all)" ] || \
	    [ "$(strip $(PARTS))" = packages ]; }; then \
	  out="--out bench/results/stacks.md"; fi; \
	scripts/stacks --stacks "$(STACKS)" --parts "$(PARTS)" $$out
stacks-smoke: deps $(call stacks_builds,$(SMOKE_STACKS)) ## dev: stacks' short slice
	scripts/stacks --stacks "$(SMOKE_STACKS)" --parts "$(SMOKE_PARTS)"

# The oldest Rust each crate says it builds with (rust-version): the library, its core and
# cmsafe-sync need 1.83 (mutable references in const evaluation), the preload 1.88 (naked
# functions). Each checked with that toolchain, installed by rustup when missing (in make test:
# a claimed rust-version that no longer builds fails there, not at a user's).
.PHONY: msrv
MSRV_LIB := $(shell sed -n 's/^rust-version = "\(.*\)"/\1/p' Cargo.toml)
MSRV_PRELOAD := $(shell sed -n 's/^rust-version = "\(.*\)"/\1/p' preload/Cargo.toml)
msrv: build-deps ## test: cargo check with each crate's rust-version (rustup installs it)
	rustup toolchain install $(MSRV_LIB) $(MSRV_PRELOAD) --profile minimal
	CARGO_TARGET_DIR=target/msrv cargo +$(MSRV_LIB) check --locked -p cmsafe -p cmsafe-core -p cmsafe-sync --all-targets
	CARGO_TARGET_DIR=target/msrv cargo +$(MSRV_PRELOAD) check --locked --workspace --all-targets

# The loom models of the lock-free parts (crates/sync): each model's interleavings, with at most
# LOOM_MAX_PREEMPTIONS preemptions a run, in a target directory of their own (--cfg loom
# rebuilds every crate it touches).
.PHONY: loom
LOOM_MAX_PREEMPTIONS ?= 3
loom: build-deps ## test: the loom models of crates/sync
	RUSTFLAGS="--cfg loom" LOOM_MAX_PREEMPTIONS=$(LOOM_MAX_PREEMPTIONS) CARGO_TARGET_DIR=target/loom \
	  $(CARGO) test --release --locked -p cmsafe-sync --lib

# ---- arm64 (issue 31): both libraries, the C tests, the examples, the preload's test programs,
# the storm's programs and syscall_loop cross-built for aarch64 with Debian's cross compilers and
# arm64 development packages (`scripts/setup-deps --arm64` installs them, Rust's aarch64 target
# included), under target/aarch64-unknown-linux-gnu/ and target/arm64/. Nothing runs here: the
# binaries are for an arm64 machine or the arm64 guest (scripts/rxe-vm --arch arm64, whose
# target/ is target/arm64). The same rules as the host's build, run by a make of their own with
# the cross compilers, the target and the output directories given.
ARM64_TARGET := aarch64-unknown-linux-gnu
ARM64_TOOLS  := aarch64-linux-gnu-
ARM64_LIBOUT := $(CURDIR)/target/$(ARM64_TARGET)/$(PROFILE)
ARM64_ENV    := CARGO_BUILD_TARGET=$(ARM64_TARGET) \
  CARGO_TARGET_AARCH64_UNKNOWN_LINUX_GNU_LINKER=$(ARM64_TOOLS)gcc \
  PKG_CONFIG_ALLOW_CROSS=1 PKG_CONFIG_LIBDIR=/usr/lib/aarch64-linux-gnu/pkgconfig:/usr/share/pkgconfig
ARM64_MAKE   := $(ARM64_ENV) $(MAKE) DEPS_FLAGS=--arm64 CC=$(ARM64_TOOLS)gcc CXX=$(ARM64_TOOLS)g++ \
  LIBOUT=$(ARM64_LIBOUT) CTESTS=target/arm64/c-tests PRELOAD_TESTS=target/arm64/preload-tests \
  STORM=target/arm64/storm BENCH=target/arm64/bench
.PHONY: cross-arm64 cross-arm64-clippy
cross-arm64: ## dev: cross-build everything for aarch64 (runs nothing)
	$(ARM64_MAKE) build preload c-tests $(EXAMPLE_BINS:target/c-tests/%=target/arm64/c-tests/%) \
	  preload-tests storm-bins target/arm64/bench/syscall_loop
	@for f in $(ARM64_LIBOUT)/libcmsafe.so $(ARM64_LIBOUT)/libcmsafe_preload.so \
	    target/arm64/c-tests/* target/arm64/preload-tests/* target/arm64/storm/* \
	    target/arm64/storm/asan/* target/arm64/bench/*; do \
	  [ -f "$$f" ] || continue; \
	  readelf -h "$$f" | grep -q 'Machine: *AArch64' || { echo "$$f: not aarch64" >&2; exit 1; }; \
	done
	@echo "cross-arm64: aarch64 libraries in $(ARM64_LIBOUT), tests in target/arm64"

# clippy for aarch64 (c_char is u8 there, and the architecture's own code paths are compiled).
cross-arm64-clippy: ## dev: clippy -D warnings for aarch64
	@scripts/setup-deps --arm64
	$(ARM64_ENV) $(CARGO) clippy --workspace --all-targets --locked -- -D warnings

# The cross build run on an emulated arm64 machine: scripts/rxe-vm --arch arm64 boots Debian 12's
# arm64 kernel under qemu-system-aarch64 with Soft-RoCE, in a root of Debian's arm64 packages
# (scripts/arm64-root), with target/arm64 as its target/. The slice in `make test`: every C test,
# without LeakSanitizer's check at each process's exit (it costs that guest tens of seconds a
# process; the x86_64 guest runs them with it: c-tests/run-in-guest), and the misuse tests of CM
# events raw, under audit and under safe mode. Its time is in docs/testing.md, "arm64". The whole suite
# runs on arm64 in `make stacks` (STACKS=arm64: LeakSanitizer on, every misuse test, the real
# programs, the demo and the storm).
.PHONY: arm64-test
arm64-test: deps cross-arm64 ## test: the C tests and the CM misuse programs on an emulated arm64 guest
	$(RXE_VM) --arch arm64 -- sh -c 'CTESTS_DETECT_LEAKS=0 c-tests/run-in-guest; a=$$?; \
	  PRELOAD_MISUSE_ONLY=cm scripts/preload-misuse-tests; b=$$?; [ $$a -eq 0 ] && [ $$b -eq 0 ]'

# The instruction budgets on arm64 (bench/budgets.tsv's aarch64 rows): callgrind's count of the
# loops in the emulated guest, about 20 minutes, so not in make test. cmtime-insns has no arm64
# budgets (scripts/insn-count says why).
.PHONY: arm64-insn-test
arm64-insn-test: deps cross-arm64 ## dev: instructions per event on arm64's budgets (slow: emulated)
	$(RXE_VM) --arch arm64 -- scripts/insn-count --n 100 --out target/insn-test --check

# The unit tests of the crates whose code depends on the page size (the core's page.rs and pool,
# the sync crate's page states, the preload's guards), cross-built for aarch64 and copied where
# the arm64 guest finds them (its target/unit-tests): cargo itself stays outside the guest.
ARM64_UNIT := target/arm64/unit-tests
.PHONY: arm64-unit-tests
arm64-unit-tests: ## dev: the unit tests cross-built for the arm64 guest
	@scripts/setup-deps --arm64
	rm -rf $(ARM64_UNIT) && mkdir -p $(ARM64_UNIT)
	$(ARM64_ENV) $(CARGO) test --locked -p cmsafe-core -p cmsafe-sync -p cmsafe-preload --lib \
	  --no-run --message-format=json >$(ARM64_UNIT).json
	grep -o '"executable":"[^"]*"' $(ARM64_UNIT).json | cut -d'"' -f4 | while read -r exe; do \
	  cp "$$exe" $(ARM64_UNIT)/"$$(basename "$$exe" | sed 's/-[0-9a-f]*$$//')"; done
	@rm -f $(ARM64_UNIT).json
	@[ "$$(ls $(ARM64_UNIT) | wc -l)" -eq 3 ] || { echo "arm64-unit-tests: expected 3 test programs" >&2; exit 1; }

# The same cross build on Debian's arm64 kernel with 16K pages (scripts/rxe-vm --arch arm64
# --pages 16k; the root is the same Debian 12 one): the page size the guest reports, the unit
# tests that depend on it, every C test and the whole misuse suite, whose audit mode guards each
# event's copy with a whole run-time page (scripts/pages-in-guest). 26 minutes on 2 cores shared
# with other guests (docs/testing.md, "arm64 with 16K pages"): not in make test.
.PHONY: arm64-16k-test
arm64-16k-test: deps cross-arm64 arm64-unit-tests ## test: unit, C and misuse tests on an emulated arm64 guest with 16K pages
	$(RXE_VM) --arch arm64 --pages 16k -- scripts/pages-in-guest 16384

# Two nodes joined by a real link (scripts/rxe-pair): rping across it, checked on both sides;
# TRANSPORT=iwarp on Soft-iWARP.
.PHONY: pair-test
pair-test: deps ## test: rping across two guests joined by a link
	RXE_VM_TIMEOUT=$${RXE_VM_TIMEOUT:-600} scripts/rxe-pair --transport $(TRANSPORT) -- \
	  scripts/pair-rping -- scripts/pair-rping

# The whole suite, in this order (about an hour on 2 cores, most of it in the guests).
TEST_PARTS := deps makefile-check fmt-check clippy cargo-test msrv loom header-check guest-test \
      abi-check lists-check timeline-check timeline-fuzz audit-check harness-check host-check lint-check workspace-check header-compile-check man-check version-check install-check storm-test \
      preload-test usdt-test services-test soak-test insn-test copy-insn-test pair-test \
      stacks-test deb-test iwarp-test
test: $(TEST_PARTS) ## use: the whole suite, on a real stack in guests (CI runs it)
	@echo "make test: all passed"

# TRANSPORT=iwarp runs it on Soft-iWARP (siw0) instead of Soft-RoCE (scripts/rxe-vm --help).
demo: deps $(C_TEST_BINS) $(EXAMPLE_BINS) ## use: boot a Soft-RoCE guest and show the main job
	$(RXE_VM) --transport $(TRANSPORT) -- scripts/demo-in-guest

clean: ## use: cargo clean (target/)
	$(CARGO) clean

# ---- packaging: SONAME, install and uninstall, and their checks ---------------------------------
# GNU conventions: PREFIX, LIBDIR, DESTDIR (a staging root, prepended to every installed path).
# The .pc file says includedir=${prefix}/include, so the headers always go there.
PREFIX       ?= /usr/local
LIBDIR       ?= $(PREFIX)/lib
BINDIR       ?= $(PREFIX)/bin
MANDIR       ?= $(PREFIX)/share/man
INCLUDEDIR   := $(PREFIX)/include
PKGCONFIGDIR := $(LIBDIR)/pkgconfig
DESTDIR      ?=
INSTALL      ?= install
LDCONFIG     ?= ldconfig
CXX          ?= g++

# Version and SONAME from Cargo.toml, by the rule's one place, scripts/soname (build.rs links the
# library with the same name). The file installed is libcmsafe.so.VERSION.
cmsafe_soname   := $(shell scripts/soname)
CMSAFE_VERSION  := $(word 1,$(cmsafe_soname))
CMSAFE_SONAME   := $(word 2,$(cmsafe_soname))
CMSAFE_REALNAME := libcmsafe.so.$(CMSAFE_VERSION)

INSTALL_HEADERS := $(wildcard include/*.h include/*.hpp)
MAN_PAGES       := $(wildcard man/man[1-8]/*.[1-8])
# man/manN/page.N -> $(MANDIR)/manN/page.N
installed_man   := $(foreach p,$(MAN_PAGES),$(MANDIR)/$(notdir $(patsubst %/,%,$(dir $(p))))/$(notdir $(p)))

# Hooks for artifacts built elsewhere in the tree: each is installed only when the file exists
# (override to point elsewhere), and always removed by uninstall.
# The LD_PRELOAD library (make preload), installed as $(PRELOADDIR)/libcmsafe_preload.so:
PRELOAD_LIB ?= $(LIBOUT)/libcmsafe_preload.so
# Where it goes: beside the library for a source build; the packages give it a private directory
# ($(LIBDIR)/cmsafe, debian/rules), out of the loader's path and of the shlibs file. The installed
# cmsafe-audit is told this path.
PRELOADDIR ?= $(LIBDIR)
# The interpreter written on cmsafe-timeline's first line when set (the packages: /usr/bin/python3,
# Debian's policy for a packaged script); a source build keeps `#!/usr/bin/env python3`.
PYTHON3 ?=
# Its launcher, installed as $(BINDIR)/cmsafe-audit:
AUDIT_CMD   ?= bin/cmsafe-audit
# The converter of its reports to a timeline (cmsafe-audit --timeline runs it from beside
# itself), installed as $(BINDIR)/cmsafe-timeline:
TIMELINE_CMD ?= bin/cmsafe-timeline
# cmsafe-lint and cmsafe-migrate (docs/lint.md): the commands in $(BINDIR), their Python
# package and Coccinelle rules in $(LINT_SHARE), whose place the installed commands are given.
LINT_SHARE      := $(PREFIX)/share/cmsafe/lint
LINT_CMDS       := bin/cmsafe-lint bin/cmsafe-migrate
LINT_PACKAGE    := $(wildcard tools/lint/cmsafe_lint/*.py)
LINT_RULES      := $(wildcard tools/lint/rules/*.cocci)
installed_lint  := $(addprefix $(BINDIR)/,$(notdir $(LINT_CMDS))) \
  $(addprefix $(LINT_SHARE)/cmsafe_lint/,$(notdir $(LINT_PACKAGE))) \
  $(addprefix $(LINT_SHARE)/rules/,$(notdir $(LINT_RULES)))

.PHONY: install uninstall abi-check header-compile-check man-check version-check install-check

# Programs linked against target/release load the library by its SONAME: link it there too.
$(LIBOUT)/$(CMSAFE_SONAME):
	@mkdir -p $(LIBOUT)
	ln -sfn libcmsafe.so $@
build: $(LIBOUT)/$(CMSAFE_SONAME)

# install copies what `make build` built (building it first only when it is missing), so that
# `make build && sudo make install` never runs cargo as root.
$(LIBOUT)/libcmsafe.so:
	$(MAKE) build

# The preload is not built here: it needs a newer Rust than the library (1.88), and install may
# run as root. It is installed when `make preload` built it (the hook below).
install: $(LIBOUT)/libcmsafe.so ## use: install into PREFIX (/usr/local); LIBDIR, DESTDIR
	$(INSTALL) -d $(DESTDIR)$(LIBDIR) $(DESTDIR)$(INCLUDEDIR) $(DESTDIR)$(PKGCONFIGDIR)
	$(INSTALL) -m 0755 $(LIBOUT)/libcmsafe.so $(DESTDIR)$(LIBDIR)/$(CMSAFE_REALNAME)
	ln -sfn $(CMSAFE_REALNAME) $(DESTDIR)$(LIBDIR)/$(CMSAFE_SONAME)
	ln -sfn $(CMSAFE_REALNAME) $(DESTDIR)$(LIBDIR)/libcmsafe.so
	$(INSTALL) -m 0644 $(INSTALL_HEADERS) $(DESTDIR)$(INCLUDEDIR)/
	sed -e 's|@PREFIX@|$(PREFIX)|g' -e 's|@LIBDIR@|$(LIBDIR)|g' -e 's|@VERSION@|$(CMSAFE_VERSION)|g' \
	  pkgconfig/cmsafe.pc.in >$(DESTDIR)$(PKGCONFIGDIR)/cmsafe.pc
	chmod 0644 $(DESTDIR)$(PKGCONFIGDIR)/cmsafe.pc
	set -e; for p in $(MAN_PAGES); do \
	  d=$(DESTDIR)$(MANDIR)/$$(basename $$(dirname $$p)); \
	  $(INSTALL) -d $$d; $(INSTALL) -m 0644 $$p $$d/; \
	done
	if [ -f "$(PRELOAD_LIB)" ]; then $(INSTALL) -d $(DESTDIR)$(PRELOADDIR) && \
	  $(INSTALL) -m 0755 "$(PRELOAD_LIB)" $(DESTDIR)$(PRELOADDIR)/libcmsafe_preload.so; fi
	if [ -f "$(AUDIT_CMD)" ]; then $(INSTALL) -d $(DESTDIR)$(BINDIR) && \
	  sed 's|^installed_lib=$$|installed_lib=$(PRELOADDIR)/libcmsafe_preload.so|' "$(AUDIT_CMD)" \
	    >$(DESTDIR)$(BINDIR)/cmsafe-audit && chmod 0755 $(DESTDIR)$(BINDIR)/cmsafe-audit; fi
	if [ -f "$(TIMELINE_CMD)" ]; then $(INSTALL) -d $(DESTDIR)$(BINDIR) && \
	  sed '1s|^#!/usr/bin/env python3$$|#!$(or $(PYTHON3),/usr/bin/env python3)|' "$(TIMELINE_CMD)" \
	    >$(DESTDIR)$(BINDIR)/cmsafe-timeline && chmod 0755 $(DESTDIR)$(BINDIR)/cmsafe-timeline; fi
	$(INSTALL) -d $(DESTDIR)$(BINDIR) $(DESTDIR)$(LINT_SHARE)/cmsafe_lint $(DESTDIR)$(LINT_SHARE)/rules
	$(INSTALL) -m 0644 $(LINT_PACKAGE) $(DESTDIR)$(LINT_SHARE)/cmsafe_lint/
	$(INSTALL) -m 0644 $(LINT_RULES) $(DESTDIR)$(LINT_SHARE)/rules/
	set -e; for c in $(LINT_CMDS); do \
	  sed -e '1s|^#!/usr/bin/env python3$$|#!$(or $(PYTHON3),/usr/bin/env python3)|' \
	    -e 's|^SHARE = None .*|SHARE = "$(LINT_SHARE)"|' $$c >$(DESTDIR)$(BINDIR)/$$(basename $$c); \
	  chmod 0755 $(DESTDIR)$(BINDIR)/$$(basename $$c); \
	done
	@if [ -z "$(DESTDIR)" ] && [ "$$(id -u)" = 0 ]; then $(LDCONFIG) || true; fi

uninstall: ## use: remove exactly what install installed (same variables)
	rm -f $(addprefix $(DESTDIR),$(LIBDIR)/$(CMSAFE_REALNAME) $(LIBDIR)/$(CMSAFE_SONAME) \
	  $(LIBDIR)/libcmsafe.so $(addprefix $(INCLUDEDIR)/,$(notdir $(INSTALL_HEADERS))) \
	  $(PKGCONFIGDIR)/cmsafe.pc $(installed_man) \
	  $(PRELOADDIR)/libcmsafe_preload.so $(BINDIR)/cmsafe-audit $(BINDIR)/cmsafe-timeline \
	  $(installed_lint))
	if [ "$(PRELOADDIR)" != "$(LIBDIR)" ]; then rmdir $(DESTDIR)$(PRELOADDIR) 2>/dev/null || true; fi
	rmdir $(DESTDIR)$(LINT_SHARE)/cmsafe_lint $(DESTDIR)$(LINT_SHARE)/rules $(DESTDIR)$(LINT_SHARE) \
	  $(DESTDIR)$(PREFIX)/share/cmsafe 2>/dev/null || true

# The Debian packages (scripts/deb; docs/abi.md, "Debian packages"): libcmsafe0.2, libcmsafe-dev
# and cmsafe-tools, built with dpkg-buildpackage and debhelper from the tree and its vendored
# crates (scripts/deb-source), then lintian, which must report no error and no warning. make deb
# builds this machine's suite's (bookworm's), in target/deb/pkgs; DEB_STACK=NAME another suite's,
# in its root (scripts/stack-root --base), DEB_STACK=arm64 bookworm's arm64 ones, cross-built.
DEB_STACK ?= bookworm
deb_args = $(if $(filter arm64,$(DEB_STACK)),--arch arm64,--stack $(DEB_STACK))
.PHONY: deb deb-test rpm
deb: ## use: the Debian packages, lintian-clean (target/deb/pkgs); DEB_STACK=NAME or arm64
	@scripts/setup-deps --pkg $(if $(filter arm64,$(DEB_STACK)),--arm64)
	scripts/deb $(deb_args)

# The packages tested installed (scripts/deb-test): built with the previous version's, then in
# one guest per suite installed with apt-get into the suite's root, upgraded, tested against /usr
# and purged. In make test, within its hour: this machine's suite and sid (whose root
# stacks-test builds), installed, upgraded and purged; make stacks runs every part on every
# suite, the C tests built against the installed packages and the misuse and real programs
# through /usr/bin/cmsafe-audit included (docs/testing.md, "The Debian packages").
DEB_TEST_HOST_PARTS ?= install upgrade purge
DEB_TEST_OTHER ?= sid
DEB_TEST_OTHER_PARTS ?= install upgrade purge
deb-test: deps ## test: the Debian packages installed with apt, tested, upgraded, purged (bookworm, sid)
	@scripts/setup-deps --pkg
	scripts/deb-test --stack bookworm --parts "$(DEB_TEST_HOST_PARTS)"
	scripts/deb-test --stack $(DEB_TEST_OTHER) --parts "$(DEB_TEST_OTHER_PARTS)"

# The RPMs (scripts/rpm): rpmbuild of Debian's rpm package on redhat/cmsafe.spec, rpmlint clean;
# built and checked here, not installed on an RPM distribution.
rpm: ## use: the RPMs from redhat/cmsafe.spec, rpmlint-clean (target/rpm)
	@scripts/setup-deps --pkg
	scripts/rpm

# Only cmsafe_* exported, exactly the header's functions; the SONAME; the preload's interposed names.
.PHONY: lists-check
lists-check: ## test: finding kinds and interposed names in the docs match their Rust source
	c-tests/check-lists
abi-check: build preload ## test: the libraries export only their names, with their SONAMEs
	c-tests/check-abi

# The same, for the libraries a plain `cargo build --workspace --release` gives (PROFILES="debug
# release" for the debug build too).
.PHONY: workspace-check
workspace-check: build-deps ## test: the same for a plain cargo build --workspace
	c-tests/check-workspace-build

# include/*.h alone as C99, C11, C++11, C++17 and cmsafe.hpp as C++11/17/20, gcc and clang.
header-compile-check: deps ## test: the headers alone as C99..C++20, gcc and clang
	c-tests/check-header

# Every page formats without warnings; every function of include/cmsafe.h has its page.
man-check: deps ## test: every man page formats cleanly; every function has one
	c-tests/check-man

# CMSAFE_VERSION_* match Cargo.toml; cmsafe_version() at run time matches them.
version-check: build ## test: the version macros match Cargo.toml and the library
	c-tests/check-version

# make install into a staging DESTDIR, the examples built with pkg-config only and run on the
# real stack (its own guest boot), then make uninstall leaves nothing behind.
install-check: deps build ## test: install into a staging root, build with pkg-config, uninstall
	c-tests/check-install

# The C++ wrapper's test on the real stack, run in the guest by c-tests/run-in-guest.
CXXTEST_FLAGS := -std=c++17 -Wall -Wextra -Wpedantic -Werror -g -O1 -Iinclude
$(CTESTS)/cpp_events: c-tests/cpp_events.cpp c-tests/transport.h include/cmsafe.hpp include/cmsafe.h $(CTEST_BUILD)
	@mkdir -p $(CTESTS)
	$(CXX) $(CXXTEST_FLAGS) $(SAN_FLAGS) -o $@ $< $(CTEST_LIBS)
c-tests: $(CTESTS)/cpp_events

# --- Preload tests: programs on RAW librdmacm (and libibverbs' completion and async events:
# misuse_cq_*, misuse_async_*)
# that model unmodified applications, run with and without libcmsafe_preload.so by
# scripts/preload-misuse-tests (in the guest). No sanitizers (ASan and an LD_PRELOAD library do
# not mix) and no cmsafe: they must not depend on it.
PRELOAD_TESTS       := target/preload-tests
PRELOAD_TEST_FLAGS  := -std=c11 -Wall -Wextra -Wpedantic -Werror -g -O1 -Ic-tests
PRELOAD_TEST_LIBS   := -lrdmacm -libverbs -lpthread
PRELOAD_TEST_PROGRAMS := misuse_use_after_ack misuse_use_after_ack_threads misuse_never_acked \
        misuse_double_ack \
        misuse_foreign_ack misuse_destroy_with_unacked misuse_destroy_in_own_handler \
        misuse_migrate_with_unacked misuse_channel_destroy_with_unacked misuse_late_ack \
        misuse_qp_destroy_before_ack preload_fork preload_no_rdma preload_sigsegv \
        preload_cancel preload_lost_event preload_read_without_ids preload_dlopen \
        race_cancelled_read \
        misuse_qp_then_destroy soak_events misuse_destroyed_channel \
        misuse_destroyed_id misuse_retry_after_reject misuse_rejected_not_destroyed \
        misuse_cq_destroy_with_unacked \
        misuse_cq_wrong_ack misuse_cq_over_ack misuse_cq_never_acked preload_cq_loop \
        preload_async_survey misuse_async_destroy_with_unacked misuse_async_double_ack \
        misuse_async_never_acked
PRELOAD_TEST_BINS   := $(addprefix $(PRELOAD_TESTS)/,$(PRELOAD_TEST_PROGRAMS)) \
                       $(PRELOAD_TESTS)/preload_plugin.so

$(PRELOAD_TESTS)/%: c-tests/%.c c-tests/raw_util.c c-tests/raw_util.h c-tests/transport.h \
                    c-tests/harness.h
	@mkdir -p $(PRELOAD_TESTS)
	$(CC) $(PRELOAD_TEST_FLAGS) -o $@ $< c-tests/raw_util.c $(PRELOAD_TEST_LIBS)

# A program not linked with librdmacm, and the plugin it dlopen()s RTLD_LOCAL, which is.
$(PRELOAD_TESTS)/preload_dlopen: c-tests/preload_dlopen.c c-tests/harness.h
	@mkdir -p $(PRELOAD_TESTS)
	$(CC) $(PRELOAD_TEST_FLAGS) -o $@ $< -ldl

$(PRELOAD_TESTS)/preload_plugin.so: c-tests/preload_plugin.c c-tests/raw_util.c c-tests/raw_util.h \
                                    c-tests/transport.h c-tests/harness.h
	@mkdir -p $(PRELOAD_TESTS)
	$(CC) $(PRELOAD_TEST_FLAGS) -fPIC -shared -o $@ $< c-tests/raw_util.c $(PRELOAD_TEST_LIBS)

.PHONY: preload-tests preload-test race-bench
preload-tests: $(PRELOAD_TEST_BINS) ## dev: build the preload's test programs (target/preload-tests)

# The preload on the real stack, one guest boot: every misuse program raw, under audit and under
# safe mode; then unmodified real programs (rping, ucmatose, udaddy, cmtime, ib_send_bw with and
# without -e, qperf, fi_pingpong, rdma_server/rdma_client, rstream) under both modes, against
# runs without it; and the cancelled-read race.
preload-test: deps preload preload-tests c-tests $(EXAMPLE_BINS) ## test: the preload on misuse programs and real programs
	$(RXE_VM) -- sh -c 'scripts/preload-misuse-tests; a=$$?; \
	  scripts/preload-real-programs audit; b=$$?; scripts/preload-real-programs safe; c=$$?; \
	  scripts/race-cancelled-read 20 1; d=$$?; c-tests/api-under-preload; e=$$?; \
	  c-tests/new-events; f=$$?; \
	  [ $$a -eq 0 ] && [ $$b -eq 0 ] && [ $$c -eq 0 ] && [ $$d -eq 0 ] && [ $$e -eq 0 ] && \
	  [ $$f -eq 0 ]'

# The services in their short form (UCX io_demo, tgt + libiscsi over iSER, riostream,
# rdma_xserver/rdma_xclient, mckey, rcopy, ib_write_bw, ib_read_lat), one reference run and one
# run per mode each, both sides preloaded. About 12 minutes, most of it the iSER tools.
.PHONY: services-test
services-test: deps preload preload-tests ## test: real services (UCX, iSER, ...) under the preload, short
	$(RXE_VM) -- scripts/preload-real-programs --set services-short audit safe

# `make bench` runs the cost benchmarks first (copy path, live ids on the host, setup, system calls, instructions, CPU
# per event, the storm: about 25 minutes), then the long ones (soak, services, race, faults), so a
# run cut short still leaves the cost tables of one build.
.PHONY: bench
bench: copy-bench scale-host setup-bench syscall-bench insn-bench event-cpu-bench storm-bench ## bench: every benchmark (80 min), into bench/results/

# The USDT probes (docs/tracing.md): bpftrace lists them, and attached by the libraries' paths
# it sees exactly the events the programs fetched and acked (the JSON report's seqs, types, ids
# and times), each destroy and each finding, in the Soft-RoCE guest.
.PHONY: usdt-test
usdt-test: deps preload preload-tests $(BENCH)/syscall_loop ## test: bpftrace attached to the USDT probes counts every event
	$(RXE_VM) -- scripts/usdt-in-guest

# The preload's memory stays bounded: a program with one event per created-resolved-destroyed
# id, raw, under safe mode and under audit, its resident set flat after warm-up (a count of
# KiB, not a time). `make test` drives 40,000 events per run, `make bench` 1,000,000.
SOAK_TEST_EVENTS ?= 40000
SOAK_BENCH_EVENTS ?= 1000000
.PHONY: soak-test soak-bench
soak-test: deps preload preload-tests ## test: the preload's memory flat over 40,000 events
	$(RXE_VM) -- scripts/soak-events $(SOAK_TEST_EVENTS)

soak-bench: deps preload preload-tests ## bench: the preload's memory over 1,000,000 events
	@mkdir -p bench/results
	$(RXE_VM) -- scripts/soak-events $(SOAK_BENCH_EVENTS) target/soak.md
	cp target/soak.md bench/results/soak.md
bench: soak-bench

# The services in their full form (`make bench`): every program of the short form at full size,
# raw, audit and safe, all checked; io_demo and the iSER workload timed over 5 alternated rounds.
# Writes bench/results/services.md (timings) and bench/results/field.md (what the audit saw).
SERVICES_ROUNDS ?= 5
.PHONY: services-bench
services-bench: deps preload ## bench: real services timed, raw against audit and safe
	@mkdir -p bench/results
	rm -rf target/bench-services
	$(RXE_VM) -- scripts/preload-real-programs --set services --rounds $(SERVICES_ROUNDS) \
	  --bench target/bench-services audit safe
	cp target/bench-services/services.md target/bench-services/field.md bench/results/
	cat bench/results/services.md bench/results/field.md

bench: services-bench

# The cancelled-read race (libiscsi's CM-thread cancel, modelled): hangs per mode over many
# alternated rounds, every hang under the preload named. Writes bench/results/race.md.
race-bench: deps preload preload-tests ## bench: the cancelled-read race, hangs per mode
	@mkdir -p bench/results
	{ echo "## The cancelled-read race (guest: \`scripts/rxe-vm -- scripts/race-cancelled-read 40 5\`)"; \
	  echo; echo "Software-emulated guest (qemu TCG): counts of a timing race, not a rate to hold."; \
	  echo; $(RXE_VM) -- scripts/race-cancelled-read 40 5; } | tee bench/results/race.md
bench: race-bench

# ---- The reconnect storm (storm/, scripts/storm): N connections from several client processes,
# all SIGKILLed at once, W waves, on three servers: the cmsafe API, the legacy ack-then-read
# server under the safe-mode preload, and a correct raw librdmacm baseline.
STORM          := target/storm
STORM_FLAGS    := -std=c11 -Wall -Wextra -Wpedantic -Werror -g -Iinclude -Istorm
STORM_PROGRAMS := storm_server_cmsafe storm_server_legacy storm_server_raw storm_client
STORM_PLAIN    := $(addprefix $(STORM)/,$(STORM_PROGRAMS))
STORM_ASAN     := $(addprefix $(STORM)/asan/,storm_server_cmsafe storm_server_legacy storm_server_raw)
STORM_DEPS     := storm/storm_common.c storm/storm.h include/cmsafe.h

.PHONY: storm-bins storm-test storm-bench storm-picture bench

# Only the cmsafe server links libcmsafe: the legacy and raw servers and the client are plain
# librdmacm programs.
storm_libs = $(if $(findstring cmsafe,$(notdir $@)),$(CTEST_LIBS),-lrdmacm -libverbs)

# Timed builds (-O2) and checked builds (ASan, UBSan, LSan) of the same sources.
$(STORM_PLAIN): $(STORM)/%: storm/%.c $(STORM_DEPS) build
	@mkdir -p $(@D)
	$(CC) $(STORM_FLAGS) -O2 -o $@ $< storm/storm_common.c $(storm_libs)

$(STORM_ASAN): $(STORM)/asan/%: storm/%.c $(STORM_DEPS) build
	@mkdir -p $(@D)
	$(CC) $(STORM_FLAGS) -O1 $(SAN_FLAGS) -o $@ $< storm/storm_common.c $(storm_libs)

storm-bins: $(STORM_PLAIN) $(STORM_ASAN) preload ## dev: build the storm's servers and client (target/storm)

# Small (part of `make test`): 100 connections x 2 waves; the legacy server's leak check under
# valgrind; and the control: the legacy server without the preload, caught by ASan.
# TRANSPORT=iwarp runs it on Soft-iWARP with 50 connections: siw gives a process 144 queue
# mappings, at most 71 connections a server (docs/stacks.md, "The storm on iWARP").
STORM_TEST_CONNS = $(if $(filter iwarp,$(TRANSPORT)),50,100)
storm-test: deps storm-bins ## test: a small reconnect storm; TRANSPORT=iwarp on Soft-iWARP
	scripts/storm --transport $(TRANSPORT) --conns $(STORM_TEST_CONNS) --clients 5 --waves 2 \
	  --legacy-check valgrind --control

# Full (part of `make bench`): 500 connections x 10 waves, timed; the checked builds at 500 x 2
# (the legacy server as an ASan build under the preload: valgrind is too slow at 500); and one
# wave of each server under perf. Writes bench/results/storm.md.
storm-bench: deps storm-bins ## bench: the reconnect storm, 500 connections x 10 waves
	scripts/storm --out bench/results/storm.md --title "Reconnect storm: 500 connections, 10 waves" \
	  --conns 500 --clients 5 --waves 10 --check-waves 2 --legacy-check asan --profile-waves 1

# A storm's picture (docs/preload.md, "Timeline"): one wave of 100 connections on the legacy server
# under the safe-mode preload, with --reports so that it writes its report (its checked run is a
# small ASan one: 4 connections), then that report drawn into docs/img/timeline-storm.svg,
# kill and drain included. The report is kept in tests/timeline/data/storm (make timeline-check
# converts it, checks the conversion and holds the picture to it); all the run's reports stay in
# target/storm/picture/reports, for narrower pictures (--svg-window START_US:END_US).
STORM_PICTURE_DIR   := target/storm/picture
storm-picture: deps storm-bins ## dev: a 100-connection storm in the guest, drawn into docs/img/timeline-storm.svg
	rm -rf $(STORM_PICTURE_DIR)/reports
	scripts/storm --transport $(TRANSPORT) --results $(STORM_PICTURE_DIR) --servers legacy \
	  --conns 100 --clients 5 --waves 1 --check-conns 4 --check-waves 1 --legacy-check asan \
	  --reports
	rm -f tests/timeline/data/storm/*.json
	cp $(STORM_PICTURE_DIR)/reports/legacy-plain-*.json tests/timeline/data/storm/
	bin/cmsafe-timeline --svg $(TIMELINE_STORM_PICTURE) tests/timeline/data/storm/*.json

# ---- Network faults (scripts/faults, scripts/faults-in-guest): two guests joined by a link
# (scripts/rxe-pair), the three storm servers side by side with heartbeats, their clients on the
# other node; a lossy setup, a partition, the client node's death.
.PHONY: fault-test fault-bench

# Small: 8 connections per server, the servers' ASan builds. The IB CM's DREQ retries (about
# 70 s on the server, 100 s on the client) bound the partition and the death from below whatever
# the size: 5 minutes with nothing else running (18 on a host shared with other guests). Not in
# make test (CI's hour): run before resolving a change to what a fault reaches (the preload's
# watcher, destroys, the storm servers).
# TRANSPORT=iwarp runs it on Soft-iWARP, where the guests' TCP notices a silent peer: the run
# sets tcp_retries2=6 in both guests (about 25 s; Debian's 15 is about 925 s: docs/faults.md,
# "iWARP"). Not in `make test`.
fault-test: deps storm-bins ## test: network faults on two guests, short; TRANSPORT=iwarp on Soft-iWARP
	scripts/faults --transport $(TRANSPORT) --conns 8 --checked $(if $(filter iwarp,$(TRANSPORT)),--tcp-retries2 6)

# Full (part of `make bench`): 200 connections per server under loss and partition, 500 for the
# node death; the IB CM takes many minutes to time out that many DREQs, hence the hang bound of
# an hour per wave. Writes bench/results/faults.md.
fault-bench: deps storm-bins ## bench: network faults at full size
	scripts/faults --out bench/results/faults.md --title "Network faults: lossy setup, partition, node death" \
	  --faults "loss:200 partition:200 death:500" --wave-timeout 3600

bench: fault-bench

# ---- Benchmarks (`make bench`): each writes bench/results/<name>.md and prints it. ----------------
BENCH_FLAGS := -std=c11 -Wall -Wextra -Wpedantic -Werror -g -O2 -Iinclude

.PHONY: copy-bench setup-bench

$(BENCH)/copy_path: bench/copy_path.c include/cmsafe.h build
	@mkdir -p $(@D)
	$(CC) $(BENCH_FLAGS) -o $@ $< -L$(LIBOUT) -Wl,-rpath,$(LIBOUT) -lcmsafe

$(BENCH)/cm_setup: bench/cm_setup.c include/cmsafe.h build
	@mkdir -p $(@D)
	$(CC) $(BENCH_FLAGS) -o $@ $< $(CTEST_LIBS)

# What one of audit's seals (an mprotect of one page) costs in the guest: no librdmacm.
$(BENCH)/seal_cost: bench/seal_cost.c
	@mkdir -p $(@D)
	$(CC) $(BENCH_FLAGS) -o $@ $< -lpthread

$(BENCH)/syscall_loop: bench/syscall_loop.c include/cmsafe.h build
	@mkdir -p $(@D)
	$(CC) $(BENCH_FLAGS) -o $@ $< $(CTEST_LIBS)

.PHONY: syscall-bench syscall-test

# System calls per event, raw against the API and the preload, counted under strace in the guest
# (scripts/syscall-count), CM events and completion events: the table with each target, in
# bench/results/syscalls.md.
syscall-bench: deps $(BENCH)/syscall_loop $(PRELOAD_TESTS)/preload_cq_loop preload ## bench: system calls per event
	@mkdir -p bench/results
	{ echo "## System calls per event (guest: \`scripts/rxe-vm -- scripts/syscall-count --events 400\`)"; \
	  echo; $(RXE_VM) -- scripts/syscall-count --events 400; } | tee bench/results/syscalls.md

# The same count held to budgets (200 events; each row's calls are a fixed number per event, but
# for audit's page runs, one per 64 events, whose count in a window is allowed either rounding):
# every row must be on its budget. Not in make test: strace slows each loop's warm-up (4,200
# events, 2,100 id lives, to lap audit's page ring) to about 11 minutes of CI's 60; run it
# before resolving a change to a per-event path, beside make bench. harness-check holds the
# checker on a recorded run (tests/harness/data/syscalls).
syscall-test: deps $(BENCH)/syscall_loop $(PRELOAD_TESTS)/preload_cq_loop preload ## test: system calls per event on budget
	$(RXE_VM) -- scripts/syscall-count --events 200 --check

# User-space instructions per event and per id, raw against the API and the preload, counted
# by callgrind in the guest (scripts/insn-count): the CPU each event costs, by count.
.PHONY: insn-bench insn-test
# Then the preload's instructions in a real program, cmtime (scripts/cmtime-insns), in the same guest.
insn-bench: deps $(BENCH)/syscall_loop preload ## bench: instructions per event; the preload in cmtime
	@mkdir -p bench/results
	{ echo "## Instructions per event (guest: \`scripts/rxe-vm -- scripts/insn-count --n 100\`)"; \
	  echo; $(RXE_VM) -- sh -c 'scripts/insn-count --n 100 && echo && \
	    echo "## In a real program (guest: \`scripts/cmtime-insns --n 200\`)" && echo && \
	    scripts/cmtime-insns --n 200'; } | tee bench/results/insns.md

# The same counts held to their budgets (a count, not a time: the same on a busy machine).
insn-test: deps $(BENCH)/syscall_loop preload ## test: instructions per event on budget
	$(RXE_VM) -- sh -c 'scripts/insn-count --n 100 --out target/insn-test --check; a=$$?; \
	  scripts/cmtime-insns --n 200 --out target/insn-test/cmtime --check; b=$$?; \
	  [ $$a -eq 0 ] && [ $$b -eq 0 ]'

# 1 (and 4, per-copy memory): the copy path with no kernel, on the host, against a hand copy.
copy-bench: deps $(BENCH)/copy_path ## bench: the copy path on the host, against a hand copy
	@mkdir -p bench/results
	{ echo "## Copy path, no kernel (host: \`$(BENCH)/copy_path 51 20000 100000\`)"; echo; \
	  $(BENCH)/copy_path 51 20000 100000; echo; \
	  echo "### By count: \`scripts/copy-insns\`"; echo; scripts/copy-insns; echo; \
	  echo "### Where the time goes: \`perf record -e cpu-clock --call-graph dwarf $(BENCH)/copy_path profile 300000\`"; \
	  echo; echo "cmsafe alone (cmsafe_event_copy + cmsafe_event_release of each kind); share of all samples,"; \
	  echo "self (the function's own code, inlined callees included):"; echo; \
	  perf record -q -e cpu-clock --call-graph dwarf -o $(BENCH)/copy.perf.data $(BENCH)/copy_path profile 300000 >/dev/null 2>&1 && \
	  perf report -i $(BENCH)/copy.perf.data --stdio --no-children --sort dso,sym -g none 2>/dev/null | \
	    grep -E '^ +[0-9]' | head -n 16 | sed 's/^/    /' || echo "    (perf is not usable here)"; \
	  echo; echo "and with callees (the two calls and the big steps):"; echo; \
	  perf report -i $(BENCH)/copy.perf.data --stdio --children --sort sym -g none 2>/dev/null | \
	    grep -E '^ +[0-9]' | grep -E 'cmsafe_event_copy$$|cmsafe_event_release$$|copy_of$$|alloc_copy$$|slot::alloc$$|alloc_with$$|Slab::release$$|from_raw$$|take_index$$|TypeCounts::count$$|local::with$$|coarse_ns$$|clock_gettime|tls_get_addr' | \
	    head -n 14 | sed 's/^/    /'; \
	  echo; cat bench/copy_path_notes.md; \
	} | tee bench/results/copy-path.md

# The copy path's instructions per event held to a budget (a count: the same on a busy host).
.PHONY: copy-insn-test
copy-insn-test: deps $(BENCH)/copy_path ## test: the copy path's instructions on budget (host)
	scripts/copy-insns --check

# Cost per event and per id life, and memory per live id, as live cm_ids grow to 50,000: raw, the
# API, audit and safe on the host's stand-in librdmacm (tests/host/programs/scale.c, counted by
# callgrind), not the real stack: the host section of bench/results/scale.md. About 10 minutes.
.PHONY: scale-host
scale-host: deps preload host-tests ## bench: cost and memory as live ids grow to 50,000 (host, stand-in librdmacm)
	@mkdir -p bench/results
	scripts/scale-host --out bench/results/scale.md --check

# 2: connection setup on the real stack: cmtime raw / preload safe / preload audit, and
# cmtime's steps on the cmsafe API, and two controls, in rounds of shuffled order.
setup-bench: deps $(BENCH)/cm_setup $(BENCH)/seal_cost preload ## bench: connection setup, cmtime raw against cmsafe
	@mkdir -p bench/results
	{ echo "## Connection setup (guest: \`scripts/rxe-vm -- scripts/bench-cm-setup-in-guest 200 21\`)"; \
	  echo; $(RXE_VM) -- scripts/bench-cm-setup-in-guest 200 21; } | tee bench/results/cm-setup.md

# CPU time per event in the guest (a time: printed, never held by a test), raw against the
# pass-through preload, the API and the preload's modes, with the notes on what it is spent on.
.PHONY: event-cpu-bench
event-cpu-bench: deps $(BENCH)/syscall_loop preload ## bench: CPU time per event in the guest
	@mkdir -p bench/results
	{ echo "## CPU time per event (guest: \`scripts/rxe-vm -- scripts/event-cpu --rounds 9\`)"; \
	  echo; $(RXE_VM) -- scripts/event-cpu --rounds 9 && echo && cat bench/event_cpu_notes.md; \
	} | tee bench/results/event-cpu.md
