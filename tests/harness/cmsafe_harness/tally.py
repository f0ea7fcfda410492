"""The verdicts a harness prints, and the counts it ends with.

The lines are the ones every harness has printed and scripts/stack-suite-in-guest reads:
"ok   WHAT", "FAIL WHAT" with "     - PROBLEM" lines under it, "skip WHAT: WHY" for what cannot
apply on this stack (counted apart: not a pass, not a failure), and a last line
"NAME: N passed, N failed, N apart".
"""

from __future__ import annotations

import sys
from typing import Sequence, TextIO

TAIL = 12  # stderr lines shown under a failure


class Tally:
    """RECORD, when given, gets a copy of every ok / FAIL / skip line (not the problems and logs
    under a FAIL): the list of checks a harness keeps beside its results (checks.txt).
    OK_PREFIX and FAIL_PREFIX begin the verdict lines of a harness whose readers expect others
    (the demo's "  OK: " and "  FAIL: ")."""

    def __init__(self, name: str, stream: TextIO | None = None, record: TextIO | None = None,
                 ok_prefix: str = "ok   ", fail_prefix: str = "FAIL "):
        self.name = name
        self.stream = stream if stream is not None else sys.stdout
        self.record = record
        self.ok_prefix = ok_prefix
        self.fail_prefix = fail_prefix
        self.passed = 0
        self.failed = 0
        self.apart = 0
        self.problems: list[str] = []

    def say(self, text: str) -> None:
        print(text, file=self.stream, flush=True)

    def _verdict_line(self, text: str) -> None:
        self.say(text)
        if self.record is not None:
            print(text, file=self.record, flush=True)

    def problem(self, text: str) -> None:
        """A problem of the check under way; verdict() turns them into its FAIL."""
        self.problems.append(text)

    def verdict(self, what: str, logs: Sequence[tuple[str, Sequence[str]]] = (),
                tail: int = TAIL) -> bool:
        """One ok or FAIL line from the problems collected since the last verdict. On failure
        each problem, then the last TAIL lines of each (title, lines) log. True when ok."""
        problems, self.problems = self.problems, []
        if not problems:
            self.passed += 1
            self._verdict_line(self.ok_prefix + what)
            return True
        self.failed += 1
        self._verdict_line(self.fail_prefix + what)
        for p in problems:
            self.say("     - %s" % p)
        for title, lines in logs:
            self.say("     %s:" % title)
            for line in list(lines)[-tail:] if tail else []:
                self.say("     | %s" % line)
        return False

    def check(self, what: str, ok: bool, detail: str = "") -> bool:
        """A check decided at once: "ok   WHAT: DETAIL" or "FAIL WHAT: DETAIL"."""
        text = "%s: %s" % (what, detail) if detail else what
        if ok:
            self.passed += 1
            self._verdict_line(self.ok_prefix + text)
        else:
            self.failed += 1
            self._verdict_line(self.fail_prefix + text)
        return ok

    def skip(self, what: str, why: str) -> None:
        """What cannot be checked on this stack, with its reason: counted apart."""
        self.apart += 1
        self.problems = []
        self._verdict_line("skip %s: %s" % (what, why))

    def summary(self) -> str:
        return "%s: %d passed, %d failed, %d apart" % (self.name, self.passed, self.failed, self.apart)

    def finish(self) -> int:
        """Prints the last line; the exit status: 1 when a check failed."""
        self.say(self.summary())
        return 1 if self.failed else 0
