# The reconnect storm (storm/, scripts/storm): N connections from several client processes,
# all SIGKILLed at once, W waves, on three servers: the cmsafe API, the legacy ack-then-read
# server under the safe-mode preload, and a correct raw librdmacm baseline.
STORM          := target/storm
STORM_FLAGS    := -std=c11 -Wall -Wextra -Wpedantic -Werror -g -Iinclude -Istorm
STORM_PROGRAMS := storm_server_cmsafe storm_server_legacy storm_server_raw storm_client
STORM_PLAIN    := $(addprefix $(STORM)/,$(STORM_PROGRAMS))
STORM_ASAN     := $(addprefix $(STORM)/asan/,storm_server_cmsafe storm_server_legacy storm_server_raw)
STORM_DEPS     := storm/storm_common.c storm/storm.h include/cmsafe.h

.PHONY: storm-bins storm-test storm-bench storm-picture

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

# Network faults (scripts/faults, scripts/faults-in-guest): two guests joined by a link
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

