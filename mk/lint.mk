# cmsafe-lint and cmsafe-migrate (tools/lint, docs/lint.md): static checks of the event lifecycle
# as Coccinelle semantic patches, and the port of raw librdmacm code onto the API.
# lint-check (in make check): the rules on their cases (tools/lint/tests/cases), the recall set
# (every misuse program of c-tests/ at its line), the commands' output and statuses, installed
# too; spatch on the host, no guest, about 20 s of CPU. lint-field: the same on others' code
# (Debian 12's sources, fetched under target/lint-field by tools/lint/field/fetch-sources),
# every finding matched with a person's verdict (tools/lint/field/verdicts.txt), written to
# bench/results/lint.md; a finding nobody read fails it. migrate-test (in make test; it fetches
# rdma-core's source): the ports of rdma-core's examples built against the installed library and
# run in one guest.
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

# In make test, rdma-core's source out of reach is said and set apart, not failed (MIGRATE_SOURCES).
MIGRATE_SOURCES ?= needed
migrate-test: deps lint-deps build preload ## test: cmsafe-migrate's ports of rdma-core's examples, installed, on the real stack
	tools/lint/migrate/migrate-test $(if $(filter optional,$(MIGRATE_SOURCES)),--apart-without-sources)
