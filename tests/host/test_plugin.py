"""Events got by a plugin of the program are the program's, whatever the plugin's file is called:
only librdmacm's own gets are librdmacm's business (preload/src/sys/whereis.rs). The plugin
(tests/host/programs/helper_plugin.c) is built under two names, dlopen'ed before any CM call, and
gets an event nobody acks."""

from __future__ import annotations

import os
import unittest

from hostrun import LIB, MODES, HostTest, program, run


class PluginEvents(HostTest):
    def assertNeverAcked(self, plugin: str) -> None:
        for mode in MODES:
            with self.subTest(mode=mode):
                r = run([program("plugin"), os.path.join(LIB, plugin)], mode)
                self.assertStatus(r, 0)
                self.assertLine(r, "the plugin got ESTABLISHED")
                self.assertFinding(r, "never-acked", "1", "ESTABLISHED")
                self.assertSummary(r, mode, events=1, findings=1)

    def test_a_plugin_gets_the_finding(self):
        self.assertNeverAcked("libmy-helper.so")

    def test_a_plugin_named_like_librdmacm_gets_the_finding(self):
        self.assertNeverAcked("libmy-librdmacm-helper.so")


if __name__ == "__main__":
    unittest.main()
