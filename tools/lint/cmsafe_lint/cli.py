"""cmsafe-lint's command line: arguments, output, exit status."""

import argparse
import json
import os
import signal
import sys

from . import lint, spatch
from .finding import escape

PROG = "cmsafe-lint"

DESCRIPTION = """\
Finds event-lifecycle bugs of librdmacm and libibverbs in C sources, before they run: uses of
an event after rdma_ack_cm_event, paths on which an event is never acked, double and foreign
acks, rdma_destroy_id / rdma_migrate_id / rdma_destroy_event_channel / rdma_destroy_qp while
an event is held, and the same family for completion (ibv_get_cq_event) and async
(ibv_get_async_event) events. Findings are printed as compilers print theirs:
FILE:LINE:COL: warning: KIND: message, KIND being the name cmsafe-audit gives the same misuse
at run time. A directory stands for its *.c files that call an event function."""

EPILOG = """\
exit status: 0 no finding, 1 findings, 2 usage error or a file that cannot be read, 3 spatch
failed. Man page: cmsafe-lint(1)."""


class _Parser(argparse.ArgumentParser):
    def error(self, message):
        sys.stderr.write("%s: %s\n" % (PROG, message))
        sys.stderr.write("usage: %s [--json] [--macros FILE] FILE|DIR...\n" % PROG)
        sys.exit(2)


def main(argv):
    ap = _Parser(prog=PROG, description=DESCRIPTION, epilog=EPILOG,
                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--json", action="store_true",
                    help="one JSON object a line: file, line, column, severity, kind, message")
    ap.add_argument("--macros", metavar="FILE",
                    help="#defines for the project's own macros that keep spatch from parsing "
                         "a function (each such function is a note: not-checked)")
    ap.add_argument("paths", nargs="+", metavar="FILE|DIR", help="C files, or directories")
    args = ap.parse_args(argv)
    try:
        files, found = lint.run(args.paths, macros=args.macros)
    except OSError as e:
        sys.stderr.write("%s: %s\n" % (PROG, escape(str(e))))
        return 2
    except spatch.SpatchError as e:
        sys.stderr.write("%s: %s\n" % (PROG, escape(str(e))))
        return 3
    warnings = 0
    out = sys.stdout
    for f in found:
        if f.severity == "warning":
            warnings += 1
        if args.json:
            out.write(json.dumps({"file": f.file, "line": f.line, "column": f.col + 1,
                                  "severity": f.severity, "kind": f.kind,
                                  "message": f.message}) + "\n")
        else:
            out.write(f.text() + "\n")
    out.flush()
    sys.stderr.write("%s: %d file%s, %d finding%s\n" % (
        PROG, len(files), "" if len(files) == 1 else "s", warnings, "" if warnings == 1 else "s"))
    return 1 if warnings else 0


def _guarded(prog, entry):
    """Runs ENTRY(argv) as the command PROG: a closed pipe (| head) ends it quietly, as it does
    cat; ^C is status 130; anything unforeseen is one line and status 3, never a traceback."""
    signal.signal(signal.SIGPIPE, signal.SIG_DFL)
    try:
        sys.exit(entry(sys.argv[1:]))
    except KeyboardInterrupt:
        sys.exit(130)
    except Exception as e:  # noqa: BLE001 (the boundary: a one-line error, not a traceback)
        sys.stderr.write("%s: internal error: %s: %s\n" % (prog, type(e).__name__,
                                                          escape(str(e))))
        sys.exit(3)


def run():
    _guarded(PROG, main)


MIGRATE = "cmsafe-migrate"

MIGRATE_DESCRIPTION = """\
Rewrites C files' rdma_get_cm_event / rdma_ack_cm_event handling onto cmsafe's API
(cmsafe_get_event, cmsafe_event_cm, cmsafe_event_release) and prints the change as a unified
diff for review (patch -p1 applies it), or writes it with --in-place. An event variable it
cannot port safely keeps librdmacm's calls, with a comment above its get saying why; what it
did to each is said on standard error. --compat instead keeps every call and includes
cmsafe_compat.h (safe mode from source)."""

MIGRATE_EPILOG = """\
exit status: 0, 2 usage error or a file that cannot be read or written, 3 spatch failed.
Man page: cmsafe-migrate(1)."""


def migrate_main(argv):
    from . import migrate

    class Parser(_Parser):
        def error(self, message):
            sys.stderr.write("%s: %s\n" % (MIGRATE, message))
            sys.stderr.write("usage: %s [--compat] [--in-place] [--macros FILE] FILE...\n"
                             % MIGRATE)
            sys.exit(2)

    ap = Parser(prog=MIGRATE, description=MIGRATE_DESCRIPTION, epilog=MIGRATE_EPILOG,
                formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--compat", action="store_true",
                    help="keep librdmacm's calls; include cmsafe_compat.h")
    ap.add_argument("--in-place", action="store_true", help="write the files instead")
    ap.add_argument("--macros", metavar="FILE", help="#defines for the project's own macros")
    ap.add_argument("files", nargs="+", metavar="FILE")
    args = ap.parse_args(argv)
    for path in args.files:
        if not os.path.isfile(path):  # a FIFO or a device would block the read
            sys.stderr.write("%s: %s: %s\n" % (MIGRATE, escape(path), "not a regular file"
                                                if os.path.exists(path)
                                                else "no such file or directory"))
            return 2
        try:
            with open(path, encoding="utf-8", errors="replace") as f:
                before = f.read()
            after, notes = migrate.migrate(path, compat=args.compat, macros=args.macros)
        except OSError as e:
            sys.stderr.write("%s: %s: %s\n" % (MIGRATE, escape(path), e.strerror or e))
            return 2
        except spatch.SpatchError as e:
            sys.stderr.write("%s: %s: %s\n" % (MIGRATE, escape(path), escape(str(e))))
            return 3
        for note in notes:
            sys.stderr.write("%s: %s: %s\n" % (MIGRATE, escape(path), escape(note)))
        if after == before:
            continue
        if args.in_place:
            try:
                with open(path, "w", encoding="utf-8") as f:
                    f.write(after)
            except OSError as e:
                sys.stderr.write("%s: %s: %s\n" % (MIGRATE, escape(path), e.strerror))
                return 2
        else:
            sys.stdout.write(migrate.unified(path, before, after))
    sys.stdout.flush()
    return 0


def run_migrate():
    _guarded(MIGRATE, migrate_main)
