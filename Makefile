# cmsafe: `make test` and `make demo` install what they need (scripts/setup-deps), build,
# and run on a real RDMA stack in a Soft-RoCE guest (scripts/rxe-vm).

CARGO   ?= cargo
CC      ?= cc
PROFILE := release
LIBOUT  := $(CURDIR)/target/$(PROFILE)
CTESTS  := target/c-tests
RXE_VM  := scripts/rxe-vm

SAN_FLAGS   := -fsanitize=address,undefined -fno-omit-frame-pointer
CTEST_FLAGS := -std=c11 -Wall -Wextra -Wpedantic -Werror -g -O1 -Iinclude -Ic-tests
CTEST_LIBS  := -L$(LIBOUT) -Wl,-rpath,$(LIBOUT) -lcmsafe -lrdmacm -libverbs -lpthread

C_TEST_PROGRAMS := test_private_data test_ack_happened seed_incident
C_TEST_BINS     := $(addprefix $(CTESTS)/,$(C_TEST_PROGRAMS))
EXAMPLE_BINS    := $(CTESTS)/token_server $(CTESTS)/token_client

.PHONY: all deps build header header-check fmt-check clippy cargo-test c-tests \
        guest-test test demo clean

all: build

deps:
	@scripts/setup-deps

build: deps
	$(CARGO) build --$(PROFILE) --locked

header:
	$(CARGO) run -q -p gen-header --locked

header-check:
	$(CARGO) run -q -p gen-header --locked -- --check

fmt-check:
	$(CARGO) fmt --all -- --check

clippy: deps
	$(CARGO) clippy --workspace --all-targets --locked -- -D warnings

cargo-test: deps
	$(CARGO) test --workspace --locked

$(CTESTS)/%: c-tests/%.c c-tests/cm_util.c c-tests/cm_util.h c-tests/harness.h include/cmsafe.h build
	@mkdir -p $(CTESTS)
	$(CC) $(CTEST_FLAGS) $(SAN_FLAGS) -o $@ $< c-tests/cm_util.c $(CTEST_LIBS)

$(CTESTS)/%: examples/%.c include/cmsafe.h build
	@mkdir -p $(CTESTS)
	$(CC) $(CTEST_FLAGS) -o $@ $< $(CTEST_LIBS)

# The Rust API's real-stack tests, built here and run in the guest (cargo itself stays outside).
$(CTESTS)/real_stack: build
	@mkdir -p $(CTESTS)
	exe=$$($(CARGO) test --$(PROFILE) --locked --test real_stack --no-run --message-format=json \
	  | grep -o '"executable":"[^"]*"' | tail -n1 | cut -d'"' -f4) && cp "$$exe" $@

c-tests: $(C_TEST_BINS) $(CTESTS)/real_stack

guest-test: c-tests
	$(RXE_VM) -- c-tests/run-in-guest

test: deps fmt-check clippy cargo-test header-check guest-test
	@echo "make test: all passed"

demo: $(C_TEST_BINS) $(EXAMPLE_BINS)
	$(RXE_VM) -- scripts/demo-in-guest

clean:
	$(CARGO) clean
