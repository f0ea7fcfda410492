# The benchmarks (bench/README.md): each writes bench/results/<name>.md and prints it. Those of
# the preload's programs, the storm and the faults are beside their tests (mk/preload.mk,
# mk/storm.mk); the rest are here.
#
# `make bench` runs the cost benchmarks first (copy path, live ids on the host, setup, system
# calls, instructions, CPU per event, the storm: about 25 minutes), then the long ones (soak,
# services, race, faults), so a run cut short still leaves the cost tables of one build.
.PHONY: bench
BENCH_PARTS := copy-bench bench-scale setup-bench syscall-bench insn-bench event-cpu-bench \
  storm-bench soak-bench services-bench race-bench fault-bench
bench: $(BENCH_PARTS) ## bench: every benchmark (80 min), into bench/results/

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

$(BENCH)/scale_live: bench/scale_live.c include/cmsafe.h build
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

# The same counts held to their budgets (a count, not a time: the same on a busy machine); in the
# same guest, the live ids' slice (scale-test).
insn-test: deps $(BENCH)/syscall_loop $(BENCH)/scale_live preload ## test: instructions per event on budget; the live ids' slice
	@mkdir -p target/scale-test
	$(RXE_VM) -- sh -c 'scripts/insn-count --n 100 --out target/insn-test --check; a=$$?; \
	  scripts/cmtime-insns --n 200 --out target/insn-test/cmtime --check; b=$$?; \
	  $(SCALE_SLICE); c=$$?; [ $$a -eq 0 ] && [ $$b -eq 0 ] && [ $$c -eq 0 ]'

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
.PHONY: scale-host bench-scale scale-test
scale-host: deps preload host-tests ## bench: cost and memory as live ids grow to 50,000 (host, stand-in librdmacm)
	@mkdir -p bench/results
	scripts/scale-host --out bench/results/scale.md --check

# The same on the real stack (bench/scale_live.c in the Soft-RoCE guest, scripts/scale-live):
# time per event and per id life against raw librdmacm's own (the median of 3 runs, each event
# over a reference timed beside it), connection lives beside held connections, memory per live
# id (VmRSS, and the preload's own account beside it), destroys beside events pending, ids past
# librdmacm's table, cmtime with thousands of connections, and the loops' user-space
# instructions under callgrind; then cmtime's mimic mode (no QPs: rdma-core 56, so in trixie's
# guest) with 2,000 and 10,000 connections. Their sections of bench/results/scale.md and a plot
# per figure (bench/results/scale-*.svg). The first guest has one vCPU: under emulation a vCPU's
# speed moves between two states, and with one the reference beside each event shares its state.
# About two hours after scale-host's 10. A guest writes under its target/ only (the tree is
# read-only there, and a --stack guest's target/ is target/stacks/NAME/target): each section
# goes into a copy of scale.md, which comes back with the plots.
SCALE_TRIXIE := target/stacks/trixie/target/scale-bench
bench-scale: scale-host $(BENCH)/scale_live ## bench: live ids to 50,000, host counts and the real stack, with plots
	@mkdir -p target/scale-bench $(SCALE_TRIXIE)
	cp bench/results/scale.md target/scale-bench/scale.md
	RXE_VM_SMP=1 $(RXE_VM) -- scripts/scale-live --own 1000,10000,50000 \
	  --out target/scale-bench/scale.md --plots target/scale-bench
	cp target/scale-bench/scale.md $(SCALE_TRIXIE)/scale.md
	$(RXE_VM) --stack trixie -- scripts/scale-live --only mimic --mimic 2000,10000 \
	  --out target/scale-bench/scale.md
	cp $(SCALE_TRIXIE)/scale.md target/scale-bench/scale-*.svg bench/results/

# Its slice, counted (10 and 5,000 live ids, 1,000 events pending, 70,000 ids made): in
# insn-test's guest in make test; alone here.
SCALE_SLICE := scripts/scale-live --slice --out target/scale-test/scale.md
scale-test: deps $(BENCH)/scale_live preload ## test: 5,000 live ids on the real stack, counted
	@mkdir -p target/scale-test
	$(RXE_VM) -- $(SCALE_SLICE)

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
