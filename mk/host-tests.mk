# The preload's host tests (docs/testing.md, "Host tests of the preload"): programs run raw and
# under the preload in audit and safe mode on a stand-in librdmacm (tests/host/standin: built as
# librdmacm.so.1, librdmacm's calls at RDMACM_1.0, events queued by the program itself), for the
# paths a real stack cannot produce on demand: signals, exit, fork, the report file, setuid.
# Python's standard library runs them, each with a deadline: a few seconds, no guest.
HOST_TESTS    := target/host-tests
HOST_LIB      := $(CURDIR)/$(HOST_TESTS)/lib
HOST_CFLAGS   := -std=c11 -Wall -Wextra -Wpedantic -Werror -g -O1 -Itests/host/standin -Iinclude
HOST_PROGRAMS := $(addprefix $(HOST_TESTS)/bin/,events signals exit report plugin cut)
# The plugin, under a name that merely contains "librdmacm" and under one that does not.
HOST_PLUGINS  := $(addprefix $(HOST_LIB)/,libmy-librdmacm-helper.so libmy-helper.so)
# The setuid programs, compiled here and linked by the tests in a directory of their own, with
# copies of the libraries: a setuid program's loader takes no LD_PRELOAD path and no $$ORIGIN.
HOST_OBJECTS  := $(addprefix $(HOST_TESTS)/obj/,secure.o secure_api.o)
HOST_STANDIN  := $(HOST_LIB)/librdmacm.so.1
# The programs of libcmsafe's own API, linked against the release build of it too (scale: the
# benchmark of cost as live ids grow, raw, under the preload and on the API).
HOST_API      := $(addprefix $(HOST_TESTS)/bin/,api_abort scale)

$(HOST_STANDIN): tests/host/standin/rdmacm.c tests/host/standin/standin.h tests/host/standin/rdmacm.map
	@mkdir -p $(HOST_LIB)
	$(CC) $(HOST_CFLAGS) -fPIC -shared -Wl,-soname,librdmacm.so.1 \
	  -Wl,--version-script=tests/host/standin/rdmacm.map -o $@ $< -lpthread

$(HOST_TESTS)/bin/%: tests/host/programs/%.c tests/host/programs/host.h $(HOST_STANDIN)
	@mkdir -p $(HOST_TESTS)/bin
	$(CC) $(HOST_CFLAGS) -o $@ $< $(HOST_STANDIN) -Wl,-rpath,$(HOST_LIB) -ldl

$(HOST_API): $(HOST_TESTS)/bin/%: tests/host/programs/%.c tests/host/programs/host.h include/cmsafe.h $(HOST_STANDIN) | build
	@mkdir -p $(HOST_TESTS)/bin
	$(CC) $(HOST_CFLAGS) -o $@ $< $(CURDIR)/target/release/libcmsafe.so $(HOST_STANDIN) \
	  -Wl,-rpath,$(HOST_LIB):$(CURDIR)/target/release

$(HOST_PLUGINS): tests/host/programs/helper_plugin.c $(HOST_STANDIN)
	$(CC) $(HOST_CFLAGS) -fPIC -shared -o $@ $< $(HOST_STANDIN) -Wl,-rpath,$(HOST_LIB)

$(HOST_TESTS)/obj/%.o: tests/host/programs/%.c tests/host/programs/host.h tests/host/standin/standin.h include/cmsafe.h
	@mkdir -p $(HOST_TESTS)/obj
	$(CC) $(HOST_CFLAGS) -c -o $@ $<

.PHONY: host-tests host-check
host-tests: $(HOST_STANDIN) $(HOST_PROGRAMS) $(HOST_API) $(HOST_PLUGINS) $(HOST_OBJECTS) ## dev: build the stand-in librdmacm and the host tests' programs (target/host-tests)

host-check: build preload host-tests ## test: the preload's host tests on a stand-in librdmacm: signals, exit, fork, report file, setuid
	PYTHONDONTWRITEBYTECODE=1 python3 -m unittest discover -s tests/host -t tests/host
