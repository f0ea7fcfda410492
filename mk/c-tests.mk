# The C and C++ tests of the library (c-tests/, run in the guest by c-tests/run-in-guest), the
# examples, and their guest runs on Soft-RoCE and Soft-iWARP.
.PHONY: c-tests guest-test
C_TEST_PROGRAMS := test_private_data test_ack_happened seed_incident \
                   test_event_types test_pdata_lengths test_event_order test_many_clients \
                   test_threads test_threads_tsan test_shared_event test_shared_event_tsan \
                   test_fetch_modes test_alloc_failure test_misuse test_logging test_new_events \
                   test_new_events_plain test_flight
C_TEST_BINS     := $(addprefix $(CTESTS)/,$(C_TEST_PROGRAMS))
EXAMPLE_BINS    := $(CTESTS)/token_server $(CTESTS)/token_client

$(CTESTS)/%: c-tests/api/%.c c-tests/api/cm_util.c c-tests/api/cm_util.h $(RXE_SETUP) c-tests/transport.h c-tests/harness.h include/cmsafe.h $(CTEST_BUILD)
	@mkdir -p $(CTESTS)
	$(CC) $(CTEST_FLAGS) $(SAN_FLAGS) -o $@ $< c-tests/api/cm_util.c c-tests/rxe_setup.c $(CTEST_LIBS)

# The same test built with ThreadSanitizer instead (ASan and TSan do not mix): NAME_tsan.
$(CTESTS)/%_tsan: c-tests/api/%.c c-tests/api/cm_util.c c-tests/api/cm_util.h $(RXE_SETUP) c-tests/transport.h c-tests/harness.h include/cmsafe.h $(CTEST_BUILD)
	@mkdir -p $(CTESTS)
	$(CC) $(CTEST_FLAGS) -fsanitize=thread -fno-omit-frame-pointer -o $@ $< c-tests/api/cm_util.c c-tests/rxe_setup.c $(CTEST_LIBS)

# The seed incident's raw server, unchanged, rebuilt with cmsafe_compat.h: safe mode from source.
# Without sanitizers, for the runs under the preload (AddressSanitizer must come first in the
# library list, and LD_PRELOAD would come before it): c-tests/new-events.
$(CTESTS)/test_new_events_plain: c-tests/api/test_new_events.c c-tests/api/cm_util.c c-tests/api/cm_util.h \
    $(RXE_SETUP) c-tests/transport.h \
    c-tests/harness.h include/cmsafe.h $(CTEST_BUILD)
	@mkdir -p $(CTESTS)
	$(CC) $(CTEST_FLAGS) -o $@ $< c-tests/api/cm_util.c c-tests/rxe_setup.c $(CTEST_LIBS)

$(CTESTS)/seed_incident_compat: c-tests/api/seed_incident.c $(CTESTS)/cm_util.o $(CTESTS)/rxe_setup.o include/cmsafe_compat.h $(CTEST_BUILD)
	$(CC) $(CTEST_FLAGS) $(SAN_FLAGS) -include cmsafe_compat.h -o $@ c-tests/api/seed_incident.c \
	  $(CTESTS)/cm_util.o $(CTESTS)/rxe_setup.o $(CTEST_LIBS)

$(CTESTS)/cm_util.o: c-tests/api/cm_util.c c-tests/api/cm_util.h $(RXE_SETUP) c-tests/transport.h c-tests/harness.h include/cmsafe.h
	@mkdir -p $(CTESTS)
	$(CC) $(CTEST_FLAGS) $(SAN_FLAGS) -c -o $@ c-tests/api/cm_util.c

$(CTESTS)/rxe_setup.o: $(RXE_SETUP) c-tests/harness.h
	@mkdir -p $(CTESTS)
	$(CC) $(CTEST_FLAGS) $(SAN_FLAGS) -c -o $@ c-tests/rxe_setup.c

$(CTESTS)/%: examples/%.c include/cmsafe.h $(CTEST_BUILD)
	@mkdir -p $(CTESTS)
	$(CC) $(CTEST_FLAGS) -o $@ $< $(CTEST_LIBS)

# The Rust API's real-stack tests, built here and run in the guest (cargo itself stays outside).
$(CTESTS)/real_stack: build
	@mkdir -p $(CTESTS)
	exe=$$($(CARGO) test --$(PROFILE) --locked -p cmsafe --test real_stack --no-run --message-format=json \
	  | grep -o '"executable":"[^"]*"' | tail -n1 | cut -d'"' -f4) && cp "$$exe" $@

# The C++ wrapper's test on the real stack, run in the guest by c-tests/run-in-guest.
CXXTEST_FLAGS := -std=c++17 -Wall -Wextra -Wpedantic -Werror -g -O1 -Iinclude -Ic-tests
$(CTESTS)/cpp_events: c-tests/api/cpp_events.cpp c-tests/transport.h include/cmsafe.hpp include/cmsafe.h $(CTEST_BUILD)
	@mkdir -p $(CTESTS)
	$(CXX) $(CXXTEST_FLAGS) $(SAN_FLAGS) -o $@ $< $(CTEST_LIBS)

c-tests: $(C_TEST_BINS) $(CTESTS)/real_stack $(CTESTS)/seed_incident_compat $(CTESTS)/cpp_events ## dev: build the C and C++ tests (target/c-tests)

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
