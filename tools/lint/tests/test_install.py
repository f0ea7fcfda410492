"""cmsafe-lint and cmsafe-migrate as `make install` puts them: the commands find their package
through the place written into them, run from there, leave nothing beside what was installed
(a root run must not add files the packages do not own), and `make uninstall` removes them."""

import os
import shutil
import subprocess
import sys
import tempfile
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from command import LEAK, ROOT  # noqa: E402


def files_under(top):
    return sorted(os.path.relpath(os.path.join(d, f), top)
                  for d, _, names in os.walk(top) for f in names)


class Installed(unittest.TestCase):
    def setUp(self):
        self.dir = tempfile.mkdtemp(prefix="cmsafe-lint-install-")
        self.prefix = os.path.join(self.dir, "prefix")
        # The rule installs the library make build left in LIBOUT; a stand-in file is enough
        # for what is tested here, and the preload is not there, so it is not installed.
        libout = os.path.join(self.dir, "out")
        os.mkdir(libout)
        open(os.path.join(libout, "libcmsafe.so"), "w").close()
        self.vars = ["PREFIX=" + self.prefix, "LIBOUT=" + libout, "LDCONFIG=true"]
        self.make("install")
        self.share = os.path.join(self.prefix, "share", "cmsafe", "lint")

    def tearDown(self):
        shutil.rmtree(self.dir)

    def make(self, target):
        p = subprocess.run(["make", "-s", "--no-print-directory", "-C", ROOT, target, *self.vars],
                           stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, timeout=120)
        self.assertEqual(p.returncode, 0, p.stdout)

    def run_installed(self, command, *args):
        # No PYTHONDONTWRITEBYTECODE from make lint-check: a user's environment has none.
        env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
        p = subprocess.run([os.path.join(self.prefix, "bin", command), *args], cwd=self.dir,
                           stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env,
                           timeout=300)
        return p.returncode, p.stdout, p.stderr

    def test_the_commands_run_from_their_installed_package(self):
        for command in ("cmsafe-lint", "cmsafe-migrate"):
            with open(os.path.join(self.prefix, "bin", command)) as f:
                self.assertIn('\nSHARE = "%s"\n' % self.share, f.read())
        installed = files_under(self.share)
        with open(os.path.join(self.dir, "leak.c"), "w") as f:
            f.write(LEAK)
        rc, out, err = self.run_installed("cmsafe-lint", "leak.c")
        self.assertEqual((rc, out, err), (
            1, "leak.c:8:9: warning: never-acked: the event `ev` got at line 5 is not acked on "
               "this path (returns here)\n", "cmsafe-lint: 1 file, 1 finding\n"))
        rc, out, _ = self.run_installed("cmsafe-migrate", "leak.c")
        self.assertEqual(rc, 0)
        self.assertIn("\n+    if (cmsafe_migrate_get(ch, &ev_ref, &ev))\n", out)
        # Python caches a module's bytecode beside it when it can write there, as root can in
        # /usr/share: files no package lists, which purge and uninstall would leave behind.
        self.assertEqual(files_under(self.share), installed)

    def test_uninstall_removes_them(self):
        self.make("uninstall")
        left = files_under(self.prefix)
        self.assertEqual([f for f in left if "lint" in f or "migrate" in f], [])
        self.assertFalse(os.path.exists(os.path.join(self.prefix, "share", "cmsafe")))


if __name__ == "__main__":
    unittest.main()
