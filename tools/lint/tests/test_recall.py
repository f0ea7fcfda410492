"""The recall set: every misuse program of c-tests/preload/ (misuse_*.c, preload_*.c), linted
with its helpers (c-tests/preload/raw_util.c), must get exactly the findings below, each at the line its misuse
is on (found by the text the line holds); a program whose misuse is not visible in its source
is listed with the reason; every other program must get none. A new program there must be
added here, one way or the other."""

import glob
import os
import sys
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))
CTESTS = os.path.normpath(os.path.join(HERE, "..", "..", "..", "c-tests", "preload"))

from cmsafe_lint import lint  # noqa: E402

W, N = "warning", "note"

# program: [(kind, severity, text on the line, which occurrence of it, lines after it)]
FOUND = {
    "misuse_use_after_ack.c": [
        ("use-after-ack", W, "ssize_t n = write(pipefd[1], pdata, sizeof got);", 1, 0),
        ("use-after-ack", W, "memcpy(got, pdata, sizeof got); /* the misuse", 1, 0),
    ],
    "misuse_never_acked.c": [
        # main returns with the CONNECT_REQUEST unacked: the process ends there (a note).
        ("never-acked", N, "return harness_exit();", 1, 0),
    ],
    "misuse_double_ack.c": [
        ("double-ack", W, "int rc = rdma_ack_cm_event(ev); /* the misuse */", 1, 0),
    ],
    "misuse_double_ack_after_accept.c": [
        ("double-ack", W, "int rc = rdma_ack_cm_event(req); /* the misuse */", 1, 0),
    ],
    "misuse_foreign_ack.c": [
        ("foreign-ack", W, "int rc = rdma_ack_cm_event(&copy->event); /* the misuse", 1, 0),
    ],
    "misuse_destroy_with_unacked.c": [
        # client: the REJECTED another thread got and left unacked, then the destroy; the
        # channel destroyed with it still unacked; never acked at all.
        ("destroy-with-unacked", W, "int rc = rdma_destroy_id(client);", 1, 0),
        ("channel-destroy-with-unacked", W, "rdma_destroy_event_channel(ch);", 1, 0),
        ("never-acked", W, "rdma_destroy_event_channel(ch);", 1, 1),
        # listener: the CONNECT_REQUEST holds the listen id, not the child.
        ("destroy-with-unacked", W, "int rc = rdma_destroy_id(listen_id);", 1, 0),
        ("channel-destroy-with-unacked", W, "rdma_destroy_event_channel(sch);", 1, 0),
        ("never-acked", W, "rdma_destroy_event_channel(sch);", 1, 1),
    ],
    "misuse_destroy_on_disconnect.c": [
        # The connection's id (c->id, three calls down from the handler), destroyed while the
        # dispatcher holds the DISCONNECTED: the event's own id only at run time, so "if".
        ("destroy-in-own-handler", W, "int rc = rdma_destroy_id(c->id);", 1, 0),
    ],
    "misuse_destroy_in_own_handler.c": [
        ("destroy-in-own-handler", W, "int rc = rdma_destroy_id(ev->id);", 1, 0),
    ],
    "misuse_migrate_with_unacked.c": [
        ("migrate-with-unacked", W, "int rc = rdma_migrate_id(p.child, nch);", 1, 0),
    ],
    "misuse_channel_destroy_with_unacked.c": [
        ("channel-destroy-with-unacked", W, "rdma_destroy_event_channel(ch); /* the misuse", 1,
         0),
    ],
    "misuse_qp_destroy_before_ack.c": [
        ("qp-destroy-before-ack", W, "rdma_destroy_qp(p.child); /* the misuse */", 1, 0),
    ],
    "misuse_qp_then_destroy.c": [
        ("qp-destroy-before-ack", W, "rdma_destroy_qp(p.child);", 1, 0),
        ("destroy-in-own-handler", W, "CHECK_EQ_INT(rdma_destroy_id(p.child), 0);", 1, 0),
    ],
    "misuse_destroyed_id.c": [
        ("use-after-destroy-id", W, "int rc = rdma_reject(child, NULL, 0);", 1, 0),
    ],
    "misuse_retry_after_reject.c": [
        ("use-after-destroy-id", W, "int rc = rdma_resolve_addr(slot.id, NULL", 1, 0),
    ],
    "misuse_rejected_not_destroyed.c": [
        # both modes' ids are left alive when main returns
        ("rejected-id-never-destroyed", N, "return harness_exit();", 1, 0),
    ],
    "misuse_cq_destroy_with_unacked.c": [
        ("cq-destroy-with-unacked", W, 'raw_destroy_cq(got, "cq");', 1, 0),
        ("cq-ack-after-destroy", W, "ibv_ack_cq_events(got, 1);", 1, 0),
    ],
    "misuse_cq_wrong_ack.c": [
        ("cq-ack-wrong-cq", W, "ibv_ack_cq_events(other, 1);", 1, 0),
    ],
    "misuse_cq_over_ack.c": [
        ("cq-over-ack", W, "ibv_ack_cq_events(cq, 2);", 1, 0),
    ],
    "misuse_cq_never_acked.c": [
        ("cq-never-acked", N, "return harness_exit();", 1, 0),
    ],
    "misuse_async_destroy_with_unacked.c": [
        ("async-destroy-with-unacked", W, 'raw_destroy_cq(cq, "cq");', 1, 0),
        ("async-destroy-with-unacked", W, "rdma_destroy_qp(p.client);", 1, 0),
    ],
    "misuse_async_double_ack.c": [
        ("async-double-ack", W, "ibv_ack_async_event(&ev);", 2, 0),
    ],
    "misuse_async_never_acked.c": [
        ("async-never-acked", N, "return harness_exit();", 1, 0),
    ],
    # A deliberate hold in a test of cancellation: the event stays unacked to the end.
    "preload_cancel.c": [
        ("never-acked", N, "return harness_exit();", 1, 0),
    ],
}

# Programs whose misuse no single path of the source shows.
NOT_VISIBLE = {
    "misuse_late_ack.c": "late-ack is a duration (the event held 1500 ms before its ack): the "
                         "source holds it only as a sleep's argument, and the lint reads paths, "
                         "not times",
    "misuse_use_after_ack_threads.c": "the reads are in other threads (read_acked), ordered "
                                      "after the main thread's acks by a barrier: no path of "
                                      "one thread holds the ack and the read",
    "misuse_destroyed_channel.c": "the main thread destroys the channel while the CM thread "
                                  "waits between two gets, in order by a condition variable: "
                                  "the destroy and the get are on two threads' paths",
    "preload_lost_event.c": "the event is read past librdmacm (read(2) of the channel's fd) or "
                            "lost to a thread cancelled inside rdma_get_cm_event: nothing in "
                            "the source names an event",
    "preload_read_without_ids.c": "a race of two threads (poll, destroy, then get): the get "
                                  "that never returns is on the reader's path, the destroy "
                                  "on the main thread's",
}


def resolve(path, text, nth, after):
    seen = 0
    with open(path, encoding="utf-8") as f:
        for n, line in enumerate(f, 1):
            if text in line:
                seen += 1
                if seen == nth:
                    return n + after
    raise AssertionError("%s: no occurrence %d of %r" % (path, nth, text))


class Recall(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.programs = sorted(os.path.basename(p) for p in
                              glob.glob(os.path.join(CTESTS, "misuse_*.c")) +
                              glob.glob(os.path.join(CTESTS, "preload_*.c")))
        files = [os.path.join(CTESTS, p) for p in cls.programs]
        _, findings = lint.run(files + [os.path.join(CTESTS, "raw_util.c"),
                                        os.path.join(CTESTS, os.pardir, "rxe_setup.c")])
        cls.found = {}
        for f in findings:
            cls.found.setdefault(os.path.basename(f.file), set()).add(
                (f.kind, f.severity, f.line))

    def test_every_program_is_decided(self):
        undecided = [p for p in self.programs if p not in FOUND and p not in NOT_VISIBLE
                     and not p.startswith("preload_")]
        self.assertEqual(undecided, [], "misuse programs neither found nor said not visible")
        for p in list(FOUND) + list(NOT_VISIBLE):
            self.assertIn(p, self.programs, "%s is listed but not in c-tests" % p)

    def test_found_at_their_lines(self):
        for p in self.programs:
            want = set()
            for kind, sev, text, nth, after in FOUND.get(p, []):
                want.add((kind, sev, resolve(os.path.join(CTESTS, p), text, nth, after)))
            with self.subTest(program=p):
                self.assertEqual(sorted(self.found.get(p, set())), sorted(want))

    def test_helpers_get_none(self):
        self.assertEqual(self.found.get("raw_util.c", set()), set())


if __name__ == "__main__":
    unittest.main()
