# The arm64 build and its guests: both libraries, the C tests, the examples, the preload's test programs,
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
