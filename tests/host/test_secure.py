"""Under AT_SECURE (setuid, setgid, capabilities) no CMSAFE_* variable has any effect, in the
preload (preload/src/sys/config.rs) as in libcmsafe (src/ffi/flight.rs, crates/core/src/logging.rs).

The programs (tests/host/programs/secure.c, secure_api.c, compiled by make host-tests) are linked
here, in a directory of their own that the user `nobody` can read, against copies of the
stand-in, the preload and libcmsafe, with that directory as their rpath: a setuid program's
loader takes no LD_PRELOAD path (the preload is linked in instead) and no $ORIGIN. A copy owned by
nobody with the setuid bit, run as root, gets AT_SECURE from the kernel (the effective uid
differs); the program checks it has it. Each setuid run has a plain run beside it, the same
program and settings without the bit, which shows the settings take effect there."""

from __future__ import annotations

import os
import pwd
import shutil
import subprocess
import tempfile
import unittest

from hostrun import LIBCMSAFE, OBJ, PRELOAD, ROOT, STANDIN, HostTest, Run, run

SETTINGS_REPORT = "report.json"
FLIGHT_DUMP = "flight.json"
# libcmsafe's warning at a second ack of one compat copy (src/ffi/compat.rs), a warn-level
# message: said unless CMSAFE_LOG turns it off.
SECOND_ACK = "of an event already acked: ignored"


class Secure(HostTest):
    dir = ""

    @classmethod
    def setUpClass(cls) -> None:
        super().setUpClass()
        if os.geteuid() != 0:
            raise unittest.SkipTest("making a program setuid to another user needs root "
                                    "(CI runs as root)")
        try:
            nobody = pwd.getpwnam("nobody")
        except KeyError:
            raise unittest.SkipTest("no user nobody to make the programs setuid to")
        cls.dir = tempfile.mkdtemp(prefix="cmsafe-secure-")
        # Run even when what follows fails (tearDownClass would not be).
        cls.addClassCleanup(shutil.rmtree, cls.dir, True)
        if os.statvfs(cls.dir).f_flag & os.ST_NOSUID:
            raise unittest.SkipTest("%s is on a nosuid filesystem" % cls.dir)
        os.chmod(cls.dir, 0o755)
        soname = subprocess.run([os.path.join(ROOT, "scripts", "soname")], check=True,
                                stdout=subprocess.PIPE, universal_newlines=True).stdout.split()[1]
        for src, name in ((STANDIN, "librdmacm.so.1"), (PRELOAD, "libcmsafe_preload.so"),
                          (LIBCMSAFE, soname)):
            shutil.copy(src, os.path.join(cls.dir, name))
        libs = {"secure": "libcmsafe_preload.so", "secure_api": soname}
        cc = os.environ.get("CC", "cc")
        for prog, lib in libs.items():
            exe = os.path.join(cls.dir, prog)
            subprocess.run([cc, "-o", exe, os.path.join(OBJ, prog + ".o"), "-Wl,--no-as-needed",
                            os.path.join(cls.dir, lib), os.path.join(cls.dir, "librdmacm.so.1"),
                            "-Wl,-rpath," + cls.dir], check=True)
            setuid = exe + "-setuid"
            shutil.copy(exe, setuid)
            os.chown(setuid, nobody.pw_uid, nobody.pw_gid)
            os.chmod(setuid, 0o4755)

    def secure_run(self, prog: str, setuid: bool, settings: dict[str, str],
                   *args: str) -> tuple[Run, str]:
        """PROG (setuid to nobody, or not) with SETTINGS, each a file name made a path in a
        directory anyone may write (so that a file made there cannot fail for want of
        permission): the run and that directory."""
        out = tempfile.mkdtemp(dir=self.dir)
        os.chmod(out, 0o777)
        env = {k: os.path.join(out, v) if v.endswith(".json") else v for k, v in settings.items()}
        exe = os.path.join(self.dir, prog + ("-setuid" if setuid else ""))
        r = run([exe, "1" if setuid else "0", *args], "raw", env)
        # No LD_PRELOAD: the preload, if any, is linked in.
        r.mode = "setuid to nobody" if setuid else "not setuid"
        self.assertStatus(r, 0)
        self.assertTrue(r.out_lines and r.out_lines[0].startswith(
            "AT_SECURE %d, uid 0, euid %d" % (setuid, pwd.getpwnam("nobody").pw_uid if setuid
                                             else 0)), r)
        return r, out

    PRELOAD_SETTINGS = {"CMSAFE_MODE": "safe", "CMSAFE_REPORT": SETTINGS_REPORT}
    API_SETTINGS = {"CMSAFE_FLIGHT_DUMP": FLIGHT_DUMP, "CMSAFE_LOG": "off"}

    def test_preload_takes_its_settings_when_not_setuid(self):
        r, out = self.secure_run("secure", False, self.PRELOAD_SETTINGS)
        self.assertSummary(r, "safe", events=1, findings=0)
        self.assertEqual(os.listdir(out), [SETTINGS_REPORT], r)

    def test_preload_ignores_its_settings_when_setuid(self):
        r, out = self.secure_run("secure", True, self.PRELOAD_SETTINGS)
        self.assertSummary(r, "audit", events=1, findings=0)
        self.assertEqual(os.listdir(out), [], r)

    def test_preload_says_no_address_to_a_setuid_programs_caller(self):
        # A finding's line carries the program's addresses (its id, its code): under AT_SECURE
        # the caller (nobody here) must not learn where a privileged program's heap and code
        # are. Counted in the summary, said nowhere.
        for setuid in (False, True):
            with self.subTest(setuid=setuid):
                r, _ = self.secure_run("secure", setuid, {}, "unacked")
                self.assertSummary(r, "audit", events=2, findings=1)
                lines = [l for l in r.err_lines if l.startswith("==cmsafe== never-acked:")]
                kinds = [l for l in r.err_lines if l.startswith("==cmsafe==   never-acked: 1")]
                self.assertEqual(len(kinds), 1, r)
                if setuid:
                    self.assertEqual(lines, [], r)
                    self.assertEqual(kinds, ["==cmsafe==   never-acked: 1"], r)
                    self.assertFalse(any("0x" in l for l in r.err_lines), r)
                else:
                    self.assertEqual(len(lines), 1, r)
                    self.assertIn("(first: ", kinds[0], r)

    def test_libcmsafe_takes_its_settings_when_not_setuid(self):
        r, out = self.secure_run("secure_api", False, self.API_SETTINGS)
        self.assertEqual(os.listdir(out), [FLIGHT_DUMP], r)
        self.assertFalse([line for line in r.err_lines if SECOND_ACK in line], r)

    def test_libcmsafe_warns_when_setuid_without_settings(self):
        r, _ = self.secure_run("secure_api", True, {})
        self.assertTrue([line for line in r.err_lines if SECOND_ACK in line], r)

    def test_libcmsafe_makes_no_flight_dump_when_setuid(self):
        r, out = self.secure_run("secure_api", True, self.API_SETTINGS)
        self.assertEqual(os.listdir(out), [], r)

    def test_libcmsafe_log_level_is_its_default_when_setuid(self):
        r, _ = self.secure_run("secure_api", True, self.API_SETTINGS)
        self.assertTrue([line for line in r.err_lines if SECOND_ACK in line], r)


if __name__ == "__main__":
    unittest.main()
