# The guests of other stacks, and of two nodes.
#
# Other stacks: the suite on every Debian suite we run on (scripts/stacks), each in its
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
# Every stack and every part, as scripts/stacks lists them (its defaults).
stacks_all := $(shell scripts/stacks --list stacks)
parts_all := $(shell scripts/stacks --list parts)
STACKS ?= $(stacks_all)
PARTS ?= $(parts_all)
SMOKE_STACKS ?= $(TEST_STACKS)
SMOKE_PARTS ?= $(TEST_STACK_PARTS) misuse
stacks-host-bins: build preload preload-tests c-tests storm-bins $(EXAMPLE_BINS) ## dev: what the bookworm rows of make stacks run
stacks_builds = $(if $(filter bookworm bookworm/iwarp,$(1)),stacks-host-bins) $(if $(filter arm64,$(1)),cross-arm64)
stacks: deps $(call stacks_builds,$(STACKS)) ## dev: the suite on the Debian stacks, iWARP, arm64; STACKS, PARTS
	@out=; if [ "$(strip $(STACKS))" = "$(stacks_all)" ] && { [ "$(strip $(PARTS))" = "$(parts_all)" ] || \
	    [ "$(strip $(PARTS))" = packages ]; }; then \
	  out="--out bench/results/stacks.md"; fi; \
	scripts/stacks --stacks "$(STACKS)" --parts "$(PARTS)" $$out
stacks-smoke: deps $(call stacks_builds,$(SMOKE_STACKS)) ## dev: stacks' short slice
	scripts/stacks --stacks "$(SMOKE_STACKS)" --parts "$(SMOKE_PARTS)"

# Two nodes joined by a real link (scripts/rxe-pair): rping across it, checked on both sides;
# TRANSPORT=iwarp on Soft-iWARP.
.PHONY: pair-test
pair-test: deps ## test: rping across two guests joined by a link
	RXE_VM_TIMEOUT=$${RXE_VM_TIMEOUT:-600} scripts/rxe-pair --transport $(TRANSPORT) -- \
	  scripts/pair-rping -- scripts/pair-rping

# The guests from a clone under /tmp (scripts/checkout-path-test): the default guest and a stack's
# see the clone at its path and write in its target/. About 75 s; run before resolving a change
# to the guests' plumbing (scripts/rxe-common.sh), not in make test.
.PHONY: checkout-path-test
checkout-path-test: deps ## test: the default and a stack's guest from a clone under /tmp
	scripts/checkout-path-test
