"""The baseline: the classic misuses of CM events, said by the preload as on the real stack
(c-tests/preload/misuse_*.c do the same there), on the stand-in librdmacm."""

from __future__ import annotations

import json
import os
import re
import unittest

from hostrun import MODES, HostTest, program, run

# Printable and without a backslash: the programs print it as it is.
TOKEN = "cmsafe host test: private data 0123456789"


def after_the_ack(r) -> list[str]:
    return [line for line in r.out_lines if line.startswith("after the ack: ")]


class UseAfterAck(HostTest):
    """A CONNECT_REQUEST carrying TOKEN, acked, then its private data read."""

    argv = [program("events"), "use-after-ack", TOKEN]

    def test_raw_reads_freed_memory_without_crashing(self):
        r = run(self.argv)
        self.assertStatus(r, 0)
        self.assertLine(r, "before the ack: " + TOKEN)
        self.assertEqual(len(after_the_ack(r)), 1, r)

    def test_audit_says_the_read_and_the_program_reads_the_bytes_queued(self):
        r = run(self.argv, "audit")
        self.assertStatus(r, 0)
        self.assertEqual(after_the_ack(r), ["after the ack: " + TOKEN], r)
        self.assertFinding(r, "use-after-ack", "1", "CONNECT_REQUEST")
        self.assertSummary(r, "audit", events=1, findings=1)
        self.assertKindCount(r, "use-after-ack", 1)

    def test_the_read_is_a_finding_record_in_the_report(self):
        # The fault is taken in by the next call that has nothing of its own to say (here the
        # destroys after the read): its record goes to the report all the same.
        for mode in ("audit", "audit+mprotect"):
            with self.subTest(mode=mode):
                path = os.path.join(self.tmpdir(), "r.json")
                r = run(self.argv, mode, {"CMSAFE_REPORT": path})
                self.assertStatus(r, 0)
                with open(path) as f:
                    recs = [json.loads(line) for line in f]
                got = [(o["record"], o.get("finding"), o.get("seq"), o.get("type")) for o in recs
                       if o["record"] in ("event", "finding")]
                self.assertEqual(sorted(got, key=str), sorted([
                    ("event", None, 1, "CONNECT_REQUEST"),
                    ("finding", "use-after-ack", 1, "CONNECT_REQUEST")], key=str), recs)

    def test_safe_ack_then_read_gives_the_bytes_queued(self):
        r = run(self.argv, "safe")
        self.assertStatus(r, 0)
        self.assertEqual(after_the_ack(r), ["after the ack: " + TOKEN], r)
        self.assertNoFinding(r)
        self.assertSummary(r, "safe", events=1, findings=0)


class NeverAckedAndDoubleAck(HostTest):
    def test_an_event_never_acked_is_said_at_exit(self):
        for mode in MODES:
            with self.subTest(mode=mode):
                r = run([program("events"), "never-acked"], mode)
                self.assertStatus(r, 0)
                self.assertFinding(r, "never-acked", "1", "ESTABLISHED")
                self.assertSummary(r, mode, events=1, findings=1)
                self.assertKindCount(r, "never-acked", 1)

    def test_a_second_ack_is_said_and_swallowed(self):
        # Raw, librdmacm would free the event twice: only the preload's runs.
        for mode in MODES:
            with self.subTest(mode=mode):
                r = run([program("events"), "double-ack"], mode)
                self.assertStatus(r, 0)
                self.assertLine(r, "acked twice")
                self.assertFinding(r, "double-ack", "1", "ESTABLISHED")
                self.assertSummary(r, mode, events=1, findings=1)
                self.assertKindCount(r, "double-ack", 1)


class DestroyWithUnacked(HostTest):
    """rdma_destroy_id of an id whose event the program never acked (raw, it waits for good:
    test_standin.AsLibrdmacm)."""

    argv = [program("events"), "destroy-unacked"]

    def test_safe_destroy_does_not_wait(self):
        r = run(self.argv, "safe")
        self.assertStatus(r, 0)
        self.assertEqual(r.out_lines, ["unacked in librdmacm: 0", "rdma_destroy_id returned"], r)
        self.assertFinding(r, "destroy-in-own-handler", "1", "ESTABLISHED")

    def test_audit_says_it_and_waits_as_raw(self):
        r = run(self.argv, "audit")
        self.assertStatus(r, 3)
        self.assertEqual(r.out_lines, ["unacked in librdmacm: 1",
                                       "rdma_destroy_id still blocked after 500 ms"], r)
        self.assertFinding(r, "destroy-in-own-handler", "1", "ESTABLISHED")


class DestroyQpWithAnotherThreadsEvent(HostTest):
    """rdma_destroy_qp while an event thread holds the id's DISCONNECTED for 800 ms: librdmacm's
    call waits for no ack, so audit's returns first too (it waited up to CMSAFE_LATE_ACK_MS for
    the ack, so with 5000 it returned after it); the finding comes at the ack, when that is more
    than CMSAFE_LATE_ACK_MS after the call."""

    argv = [program("events"), "destroy-qp-held", "800"]

    def test_every_mode_returns_before_the_ack(self):
        for mode in ("raw",) + MODES:
            with self.subTest(mode=mode):
                r = run(self.argv, mode, env={"CMSAFE_LATE_ACK_MS": "5000"})
                self.assertStatus(r, 0)
                self.assertEqual(r.out_lines, ["rdma_destroy_qp returned before the ack"], r)
                if mode != "raw":
                    self.assertNoFinding(r)

    def test_an_ack_past_the_grace_is_said_at_the_ack(self):
        r = run(self.argv, "audit", env={"CMSAFE_LATE_ACK_MS": "200"})
        self.assertStatus(r, 0)
        self.assertEqual(r.out_lines, ["rdma_destroy_qp returned before the ack"], r)
        said = [line for line in r.err_lines if line.startswith("==cmsafe== qp-destroy-before-ack: ")]
        self.assertEqual(len(said), 1, r)
        self.assertIn("seq=1 type=DISCONNECTED", said[0])
        self.assertRegex(said[0], r"acked by another thread [0-9.]+ ms after this call, "
                                  r"past CMSAFE_LATE_ACK_MS=200\)")
        self.assertSummary(r, "audit", 1, 2)


class SafeCopiesOfDestroyedIds(HostTest):
    """Safe mode's copy of an event the program never acked goes with its id's destroy, as the
    acked ones do: 60,000 such ids leave the resident set where it was after the first 20,000
    (kept to exit, each copy's slot and record grew it by 16 MiB over those 40,000; the
    records of the last 4,096 are kept, for a late ack)."""

    N = 60000

    def test_the_resident_set_stays_flat(self):
        r = run([program("events"), "destroy-never-acked", str(self.N)], "safe", timeout=30)
        self.assertStatus(r, 0)
        m = re.fullmatch(r"resident after 20000: (\d+) KiB, after %d: (\d+) KiB" % self.N,
                         r.out_lines[-1] if r.out_lines else "")
        self.assertIsNotNone(m, r)
        grew = int(m.group(2)) - int(m.group(1))
        self.assertLess(grew, 512, "grew %d KiB over %d ids\n%s" % (grew, self.N - 20000, r))
        self.assertKindCount(r, "destroy-in-own-handler", self.N)

    def test_an_ack_after_the_destroy_is_the_programs_own(self):
        d = self.tmpdir()
        r = run([program("events"), "ack-after-destroy"], "safe",
                {"CMSAFE_REPORT": os.path.join(d, "r.json")})
        self.assertStatus(r, 0)
        self.assertEqual(r.out_lines, ["rdma_destroy_id returned", "acked after the destroy"], r)
        self.assertFinding(r, "destroy-in-own-handler", "1", "DISCONNECTED")
        self.assertSummary(r, "safe", events=1, findings=1)
        with open(os.path.join(d, "r.json")) as f:
            events = [json.loads(l) for l in f if '"record":"event"' in l]
        self.assertEqual([(e["seq"], e["type"], e["ack_ns"] is not None) for e in events],
                         [(1, "DISCONNECTED", True)])


if __name__ == "__main__":
    unittest.main()
