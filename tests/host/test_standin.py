"""The stand-in librdmacm itself: it exports what the preload and libcmsafe look for, at
librdmacm's version, and behaves as librdmacm where the tests rely on it."""

from __future__ import annotations

import os
import re
import subprocess
import unittest

from hostrun import LIBCMSAFE, MODES, ROOT, STANDIN, HostTest, program, run


def symbols(path: str, defined: bool) -> set[str]:
    """The versioned names PATH defines (DEFINED) or needs from elsewhere, as name@VERSION."""
    out = subprocess.run(["readelf", "--dyn-syms", "--wide", path], check=True,
                         stdout=subprocess.PIPE, universal_newlines=True).stdout
    found = set()
    for line in out.splitlines():
        f = line.split()
        if len(f) >= 8 and (f[6] != "UND") == defined and "@" in f[7]:
            found.add(re.sub("@+", "@", f[7]))
    return found


class Exports(HostTest):
    def test_every_librdmacm_call_the_preload_interposes_is_there_at_RDMACM_1_0(self):
        names = subprocess.run([os.path.join(ROOT, "c-tests", "lists", "interposed")], check=True,
                               stdout=subprocess.PIPE, universal_newlines=True).stdout.split()
        want = {n + "@RDMACM_1.0" for n in names if n.startswith("rdma_")}
        want.add("rdma_event_str@RDMACM_1.0")
        self.assertGreater(len(want), 15)
        self.assertEqual(want - symbols(STANDIN, True), set())

    def test_every_librdmacm_call_libcmsafe_makes_is_there(self):
        need = {s for s in symbols(LIBCMSAFE, False) if s.startswith("rdma_")}
        self.assertIn("rdma_get_cm_event@RDMACM_1.0", need)
        self.assertEqual(need - symbols(STANDIN, True), set())


class AsLibrdmacm(HostTest):
    def test_destroy_waits_for_an_event_handed_out_and_not_acked(self):
        r = run([program("events"), "destroy-unacked"])
        self.assertStatus(r, 3)
        self.assertEqual(r.out_lines, ["unacked in librdmacm: 1",
                                       "rdma_destroy_id still blocked after 500 ms"], r)

    def test_a_nonblocking_channel_says_EAGAIN_and_polls_as_its_queue(self):
        want = ["nothing queued: rdma_get_cm_event -1, EAGAIN; poll 0", "one queued: poll 1",
                "got and acked: poll 0"]
        for mode in ("raw",) + MODES:
            with self.subTest(mode=mode):
                r = run([program("events"), "nonblocking"], mode)
                self.assertStatus(r, 0)
                self.assertEqual(r.out_lines, want, r)


if __name__ == "__main__":
    unittest.main()
