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

# A guest run's logs made the harness's fixtures (tests/harness/cmsafe_harness/record.py): the
# reports renamed from NAME.<pid>.jsonl to NAME.1.jsonl, ..., their pids and the run's status in
# NAME.run, so a fixture recorded again changes only where the run did. FROM a folder the
# harness wrote (target/preload-misuse/audit, target/preload-real/basic, ...), TO one of tests/harness/data;
# NAMES the runs to take (all when empty).
.PHONY: harness-record
harness-record: ## dev: a guest run's logs into the harness's fixtures: FROM=dir TO=dir [NAMES=...]
	@test -n "$(FROM)" -a -n "$(TO)" || { echo "usage: make harness-record FROM=dir TO=dir [NAMES=...]" >&2; exit 2; }
	scripts/harness record $(FROM) $(TO) $(NAMES)
