"""cmsafe-lint's command line (bin/cmsafe-lint): output lines, exit status, bad input."""

import json
import os
import shutil
import sys
import tempfile
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import command  # noqa: E402

LEAK = command.LEAK
CLEAN = LEAK.replace("        return 1;\n", "        return rdma_ack_cm_event(ev), 1;\n")


def run(*args, cwd=None, env=None):
    return command.run("cmsafe-lint", *args, cwd=cwd, env=env)


class Cli(unittest.TestCase):
    def setUp(self):
        self.dir = tempfile.mkdtemp(prefix="cmsafe-lint-test-")

    def tearDown(self):
        shutil.rmtree(self.dir)

    def write(self, name, text):
        path = os.path.join(self.dir, name)
        with open(path, "w") as f:
            f.write(text)
        return path

    def test_finding_line_and_status(self):
        self.write("leak.c", LEAK)
        rc, out, err = run("leak.c", cwd=self.dir)
        self.assertEqual(rc, 1)
        self.assertEqual(out, "leak.c:8:9: warning: never-acked: the event `ev` got at line 5 "
                              "is not acked on this path (returns here)\n")
        self.assertEqual(err, "cmsafe-lint: 1 file, 1 finding\n")

    def test_clean_file(self):
        self.write("clean.c", CLEAN)
        rc, out, err = run("clean.c", cwd=self.dir)
        self.assertEqual((rc, out, err), (0, "", "cmsafe-lint: 1 file, 0 findings\n"))

    def test_directory_reads_only_files_with_event_calls(self):
        self.write("leak.c", LEAK)
        self.write("other.c", "int g(void) { return 0; }\n")
        rc, out, err = run(self.dir)
        self.assertEqual(rc, 1)
        self.assertEqual(err, "cmsafe-lint: 1 file, 1 finding\n")

    def test_json(self):
        self.write("leak.c", LEAK)
        rc, out, _ = run("--json", "leak.c", cwd=self.dir)
        self.assertEqual(rc, 1)
        self.assertEqual(json.loads(out), {
            "file": "leak.c", "line": 8, "column": 9, "severity": "warning",
            "kind": "never-acked",
            "message": "the event `ev` got at line 5 is not acked on this path (returns here)"})

    def test_missing_file(self):
        rc, out, err = run("no-such.c", cwd=self.dir)
        self.assertEqual((rc, out), (2, ""))
        self.assertEqual(err, "cmsafe-lint: no-such.c: no such file or directory\n")

    def test_no_argument_is_a_usage_error(self):
        rc, out, err = run()
        self.assertEqual((rc, out), (2, ""))
        self.assertTrue(err.startswith("cmsafe-lint: the following arguments are required"))
        self.assertEqual(len(err.splitlines()), 2)

    def test_a_file_name_cannot_forge_a_line(self):
        name = "a\nb.c:1:1: warning: forged.c"
        self.write(name, LEAK)
        rc, out, _ = run(name, cwd=self.dir)
        self.assertEqual(rc, 1)
        self.assertEqual(len(out.splitlines()), 1)
        self.assertTrue(out.startswith("a\\nb.c:1:1: warning: forged.c:8:9: warning: never-acked"))

    def test_unparsable_function_is_a_note(self):
        self.write("bad.c", "#include <rdma/rdma_cma.h>\n"
                            "int f(struct rdma_event_channel *ch) {\n"
                            "    struct rdma_cm_event *ev;\n"
                            "    MACRO_THAT_OPENS {\n"
                            "    rdma_get_cm_event(ch, &ev);\n"
                            "    return 0;\n"
                            "}\n")
        rc, out, _ = run("bad.c", cwd=self.dir)
        self.assertEqual(rc, 0)
        self.assertEqual(out, "bad.c:2:1: note: not-checked: spatch could not parse f(): its "
                              "events are not checked\n")

    def test_a_long_parenthesized_argument_is_read_at_once(self):
        # SPDK's sources once held cmsafe-lint for hours in the reading of such an argument (a
        # cast's pattern that backtracked through every split of a long name): minutes here.
        name = "remote_queue_pair_with_a_rather_long_name_of_its_own"
        self.write("long.c", LEAK.replace("return 1;", "return report((%s + 1)->status);" % name))
        rc, out, _ = run("long.c", cwd=self.dir)
        self.assertEqual(rc, 1)
        self.assertTrue(out.startswith("long.c:8:9: warning: never-acked: "), out)

    def test_the_environment_sets_no_time_limit(self):
        # The per-file limit is the package's own: no variable can turn it into a traceback
        # at import (as a non-number in CMSAFE_LINT_SPATCH_TIMEOUT once did).
        self.write("leak.c", LEAK)
        env = dict(os.environ, CMSAFE_LINT_SPATCH_TIMEOUT="abc")
        rc, out, err = run("leak.c", cwd=self.dir, env=env)
        self.assertEqual((rc, err), (1, "cmsafe-lint: 1 file, 1 finding\n"))
        self.assertTrue(out.startswith("leak.c:8:9: warning: never-acked: "), out)

    def test_spatch_missing(self):
        empty = os.path.join(self.dir, "bin")
        os.mkdir(empty)
        env = dict(os.environ, PATH=empty)
        self.write("leak.c", LEAK)
        rc, _, err = run("leak.c", cwd=self.dir, env=env)
        self.assertEqual(rc, 3)
        self.assertEqual(err, "cmsafe-lint: spatch (Coccinelle) is not installed: "
                              "scripts/setup-deps --lint, or apt-get install coccinelle\n")


if __name__ == "__main__":
    unittest.main()
