"""cmsafe-migrate (bin/cmsafe-migrate): its patch on small programs, exactly; the ported file
compiles against include/cmsafe.h; what it leaves and says; bad input."""

import os
import shutil
import subprocess
import sys
import tempfile
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))
sys.path.insert(0, HERE)

import command  # noqa: E402
from cmsafe_lint import migrate  # noqa: E402

ROOT = command.ROOT

# The helpers' lines, added once after the includes.
HELPER_LINES = {"+" + l for l in (migrate.HELPERS + migrate.RELEASE + migrate.KEPT).splitlines()}

SERVER = """#include <stdio.h>
#include <string.h>
#include <rdma/rdma_cma.h>

int handle(struct rdma_cm_event *ev);

int serve(struct rdma_event_channel *ch, char *out)
{
    struct rdma_cm_event *ev;
    if (rdma_get_cm_event(ch, &ev))
        return -1;
    const char *pdata = ev->param.conn.private_data;
    rdma_ack_cm_event(ev);
    memcpy(out, pdata, 8);
    return 0;
}

void loop(struct rdma_event_channel *ch)
{
    struct rdma_cm_event *event;
    while (!rdma_get_cm_event(ch, &event)) {
        printf("%s\\n", rdma_event_str(event->event));
        rdma_ack_cm_event(event);
    }
}

void handed(struct rdma_event_channel *ch)
{
    struct rdma_cm_event *event;
    if (!rdma_get_cm_event(ch, &event))
        handle(event);
}

int early(struct rdma_event_channel *ch)
{
    struct rdma_cm_event *ev;
    if (rdma_get_cm_event(ch, &ev))
        return -1;
    if (ev->event != RDMA_CM_EVENT_ESTABLISHED)
        return -1;
    rdma_ack_cm_event(ev);
    return 0;
}

int status(struct rdma_event_channel *ch)
{
    struct rdma_cm_event *ev;
    if (rdma_get_cm_event(ch, &ev))
        return -1;
    if (ev->status)
        return ev->status;
    rdma_ack_cm_event(ev);
    return 0;
}
"""


def run(*args, cwd):
    return command.run("cmsafe-migrate", *args, cwd=cwd)


class Migrate(unittest.TestCase):
    def setUp(self):
        self.dir = tempfile.mkdtemp(prefix="cmsafe-migrate-test-")
        with open(os.path.join(self.dir, "server.c"), "w") as f:
            f.write(SERVER)

    def tearDown(self):
        shutil.rmtree(self.dir)

    def test_the_patch_and_what_it_says(self):
        rc, out, err = run("server.c", cwd=self.dir)
        self.assertEqual(rc, 0)
        self.assertEqual(err.splitlines(), [
            "cmsafe-migrate: server.c: serve(): `ev` ported (read after its ack: its copy is "
            "kept until the next get or the return)",
            "cmsafe-migrate: server.c: loop(): `event` ported",
            "cmsafe-migrate: server.c: handed(): `event` left on librdmacm's calls: `event` is "
            "handed to handle() (line 31), which may keep it",
            "cmsafe-migrate: server.c: early(): `ev` ported",
            "cmsafe-migrate: server.c: early(): `ev` is not acked on the path at line 40: its "
            "copy is released before each return",
            "cmsafe-migrate: server.c: status(): `ev` ported",
            "cmsafe-migrate: server.c: status(): `ev` is not acked on the path at line 51: a "
            "path never acks `ev` (line 51) and a return reads it (line 51): that path keeps its "
            "copy, as the original kept librdmacm's event"])
        changed = [l for l in out.splitlines() if l[:1] in "+-" and l[:3] not in ("+++", "---")]
        self.assertTrue(HELPER_LINES <= set(changed))
        body = [l for l in changed if l not in HELPER_LINES]
        self.assertEqual(body, [
            "+#include <cmsafe.h>",
            "-    if (rdma_get_cm_event(ch, &ev))",
            "+    cmsafe_event *ev_ref = NULL;",
            "+    if (cmsafe_migrate_get(ch, &ev_ref, &ev)) {",
            "+        cmsafe_event_release(ev_ref);",
            "+    }",
            "-    rdma_ack_cm_event(ev);",
            "+    cmsafe_migrate_kept(ev_ref);",
            "+    cmsafe_event_release(ev_ref);",
            "-    while (!rdma_get_cm_event(ch, &event)) {",
            "+    cmsafe_event *event_ref = NULL;",
            "+    while (!cmsafe_migrate_get(ch, &event_ref, &event)) {",
            "-        rdma_ack_cm_event(event);",
            "+        cmsafe_migrate_release(&event_ref);",
            "+    /* cmsafe-migrate: left on librdmacm's calls: `event` is handed to handle() "
            "(line 31), which may keep it; or build this file with cmsafe_compat.h */",
            # early(): the path out at line 40 never acked; each return releases the copy (a
            # no-op where the ack came first: the handle is NULL then).
            "-    if (rdma_get_cm_event(ch, &ev))",
            "+    cmsafe_event *ev_ref = NULL;",
            "+    if (cmsafe_migrate_get(ch, &ev_ref, &ev)) {",
            "+        cmsafe_event_release(ev_ref);",
            "-    if (ev->event != RDMA_CM_EVENT_ESTABLISHED)",
            "+    }",
            "+    if (ev->event != RDMA_CM_EVENT_ESTABLISHED) {",
            "+        cmsafe_event_release(ev_ref);",
            "-    rdma_ack_cm_event(ev);",
            "+    }",
            "+    cmsafe_migrate_release(&ev_ref);",
            "+    cmsafe_event_release(ev_ref);",
            # status(): the unacked path's return reads the event: its copy stays, said.
            "-    if (rdma_get_cm_event(ch, &ev))",
            "+    cmsafe_event *ev_ref = NULL;",
            "+    /* cmsafe-migrate: a path never acks `ev` (line 51) and a return reads it (line "
            "51): that path keeps its copy, as the original kept librdmacm's event; release it "
            "(cmsafe_event_release) where that path ends */",
            "+    if (cmsafe_migrate_get(ch, &ev_ref, &ev))",
            "-    rdma_ack_cm_event(ev);",
            "+    cmsafe_migrate_release(&ev_ref);"])

    def test_the_port_compiles_against_the_header(self):
        rc, out, _ = run("--in-place", "server.c", cwd=self.dir)
        self.assertEqual((rc, out), (0, ""))
        cc = subprocess.run(["cc", "-std=c11", "-Wall", "-Wextra", "-Werror", "-fsyntax-only",
                             "-I", os.path.join(ROOT, "include"), "server.c"],
                            cwd=self.dir, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                            text=True)
        self.assertEqual((cc.returncode, cc.stdout), (0, ""))

    def test_compat(self):
        rc, out, _ = run("--compat", "server.c", cwd=self.dir)
        self.assertEqual(rc, 0)
        self.assertIn("+#include <cmsafe_compat.h>\n #include <stdio.h>\n", out)
        self.assertEqual(sum(1 for l in out.splitlines() if l.startswith("-")), 1)  # the ---

    def test_nothing_to_port(self):
        with open(os.path.join(self.dir, "sync.c"), "w") as f:
            f.write("#include <rdma/rdma_cma.h>\nint f(void) { return 0; }\n")
        rc, out, err = run("sync.c", cwd=self.dir)
        self.assertEqual((rc, out), (0, ""))
        self.assertEqual(err, "cmsafe-migrate: sync.c: no rdma_get_cm_event or "
                              "rdma_ack_cm_event here: nothing to port (the events of a "
                              "synchronous id are librdmacm's own)\n")

    def test_bad_input(self):
        os.mkfifo(os.path.join(self.dir, "fifo.c"))
        self.assertEqual(run("fifo.c", cwd=self.dir),
                         (2, "", "cmsafe-migrate: fifo.c: not a regular file\n"))
        self.assertEqual(run("none.c", cwd=self.dir),
                         (2, "", "cmsafe-migrate: none.c: no such file or directory\n"))
        rc, out, err = run(cwd=self.dir)
        self.assertEqual((rc, out), (2, ""))
        self.assertEqual(err.splitlines()[-1],
                         "usage: cmsafe-migrate [--compat] [--in-place] [--macros FILE] FILE...")


if __name__ == "__main__":
    unittest.main()
