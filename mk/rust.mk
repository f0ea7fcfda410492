# The Rust workspace's own checks: the header, fmt, clippy, cargo test, the oldest Rust each crate
# claims, the loom models and the fuzz targets.
.PHONY: header header-check fmt-check clippy cargo-test

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

# The oldest Rust each crate says it builds with (rust-version): the library, its core and
# cmsafe-sync need 1.83 (mutable references in const evaluation), the preload 1.88 (naked
# functions). Each checked with that toolchain, installed by rustup when missing (in make test:
# a claimed rust-version that no longer builds fails there, not at a user's).
.PHONY: msrv
MSRV_LIB := $(shell sed -n 's/^rust-version = "\(.*\)"/\1/p' Cargo.toml)
MSRV_PRELOAD := $(shell sed -n 's/^rust-version = "\(.*\)"/\1/p' preload/Cargo.toml)
msrv: build-deps ## test: cargo check with each crate's rust-version (rustup installs it)
	rustup toolchain install $(MSRV_LIB) $(MSRV_PRELOAD) --profile minimal
	CARGO_TARGET_DIR=target/msrv cargo +$(MSRV_LIB) check --locked -p cmsafe-ffi -p cmsafe -p cmsafe-core -p cmsafe-sync --all-targets
	CARGO_TARGET_DIR=target/msrv cargo +$(MSRV_PRELOAD) check --locked --workspace --all-targets

# The loom models of the lock-free parts (crates/sync): each model's interleavings, with at most
# LOOM_MAX_PREEMPTIONS preemptions a run, in a target directory of their own (--cfg loom
# rebuilds every crate it touches).
.PHONY: loom
LOOM_MAX_PREEMPTIONS ?= 3
loom: build-deps ## test: the loom models of crates/sync
	RUSTFLAGS="--cfg loom" LOOM_MAX_PREEMPTIONS=$(LOOM_MAX_PREEMPTIONS) CARGO_TARGET_DIR=target/loom \
	  $(CARGO) test --release --locked -p cmsafe-sync --lib

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

# Miri (nightly Rust's interpreter, which finds undefined behaviour: a read out of bounds or
# through a pointer whose provenance does not reach, a use after free, a data race) on the unit
# tests of the pure modules: the event copy and its slots, safe mode's copies, the preload's
# ledger of held events and its held-time buckets. Under Miri the pool maps a small range
# readable and writable at once, safe mode keeps fewer copies, no setting is read and the
# preload neither exports its entry points nor runs its load-time setup (each marked
# `cfg(miri)` where it is). rustup installs the nightly toolchain's miri when missing.
MIRI_CORE    := event::copy event::slot safe::
MIRI_PRELOAD := audit::held cm::unacked cm::track
MIRI_RUN     := MIRIFLAGS="-Zmiri-permissive-provenance" CARGO_TARGET_DIR=target/miri \
  $(CARGO) +nightly miri test --locked
.PHONY: miri
miri: build-deps ## test: Miri on the unit tests of the event copy, safe mode's copies, the held-event ledger
	@rustup run nightly rustc --version >/dev/null 2>&1 || rustup toolchain install nightly --profile minimal
	@rustup component add --toolchain nightly miri rust-src
	$(MIRI_RUN) -p cmsafe-core --lib -- $(MIRI_CORE)
	$(MIRI_RUN) -p cmsafe-preload --lib -- $(MIRI_PRELOAD)
