# The Debian packages (scripts/deb; docs/abi.md, "Debian packages"): libcmsafe0.2, libcmsafe-dev
# and cmsafe-tools, built with dpkg-buildpackage and debhelper from the tree and its vendored
# crates (scripts/deb-source), then lintian, which must report no error and no warning. make deb
# builds this machine's suite's (bookworm's), in target/deb/pkgs; DEB_STACK=NAME another suite's,
# in its root (scripts/stack-root --base), DEB_STACK=arm64 bookworm's arm64 ones, cross-built.
DEB_STACK ?= bookworm
deb_args = $(if $(filter arm64,$(DEB_STACK)),--arch arm64,--stack $(DEB_STACK))
.PHONY: deb deb-test rpm
deb: ## use: the Debian packages, lintian-clean (target/deb/pkgs); DEB_STACK=NAME or arm64
	@scripts/setup-deps --pkg $(if $(filter arm64,$(DEB_STACK)),--arm64)
	scripts/deb $(deb_args)

# The packages tested installed (scripts/deb-test): built with the previous version's, then in
# one guest per suite installed with apt-get into the suite's root, upgraded, tested against /usr
# and purged. In make test, within its hour: this machine's suite and sid (whose root
# stacks-test builds), installed, upgraded and purged; make stacks runs every part on every
# suite, the C tests built against the installed packages and the misuse and real programs
# through /usr/bin/cmsafe-audit included (docs/testing.md, "The Debian packages").
DEB_TEST_HOST_PARTS ?= install upgrade purge
DEB_TEST_OTHER ?= sid
DEB_TEST_OTHER_PARTS ?= install upgrade purge
deb-test: deps ## test: the Debian packages installed with apt, tested, upgraded, purged (bookworm, sid)
	@scripts/setup-deps --pkg
	scripts/deb-test --stack bookworm --parts "$(DEB_TEST_HOST_PARTS)"
	scripts/deb-test --stack $(DEB_TEST_OTHER) --parts "$(DEB_TEST_OTHER_PARTS)"

# The RPMs (scripts/rpm): rpmbuild of Debian's rpm package on redhat/cmsafe.spec, rpmlint clean;
# built and checked here, not installed on an RPM distribution.
rpm: ## use: the RPMs from redhat/cmsafe.spec, rpmlint-clean (target/rpm)
	@scripts/setup-deps --pkg
	scripts/rpm
