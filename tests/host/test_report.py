"""The report file (CMSAFE_REPORT, preload/src/audit/report.rs): a file the preload writes is
new (O_EXCL), 0600, never reached through a symlink, never a FIFO or a device; when PATH exists
already, whatever it is, it is left untouched and the report goes to PATH.<pid>, said on stderr
in a `==cmsafe== report` line; a child after fork writes its own; a failed write is counted and
said. tests/host/programs/report.c makes the events."""

from __future__ import annotations

import json
import os
import re
import stat
import subprocess
import unittest

from hostrun import MODES, HostTest, Run, audit, program, run

EVENTS = 3
KEEP = b"the user's own file\n"


def records(path: str) -> list[dict]:
    """PATH's JSON records, one a line."""
    with open(path, "rb") as f:
        return [json.loads(line) for line in f.read().decode().splitlines()]


class ReportFile(HostTest):
    def report_run(self, path: str, mode: str = "audit", *args: str) -> Run:
        argv = [program("report")] + (list(args) or ["events", str(EVENTS)])
        return run(argv, mode, {"CMSAFE_REPORT": path}, timeout=1.5)

    def assertReport(self, path: str, r: Run, events: int = EVENTS) -> None:
        """PATH: whole JSON lines, EVENTS event records of R's process."""
        check = audit.check_report([path], nevents=str(events))
        self.assertEqual(check.problems, [], "%s\n%s" % (path, r))
        self.assertEqual({e["thread"] for e in check.events}, {r.pid}, r)

    def assertMovedAside(self, path: str, r: Run) -> None:
        """R left PATH alone: its report is PATH.<pid>, new and 0600, and one stderr line says
        so."""
        self.assertStatus(r, 0)
        moved = "%s.%d" % (path, r.pid)
        self.assertTrue(os.path.isfile(moved), "no report at PATH.<pid> %s:\n%s" % (moved, r))
        self.assertEqual(stat.S_IMODE(os.lstat(moved).st_mode), 0o600)
        self.assertReport(moved, r)
        said = [line for line in r.err_lines if "==cmsafe== report" in line]
        self.assertEqual(len(said), 1, "want one '==cmsafe== report' line:\n%s" % r)
        self.assertIn(moved, said[0])

    def test_a_new_file_is_made_0600_with_the_events(self):
        for mode in MODES:
            with self.subTest(mode=mode):
                path = os.path.join(self.tmpdir(), "report.json")
                r = self.report_run(path, mode)
                self.assertStatus(r, 0)
                self.assertEqual(stat.S_IMODE(os.lstat(path).st_mode), 0o600)
                self.assertReport(path, r)

    def test_pct_p_gives_the_child_its_own_file(self):
        d = self.tmpdir()
        r = self.report_run(os.path.join(d, "report-%p.json"), "audit", "fork")
        self.assertStatus(r, 0)
        child = int(r.out_lines[-1].split()[1])
        self.assertReport(os.path.join(d, "report-%d.json" % r.pid), r, events=2)
        kid = records(os.path.join(d, "report-%d.json" % child))
        self.assertEqual([e["thread"] for e in kid if e["record"] == "event"], [child])

    def existing(self, make) -> str:
        """PATH, made by MAKE(PATH) in a fresh directory."""
        path = os.path.join(self.tmpdir(), "report.json")
        make(path)
        return path

    def keep(self, path: str) -> None:
        with open(path, "wb") as f:
            f.write(KEEP)
        os.chmod(path, 0o644)

    def test_an_existing_file_is_left_untouched(self):
        path = self.existing(self.keep)
        r = self.report_run(path)
        with open(path, "rb") as f:
            self.assertEqual(f.read(), KEEP, r)
        self.assertEqual(stat.S_IMODE(os.lstat(path).st_mode), 0o644)
        self.assertMovedAside(path, r)

    def test_a_fifo_blocks_nothing(self):
        path = self.existing(os.mkfifo)
        r = self.report_run(path)
        self.assertFalse(r.hung, r)
        self.assertTrue(stat.S_ISFIFO(os.lstat(path).st_mode))
        self.assertMovedAside(path, r)

    def test_a_symlink_is_not_followed(self):
        target = os.path.join(self.tmpdir(), "target")
        self.keep(target)
        path = self.existing(lambda p: os.symlink(target, p))
        r = self.report_run(path)
        self.assertStatus(r, 0)
        with open(target, "rb") as f:
            self.assertEqual(f.read(), KEEP, r)
        self.assertEqual(os.readlink(path), target)

    def test_a_symlink_sends_the_report_to_pid_name(self):
        target = os.path.join(self.tmpdir(), "target")
        self.keep(target)
        path = self.existing(lambda p: os.symlink(target, p))
        self.assertMovedAside(path, self.report_run(path))

    def test_a_device_is_left_untouched(self):
        def null_device(p: str) -> None:
            try:
                os.mknod(p, 0o666 | stat.S_IFCHR, os.makedev(1, 3))
            except PermissionError as e:
                raise unittest.SkipTest("mknod of a device (/dev/null's numbers): %s" % e)

        path = self.existing(null_device)
        r = self.report_run(path)
        self.assertTrue(stat.S_ISCHR(os.lstat(path).st_mode))
        self.assertMovedAside(path, r)

    def test_a_child_without_pct_p_writes_its_own_file(self):
        for mode in MODES:
            with self.subTest(mode=mode):
                path = os.path.join(self.tmpdir(), "report.json")
                r = self.report_run(path, mode, "fork")
                self.assertStatus(r, 0)
                child = int(r.out_lines[-1].split()[1])
                self.assertReport(path, r, events=2)
                kid = "%s.%d" % (path, child)
                self.assertTrue(os.path.isfile(kid), "no report %s:\n%s" % (kid, r))
                self.assertEqual([e["thread"] for e in records(kid) if e["record"] == "event"],
                                 [child])


    def closeall_runs(self, then: str):
        """report closeall OWN THEN in each mode, each checked to leave OWN as the program wrote
        it: (mode, the run, the report's path, its directory) for each."""
        for mode in MODES:
            with self.subTest(mode=mode):
                d = self.tmpdir()
                path, own = os.path.join(d, "report.json"), os.path.join(d, "own")
                r = self.report_run(path, mode, "closeall", own, then)
                self.assertStatus(r, 0)
                with open(own, "rb") as f:
                    self.assertEqual(f.read(), b"program data\n", r)
                yield r, path, d

    def test_a_program_that_closes_the_reports_descriptor_never_gets_its_lines(self):
        # The program closes every descriptor above its channel's after the first event, then
        # makes a file of its own, which gets the report's old number (the program says it).
        for r, path, _ in self.closeall_runs("keep"):
            self.assertReport(path, r)
            said = [line for line in r.err_lines if "==cmsafe== report" in line]
            self.assertEqual(said, ["==cmsafe== report %s: the program closed its descriptor; "
                                    "reopened" % path], r)

    def test_a_closed_descriptor_and_a_removed_report_stop_the_report(self):
        # As above, the report removed before the close: the program's new file may get the
        # removed file's inode number too; nothing of ours lands in it, and the lines that
        # could not be written are counted (two events and the destroy record).
        for r, _, d in self.closeall_runs("unlink"):
            self.assertEqual(os.listdir(d), ["own"], r)
            self.assertIn("==cmsafe==   report: 3 records not written (the program closed its "
                          "descriptor and the file is no longer at its name: No such file or "
                          "directory (os error 2))", r.err_lines, r)

class FullFilesystem(HostTest):
    """The report on a tmpfs of 8 KiB, mounted for the test: most records cannot be written."""

    EVENTS = 200

    def setUp(self) -> None:
        if os.geteuid() != 0:
            self.skipTest("mounting a tmpfs needs root (CI runs as root)")
        self.full = os.path.join(self.tmpdir(), "full")
        os.mkdir(self.full)
        mount = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=8k", "tmpfs", self.full],
                               stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                               universal_newlines=True)
        if mount.returncode != 0:
            self.skipTest("cannot mount a tmpfs here: %s" % mount.stdout.strip())
        self.addCleanup(subprocess.run, ["umount", "-l", self.full])

    def test_failed_writes_are_said_once_and_counted_at_exit(self):
        for mode in MODES:
            with self.subTest(mode=mode):
                path = os.path.join(self.full, "report-%s.json" % mode)
                r = run([program("report"), "events", str(self.EVENTS)], mode,
                        {"CMSAFE_REPORT": path}, timeout=2.0)
                self.assertStatus(r, 0)
                with open(path, "rb") as f:
                    text = f.read().decode("utf-8", "replace")
                    whole = text.split("\n")[:-1]
                os.unlink(path)
                # Each event's record and the destroy's; a record cut short is not written.
                lost = self.EVENTS + 1 - len(whole)
                self.assertGreater(lost, 100, "the tmpfs took %d records" % len(whole))
                said = [line for line in r.err_lines if "==cmsafe== report" in line]
                self.assertEqual(len(said), 1, "want one '==cmsafe== report' line:\n%s" % r)
                self.assertIn("No space left on device", said[0])
                counted = [line for line in r.err_lines if line.startswith("==cmsafe==")
                           and "report:" in line and str(lost) in re.findall("[0-9]+", line)]
                self.assertTrue(counted, "no summary line with 'report:' and the %d records "
                                "not written:\n%s" % (lost, r))


if __name__ == "__main__":
    unittest.main()
