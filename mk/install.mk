# make install and uninstall (the SONAME and version: the Makefile), and the checks of what a
# user links and installs: the exported names, the headers, the man pages, the version.
#
# GNU conventions: PREFIX, LIBDIR, DESTDIR (a staging root, prepended to every installed path).
# The .pc file says includedir=${prefix}/include, so the headers always go there.
PREFIX       ?= /usr/local
LIBDIR       ?= $(PREFIX)/lib
BINDIR       ?= $(PREFIX)/bin
MANDIR       ?= $(PREFIX)/share/man
INCLUDEDIR   := $(PREFIX)/include
PKGCONFIGDIR := $(LIBDIR)/pkgconfig
DESTDIR      ?=
INSTALL      ?= install
LDCONFIG     ?= ldconfig

INSTALL_HEADERS := $(wildcard include/*.h include/*.hpp)
MAN_PAGES       := $(wildcard man/man[1-8]/*.[1-8])
# man/manN/page.N -> $(MANDIR)/manN/page.N
installed_man   := $(foreach p,$(MAN_PAGES),$(MANDIR)/$(notdir $(patsubst %/,%,$(dir $(p))))/$(notdir $(p)))

# Hooks for artifacts built elsewhere in the tree: each is installed only when the file exists
# (override to point elsewhere), and always removed by uninstall.
# The LD_PRELOAD library (make preload), installed as $(PRELOADDIR)/libcmsafe_preload.so:
PRELOAD_LIB ?= $(LIBOUT)/libcmsafe_preload.so
# Where it goes: beside the library for a source build; the packages give it a private directory
# ($(LIBDIR)/cmsafe, debian/rules), out of the loader's path and of the shlibs file. The installed
# cmsafe-audit is told this path.
PRELOADDIR ?= $(LIBDIR)
# The interpreter written on cmsafe-timeline's first line when set (the packages: /usr/bin/python3,
# Debian's policy for a packaged script); a source build keeps `#!/usr/bin/env python3`.
PYTHON3 ?=
# Its launcher, installed as $(BINDIR)/cmsafe-audit:
AUDIT_CMD   ?= bin/cmsafe-audit
# The converter of its reports to a timeline (cmsafe-audit --timeline runs it from beside
# itself), installed as $(BINDIR)/cmsafe-timeline:
TIMELINE_CMD ?= bin/cmsafe-timeline
# cmsafe-lint and cmsafe-migrate (docs/lint.md): the commands in $(BINDIR), their Python
# package and Coccinelle rules in $(LINT_SHARE), whose place the installed commands are given.
LINT_SHARE      := $(PREFIX)/share/cmsafe/lint
LINT_CMDS       := bin/cmsafe-lint bin/cmsafe-migrate
LINT_PACKAGE    := $(wildcard tools/lint/cmsafe_lint/*.py)
LINT_RULES      := $(wildcard tools/lint/rules/*.cocci)
installed_lint  := $(addprefix $(BINDIR)/,$(notdir $(LINT_CMDS))) \
  $(addprefix $(LINT_SHARE)/cmsafe_lint/,$(notdir $(LINT_PACKAGE))) \
  $(addprefix $(LINT_SHARE)/rules/,$(notdir $(LINT_RULES)))

.PHONY: install uninstall abi-check header-compile-check man-check version-check install-check

# install copies what `make build` built (building it first only when it is missing), so that
# `make build && sudo make install` never runs cargo as root.
$(LIBOUT)/libcmsafe.so:
	$(MAKE) build

# The preload is not built here: it needs a newer Rust than the library (1.88), and install may
# run as root. It is installed when `make preload` built it (the hook below).
install: $(LIBOUT)/libcmsafe.so ## use: install into PREFIX (/usr/local); LIBDIR, DESTDIR
	$(INSTALL) -d $(DESTDIR)$(LIBDIR) $(DESTDIR)$(INCLUDEDIR) $(DESTDIR)$(PKGCONFIGDIR)
	$(INSTALL) -m 0755 $(LIBOUT)/libcmsafe.so $(DESTDIR)$(LIBDIR)/$(CMSAFE_REALNAME)
	ln -sfn $(CMSAFE_REALNAME) $(DESTDIR)$(LIBDIR)/$(CMSAFE_SONAME)
	ln -sfn $(CMSAFE_REALNAME) $(DESTDIR)$(LIBDIR)/libcmsafe.so
	$(INSTALL) -m 0644 $(INSTALL_HEADERS) $(DESTDIR)$(INCLUDEDIR)/
	sed -e 's|@PREFIX@|$(PREFIX)|g' -e 's|@LIBDIR@|$(LIBDIR)|g' -e 's|@VERSION@|$(CMSAFE_VERSION)|g' \
	  pkgconfig/cmsafe.pc.in >$(DESTDIR)$(PKGCONFIGDIR)/cmsafe.pc
	chmod 0644 $(DESTDIR)$(PKGCONFIGDIR)/cmsafe.pc
	set -e; for p in $(MAN_PAGES); do \
	  d=$(DESTDIR)$(MANDIR)/$$(basename $$(dirname $$p)); \
	  $(INSTALL) -d $$d; $(INSTALL) -m 0644 $$p $$d/; \
	done
	if [ -f "$(PRELOAD_LIB)" ]; then $(INSTALL) -d $(DESTDIR)$(PRELOADDIR) && \
	  $(INSTALL) -m 0755 "$(PRELOAD_LIB)" $(DESTDIR)$(PRELOADDIR)/libcmsafe_preload.so; fi
	if [ -f "$(AUDIT_CMD)" ]; then $(INSTALL) -d $(DESTDIR)$(BINDIR) && \
	  sed 's|^installed_lib=$$|installed_lib=$(PRELOADDIR)/libcmsafe_preload.so|' "$(AUDIT_CMD)" \
	    >$(DESTDIR)$(BINDIR)/cmsafe-audit && chmod 0755 $(DESTDIR)$(BINDIR)/cmsafe-audit; fi
	if [ -f "$(TIMELINE_CMD)" ]; then $(INSTALL) -d $(DESTDIR)$(BINDIR) && \
	  sed '1s|^#!/usr/bin/env python3$$|#!$(or $(PYTHON3),/usr/bin/env python3)|' "$(TIMELINE_CMD)" \
	    >$(DESTDIR)$(BINDIR)/cmsafe-timeline && chmod 0755 $(DESTDIR)$(BINDIR)/cmsafe-timeline; fi
	$(INSTALL) -d $(DESTDIR)$(BINDIR) $(DESTDIR)$(LINT_SHARE)/cmsafe_lint $(DESTDIR)$(LINT_SHARE)/rules
	$(INSTALL) -m 0644 $(LINT_PACKAGE) $(DESTDIR)$(LINT_SHARE)/cmsafe_lint/
	$(INSTALL) -m 0644 $(LINT_RULES) $(DESTDIR)$(LINT_SHARE)/rules/
	set -e; for c in $(LINT_CMDS); do \
	  sed -e '1s|^#!/usr/bin/env python3$$|#!$(or $(PYTHON3),/usr/bin/env python3)|' \
	    -e 's|^SHARE = None .*|SHARE = "$(LINT_SHARE)"|' $$c >$(DESTDIR)$(BINDIR)/$$(basename $$c); \
	  chmod 0755 $(DESTDIR)$(BINDIR)/$$(basename $$c); \
	done
	@if [ -z "$(DESTDIR)" ] && [ "$$(id -u)" = 0 ]; then $(LDCONFIG) || true; fi

uninstall: ## use: remove exactly what install installed (same variables)
	rm -f $(addprefix $(DESTDIR),$(LIBDIR)/$(CMSAFE_REALNAME) $(LIBDIR)/$(CMSAFE_SONAME) \
	  $(LIBDIR)/libcmsafe.so $(addprefix $(INCLUDEDIR)/,$(notdir $(INSTALL_HEADERS))) \
	  $(PKGCONFIGDIR)/cmsafe.pc $(installed_man) \
	  $(PRELOADDIR)/libcmsafe_preload.so $(BINDIR)/cmsafe-audit $(BINDIR)/cmsafe-timeline \
	  $(installed_lint))
	if [ "$(PRELOADDIR)" != "$(LIBDIR)" ]; then rmdir $(DESTDIR)$(PRELOADDIR) 2>/dev/null || true; fi
	rmdir $(DESTDIR)$(LINT_SHARE)/cmsafe_lint $(DESTDIR)$(LINT_SHARE)/rules $(DESTDIR)$(LINT_SHARE) \
	  $(DESTDIR)$(PREFIX)/share/cmsafe 2>/dev/null || true

# Only cmsafe_* exported, exactly the header's functions; the SONAME; the preload's interposed names.
.PHONY: lists-check
lists-check: ## test: finding kinds and interposed names in the docs match their Rust source
	c-tests/checks/check-lists
abi-check: build preload ## test: the libraries export only their names, with their SONAMEs
	c-tests/checks/check-abi

# The same, for the libraries a plain `cargo build --workspace --release` gives (PROFILES="debug
# release" for the debug build too).
.PHONY: workspace-check
workspace-check: build-deps ## test: the same for a plain cargo build --workspace
	c-tests/checks/check-workspace-build

# include/*.h alone as C99, C11, C++11, C++17 and cmsafe.hpp as C++11/17/20, gcc and clang.
header-compile-check: deps ## test: the headers alone as C99..C++20, gcc and clang
	c-tests/checks/check-header

# Every page formats without warnings; every function of include/cmsafe.h has its page.
man-check: deps ## test: every man page formats cleanly; every function has one
	c-tests/checks/check-man

# CMSAFE_VERSION_* match Cargo.toml; cmsafe_version() at run time matches them.
version-check: build ## test: the version macros match Cargo.toml and the library
	c-tests/checks/check-version

# make install into a staging DESTDIR, the examples built with pkg-config only and run on the
# real stack (its own guest boot), then make uninstall leaves nothing behind.
install-check: deps build ## test: install into a staging root, build with pkg-config, uninstall
	c-tests/checks/check-install
