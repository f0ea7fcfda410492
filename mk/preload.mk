# The preload's tests on the real stack. Its programs are on raw librdmacm (and libibverbs'
# completion and async events: misuse_cq_*, misuse_async_*) and model unmodified applications,
# run with and without libcmsafe_preload.so by scripts/preload-misuse-tests (in the guest). No
# sanitizers (ASan and an LD_PRELOAD library do not mix) and no cmsafe: they must not depend on
# it.
PRELOAD_TESTS       := target/preload-tests
PRELOAD_TEST_FLAGS  := -std=c11 -Wall -Wextra -Wpedantic -Werror -g -O1 -Ic-tests
PRELOAD_TEST_LIBS   := -lrdmacm -libverbs -lpthread
# The programs on raw librdmacm, every one of c-tests/preload/: misuse_NAME.c (a misuse case;
# its row in tests/harness/cmsafe_harness/misuse_cases.py), preload_NAME.c (what the preload
# must live with), race_NAME.c and soak_NAME.c (the race and the soak); raw_util.c is their
# helper, preload_plugin.c a library.
PRELOAD_TEST_PROGRAMS := $(filter-out raw_util preload_plugin,$(basename $(notdir \
        $(wildcard c-tests/preload/*.c))))
PRELOAD_TEST_BINS   := $(addprefix $(PRELOAD_TESTS)/,$(PRELOAD_TEST_PROGRAMS)) \
                       $(PRELOAD_TESTS)/preload_plugin.so

$(PRELOAD_TESTS)/%: c-tests/preload/%.c c-tests/preload/raw_util.c c-tests/preload/raw_util.h $(RXE_SETUP) c-tests/transport.h \
                    c-tests/harness.h
	@mkdir -p $(PRELOAD_TESTS)
	$(CC) $(PRELOAD_TEST_FLAGS) -o $@ $< c-tests/preload/raw_util.c c-tests/rxe_setup.c $(PRELOAD_TEST_LIBS)

# A program not linked with librdmacm, and the plugin it dlopen()s RTLD_LOCAL, which is.
$(PRELOAD_TESTS)/preload_dlopen: c-tests/preload/preload_dlopen.c c-tests/harness.h
	@mkdir -p $(PRELOAD_TESTS)
	$(CC) $(PRELOAD_TEST_FLAGS) -o $@ $< -ldl

$(PRELOAD_TESTS)/preload_plugin.so: c-tests/preload/preload_plugin.c c-tests/preload/raw_util.c c-tests/preload/raw_util.h $(RXE_SETUP) \
                                    c-tests/transport.h c-tests/harness.h
	@mkdir -p $(PRELOAD_TESTS)
	$(CC) $(PRELOAD_TEST_FLAGS) -fPIC -shared -o $@ $< c-tests/preload/raw_util.c c-tests/rxe_setup.c $(PRELOAD_TEST_LIBS)

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

# The cancelled-read race (libiscsi's CM-thread cancel, modelled): hangs per mode over many
# alternated rounds, every hang under the preload named. Writes bench/results/race.md.
race-bench: deps preload preload-tests ## bench: the cancelled-read race, hangs per mode
	@mkdir -p bench/results
	{ echo "## The cancelled-read race (guest: \`scripts/rxe-vm -- scripts/race-cancelled-read 40 5\`)"; \
	  echo; echo "Software-emulated guest (qemu TCG): counts of a timing race, not a rate to hold."; \
	  echo; $(RXE_VM) -- scripts/race-cancelled-read 40 5; } | tee bench/results/race.md
