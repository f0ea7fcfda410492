"""The packages' suite in the guest (cmsafe_harness.deb_suite): what it reads of ldconfig, ldd
and dpkg-deb, and how it tells what a purge left, held to output recorded on bookworm and to
directories made here."""

from __future__ import annotations

import os
import shutil
import sys
import tempfile
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from cmsafe_harness import deb_suite  # noqa: E402

# `ldconfig -p` and ldd on bookworm with libcmsafe0.2 installed (merged /usr: /lib is usr/lib).
LDCONFIG = """\
\tlibcmsafe_preload_other.so (libc6,x86-64) => /usr/lib/x86_64-linux-gnu/other.so
\tlibcmsafe.so.0.2 (libc6,x86-64) => /lib/x86_64-linux-gnu/libcmsafe.so.0.2
\tlibcmsafe.so (libc6,x86-64) => /lib/x86_64-linux-gnu/libcmsafe.so
"""
LDD = """\
\tlinux-vdso.so.1 (0x00007ffd5a1f2000)
\tlibcmsafe.so.0.2 => /lib/x86_64-linux-gnu/libcmsafe.so.0.2 (0x00007f8570407000)
\tlibrdmacm.so.1 => /lib/x86_64-linux-gnu/librdmacm.so.1 (0x00007f85703e7000)
\tlibgone.so.3 => not found
"""


class ResolvedTest(unittest.TestCase):
    def test_ldconfig_and_ldd(self):
        self.assertEqual(deb_suite.resolved(LDCONFIG, "libcmsafe.so.0.2"),
                         "/lib/x86_64-linux-gnu/libcmsafe.so.0.2")
        self.assertEqual(deb_suite.resolved(LDD, "libcmsafe.so.0.2"),
                         "/lib/x86_64-linux-gnu/libcmsafe.so.0.2")
        self.assertEqual(deb_suite.resolved(LDD, "libgone.so.3"), "not")
        self.assertEqual(deb_suite.resolved(LDCONFIG, "libcmsafe.so.0.1"), "")
        # A name that only begins like the SONAME is another library.
        self.assertEqual(deb_suite.resolved(LDCONFIG, "libcmsafe.so"),
                         "/lib/x86_64-linux-gnu/libcmsafe.so")

    def test_same_file_through_a_symlinked_directory(self):
        d = tempfile.mkdtemp()
        self.addCleanup(shutil.rmtree, d)
        os.makedirs(os.path.join(d, "usr", "lib"))
        os.symlink("usr/lib", os.path.join(d, "lib"))
        with open(os.path.join(d, "usr", "lib", "libx.so.1"), "w"):
            pass
        self.assertTrue(deb_suite.same_file(os.path.join(d, "lib", "libx.so.1"),
                                            os.path.join(d, "usr", "lib", "libx.so.1")))
        self.assertFalse(deb_suite.same_file(os.path.join(d, "lib", "liby.so.1"),
                                             os.path.join(d, "usr", "lib", "liby.so.1")))
        self.assertFalse(deb_suite.same_file("", os.path.join(d, "usr", "lib", "libx.so.1")))


class PurgeTest(unittest.TestCase):
    def test_what_a_purge_left(self):
        d = tempfile.mkdtemp()
        self.addCleanup(shutil.rmtree, d)
        lib, etc = os.path.join(d, "lib"), os.path.join(d, "etc")
        os.makedirs(os.path.join(etc, "sub"))
        os.makedirs(lib)
        open(os.path.join(lib, "libc.so.6"), "w").close()
        before = deb_suite.tree_listing([lib, os.path.join(d, "private")], [etc])
        self.assertIn("e " + os.path.join(lib, "libc.so.6"), before)
        self.assertIn("- " + os.path.join(d, "private"), before)
        self.assertEqual(deb_suite.leftovers(before, before), [])
        # A library, a private directory and a conffile the purge forgot; a file it took that
        # was not the packages'.
        open(os.path.join(lib, "libcmsafe.so.0.2.0"), "w").close()
        os.makedirs(os.path.join(d, "private"))
        open(os.path.join(etc, "sub", "cmsafe.conf"), "w").close()
        os.unlink(os.path.join(lib, "libc.so.6"))
        after = deb_suite.tree_listing([lib, os.path.join(d, "private")], [etc])
        self.assertEqual(deb_suite.leftovers(before, after), [
            "left: " + os.path.join(d, "private"),
            "left: " + os.path.join(etc, "sub", "cmsafe.conf"),
            "left: " + os.path.join(lib, "libcmsafe.so.0.2.0"),
            "gone: " + os.path.join(lib, "libc.so.6"),
        ])


class PackageFilesTest(unittest.TestCase):
    def test_the_three_without_dbgsym(self):
        d = tempfile.mkdtemp()
        self.addCleanup(shutil.rmtree, d)
        for n in ("libcmsafe0.2_0.2.0-1_amd64.deb", "libcmsafe0.2-dbgsym_0.2.0-1_amd64.deb",
                  "libcmsafe-dev_0.2.0-1_amd64.deb", "cmsafe-tools_0.2.0-1_amd64.deb",
                  "cmsafe_0.2.0-1_amd64.changes", "other_1.0_amd64.deb"):
            open(os.path.join(d, n), "w").close()
        self.assertEqual([os.path.basename(x) for x in deb_suite.package_files(d)],
                         ["cmsafe-tools_0.2.0-1_amd64.deb", "libcmsafe-dev_0.2.0-1_amd64.deb",
                          "libcmsafe0.2_0.2.0-1_amd64.deb"])
        self.assertEqual(deb_suite.package_files(os.path.join(d, "none")), [])


if __name__ == "__main__":
    unittest.main()
