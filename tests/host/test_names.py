"""Names from outside the preload (the program's argv[0], as dladdr(3) gives the main program's
name; object and symbol names) are escaped on its stderr lines (preload/src/sys/printable.rs):
a newline or an escape sequence in a program's name must not end a line of ours or forge one
(`==cmsafe== summary`, which people and harnesses read)."""

from __future__ import annotations

import os
import unittest

from hostrun import HostTest, program, run

FORGED = "==cmsafe== summary: pid 1, mode audit, 0 events, 0 findings"


class ProgramName(HostTest):
    def test_a_newline_in_argv0_forges_no_line(self):
        d = self.tmpdir()
        name = os.path.join(d, "srv\n" + FORGED + "\x1b[2J")
        os.symlink(program("events"), name)
        r = run([name, "use-after-ack", "token"], "audit")
        self.assertStatus(r, 0)
        self.assertNotIn(FORGED, r.err_lines, r)
        self.assertEqual(len([l for l in r.err_lines if l.startswith("==cmsafe== summary:")]), 1, r)
        self.assertFalse(any("\x1b" in l for l in r.err_lines), r)
        # The summary's example names the faulting code in the program, by its escaped name.
        self.assertTrue(any("srv\\n" + FORGED + "\\x1b[2J+0x" in l for l in r.err_lines), r)
        self.assertFinding(r, "use-after-ack", "1", "CONNECT_REQUEST")


if __name__ == "__main__":
    unittest.main()
