"""The rules on small programs (tests/cases/*.c): each line that must get a finding ends with
`expect: KIND` (a warning) or `expect-note: KIND` (a note), and every other line must get
none. One lint run over all the cases (their helpers' names do not collide: each file's own
definition wins)."""

import glob
import os
import re
import sys
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))

from cmsafe_lint import lint  # noqa: E402

CASES = sorted(glob.glob(os.path.join(HERE, "cases", "*.c")))
_EXPECT = re.compile(r"/\* expect(-note)?: ([a-z-]+) \*/")


def expected(path):
    out = set()
    with open(path, encoding="utf-8") as f:
        for n, line in enumerate(f, 1):
            for m in _EXPECT.finditer(line):
                out.add((n, m.group(2), "note" if m.group(1) else "warning"))
    return out


def line_of(path, text):
    with open(path, encoding="utf-8") as f:
        for n, line in enumerate(f, 1):
            if text in line:
                return n
    raise AssertionError("%s: no line holds %r" % (path, text))


class Rules(unittest.TestCase):
    found = None

    @classmethod
    def setUpClass(cls):
        _, findings = lint.run(CASES)
        cls.found = {}
        for f in findings:
            cls.found.setdefault(os.path.abspath(f.file), set()).add((f.line, f.kind, f.severity))
        cls.messages = {(os.path.abspath(f.file), f.line, f.kind): f.message for f in findings}

    def check(self, name):
        path = os.path.join(HERE, "cases", name)
        got = self.found.get(path, set())
        want = expected(path)
        missing = sorted(want - got)
        extra = sorted(got - want)
        detail = "".join("\n  unexpected %s:%d %s %s: %s" % (
            name, line, sev, kind, self.messages.get((path, line, kind), ""))
            for line, kind, sev in extra)
        self.assertEqual((missing, extra), ([], []),
                         "%s: missing %s%s" % (name, missing, detail))

    def test_every_case_has_expectations(self):
        for path in CASES:
            self.assertTrue(expected(path), "%s expects nothing" % path)

    def test_use_after_ack(self):
        self.check("cm_use_after_ack.c")

    def test_never_acked(self):
        self.check("cm_never_acked.c")

    def test_double_and_foreign_ack(self):
        self.check("cm_acks.c")

    def test_calls_that_wait(self):
        self.check("cm_held.c")

    def test_after_destroy(self):
        self.check("after_destroy.c")

    def test_completion_events(self):
        self.check("cq.c")

    def test_async_events(self):
        self.check("async.c")

    def test_messages_name_the_lines(self):
        # The message of a use-after-ack names the ack's line; a never-acked's the get's.
        path = os.path.join(HERE, "cases", "cm_use_after_ack.c")
        use = line_of(path, "return ev->status; /* expect")
        msg = self.messages[(path, use, "use-after-ack")]
        self.assertEqual(msg, "`ev` used after rdma_ack_cm_event(ev) at line %d freed it"
                         % (use - 1))
        path = os.path.join(HERE, "cases", "cm_never_acked.c")
        ret = line_of(path, "return ev->status; /* expect")
        msg = self.messages[(path, ret, "never-acked")]
        self.assertEqual(msg, "the event `ev` got at line %d is not acked on this path "
                              "(returns here)" % (ret - 3))


if __name__ == "__main__":
    unittest.main()
