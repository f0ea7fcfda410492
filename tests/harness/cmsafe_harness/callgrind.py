"""valgrind's callgrind, read: the instructions a run collected, and the preload's own share of a
whole process's profile (scripts/preload-insns.py, insn-count, cmtime-insns).

callgrind counts the instructions executed in user space (system calls run natively and are not
counted: syscall-count counts those). The same binary and input give the same count however busy
the machine is: the CPU a program pays, by count rather than by time.

The preload's share of a profile (`scripts/preload-insns.py`): the instructions the preload
executed in one process, its own functions' and those of what they called (libc, the loader,
libgcc), but not the work of the real librdmacm and libibverbs functions behind its wrappers,
which the program pays without the preload too.

    scripts/preload-insns.py PROFILE PRELOAD [TOP]

PROFILE: a callgrind.out file; PRELOAD: the libcmsafe_preload.so the process loaded (its
exported names are the wrapped functions); TOP: also print the TOP largest parts, by function.
Prints the total on the first line.

    scripts/preload-insns.py --per N PROFILE PROFILE2 PRELOAD TOP

The TOP largest parts per iteration in the steady state, as a markdown table: PROFILE after N
iterations, PROFILE2 after 2N (the same warm-up), each part's difference divided by N.

    scripts/preload-insns.py --reads PROFILE PRELOAD

The total, then the reads: calls the preload made to librdmacm's rdma_get_cm_event, one per
event the program got (and one per read that failed or was cut short by the program's end).

callgrind names a real function after the preload's wrapper of the same name (`???:rdma_...`
in the preload's object), so a function is the preload's own when it lies in the preload's
object and its name is none of the exported ones; a call to an exported name, or into
librdmacm, libibverbs or a provider, is the real work and is not counted.

On aarch64 the attribution is wrong: callgrind cannot see a return through the preload's entry
trampoline's tail call (`b`, preload/src/entry.rs): a `bl` moves no stack pointer, by which
callgrind unwinds its shadow stack, so the trampoline's frame outlives the call and what runs
next (librdmacm's malloc, the program's own code) is booked as the preload's callee. A count
collected inside a function that has a frame (insn-count's fetch_one) is right there; which of
the preload's calls cost what is not.
"""

from __future__ import annotations

import re
import subprocess
import sys
from dataclasses import dataclass, field
from typing import Iterable, Sequence

_COLLECTED = re.compile(r"^==[0-9]*== Collected : ([0-9]*)$")
_REAL_LIB = re.compile(r"/lib(rdmacm|ibverbs)\.so|/libibverbs/")
_NAMED = re.compile(r"\((\d+)\)(?: (.*))?$")


def collected(lines: Iterable[str]) -> int | None:
    """The Ir of valgrind's "Collected" line; None without exactly one, or with 0: a toggle
    that matched no function (renamed by the compiler?) collects nothing, not a free loop."""
    found = [m.group(1) for m in map(_COLLECTED.match, lines) if m]
    if len(found) != 1 or not re.fullmatch(r"[1-9][0-9]*", found[0]):
        return None
    return int(found[0])


def exported(preload: str) -> set[str]:
    """The names PRELOAD exports: the wrapped functions (and the preload's own entry points)."""
    out = subprocess.run(["nm", "-D", "--defined-only", preload], stdout=subprocess.PIPE,
                         universal_newlines=True, check=True).stdout
    return {line.split()[-1] for line in out.splitlines() if line.strip()}


@dataclass
class Share:
    """The preload's instructions in one profile: the total, by part, and its reads."""

    total: int = 0
    parts: dict[str, int] = field(default_factory=dict)
    reads: int = 0


def share(lines: Iterable[str], obj_name: str, wrapped: set[str]) -> Share:
    """Reads callgrind's own file, not callgrind_annotate's report: the report prints an object
    only beside some of a function's lines, and with whole-program optimisation most of the
    preload's code is inlined from other files, whose lines the report leaves without one.
    OBJ_NAME: the preload's file name; WRAPPED: the names it exports."""
    # The profiled program's own executable (callgrind's "cmd:" line). The preload never calls
    # into it, but callgrind on aarch64 takes the entry trampoline's branch (`b`, a tail call
    # that keeps the caller's x30) for a call, and then books the program's code after the
    # wrapper returns as that call's inclusive cost: a billion instructions "in" the preload.
    program = ""
    names: dict[str, dict[str, str]] = {"ob": {}, "fn": {}}
    result = Share()
    obj = fn = cobj = cfn = ""
    in_ours = False
    call_pending = False

    def named(kind: str, rest: str) -> str:
        # "(id) name" defines an id, "(id)" refers to one defined before.
        m = _NAMED.match(rest)
        if not m:
            return rest
        if m.group(2) is not None:
            names[kind][m.group(1)] = m.group(2)
        return names[kind].get(m.group(1), "")

    def ours(o: str, f: str) -> bool:
        return o.endswith("/" + obj_name) and f not in wrapped

    for line in lines:
        line = line.rstrip("\n")
        if line.startswith("cmd:"):
            argv0 = line[4:].split()
            program = "/" + argv0[0].rsplit("/", 1)[-1] if argv0 else ""
            continue
        if line.startswith("ob="):
            obj = named("ob", line[3:])
            continue
        if line.startswith("fn="):
            fn = named("fn", line[3:])
            cobj = obj
            in_ours = ours(obj, fn)
            continue
        if line.startswith("cob="):
            cobj = named("ob", line[4:])
            continue
        if line.startswith("cfn="):
            cfn = named("fn", line[4:])
            continue
        if line.startswith("calls="):
            call_pending = True
            if in_ours and cfn == "rdma_get_cm_event" and _REAL_LIB.search(cobj):
                result.reads += int(line[6:].split()[0])
            continue
        if not line or not (line[0].isdigit() or line[0] in "+-*"):
            continue
        fields = line.split()
        ir = int(fields[1]) if len(fields) > 1 else 0
        if call_pending:
            # The call's inclusive cost: counted when one of ours calls what is neither ours
            # (counted as its own lines) nor the real work behind a wrapper.
            call_pending = False
            callee_obj = cobj
            cobj = obj
            if (in_ours and not ours(callee_obj, cfn) and cfn not in wrapped
                    and not _REAL_LIB.search(callee_obj)
                    and not (program and callee_obj.endswith(program))):
                result.total += ir
                result.parts["> " + cfn] = result.parts.get("> " + cfn, 0) + ir
            continue
        if in_ours:
            result.total += ir
            result.parts[fn] = result.parts.get(fn, 0) + ir
    return result


def read_share(profile: str, preload: str, wrapped: set[str] | None = None) -> Share:
    """share() of the PROFILE file, for the preload at PRELOAD."""
    if wrapped is None:
        wrapped = exported(preload)
    with open(profile) as f:
        return share(f, preload.rsplit("/", 1)[-1], wrapped)


def per_iteration(n: int, first: Share, second: Share, top: int) -> list[str]:
    """Where the steady state's instructions go, a markdown table: LTO inlines most of the
    preload into its wrappers, so a part is a wrapper with what was inlined into it, or a
    callee it calls. FIRST after N iterations, SECOND after 2N."""
    diff = {k: (v - first.parts.get(k, 0)) / n for k, v in second.parts.items()}
    lines = ["| part (function, or > a callee outside the preload) | instructions per iteration |",
             "|---|---:|"]
    for name, ir in sorted(diff.items(), key=lambda kv: -kv[1])[:top]:
        if round(ir) > 0:
            lines.append("| `%s` | %.0f |" % (name[:80], ir))
    lines.append("| all of the preload | %.0f |" % ((second.total - first.total) / n))
    return lines


def top_parts(s: Share, top: int) -> list[str]:
    return ["%10d %s" % (ir, name[:110])
            for name, ir in sorted(s.parts.items(), key=lambda kv: -kv[1])[:top]]


USAGE = ("usage: scripts/preload-insns.py PROFILE PRELOAD [TOP]\n"
         "       scripts/preload-insns.py --per N PROFILE PROFILE2 PRELOAD TOP\n"
         "       scripts/preload-insns.py --reads PROFILE PRELOAD")


def main(argv: Sequence[str]) -> int:
    """scripts/preload-insns.py: the preload's share of a profile (the module's docstring)."""
    if len(argv) == 6 and argv[0] == "--per":
        wrapped = exported(argv[4])
        first = read_share(argv[2], argv[4], wrapped)
        second = read_share(argv[3], argv[4], wrapped)
        print("\n".join(per_iteration(int(argv[1]), first, second, int(argv[5]))))
        return 0
    if len(argv) == 3 and argv[0] == "--reads":
        s = read_share(argv[1], argv[2])
        print(s.total, s.reads)
        return 0
    if len(argv) not in (2, 3):
        print(USAGE, file=sys.stderr)
        return 1
    s = read_share(argv[0], argv[1])
    print(s.total)
    if len(argv) == 3:
        for line in top_parts(s, int(argv[2])):
            print(line)
    return 0
