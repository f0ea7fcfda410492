#!/usr/bin/env python3
"""The instructions the preload executed in one process, from a callgrind profile of the whole
process: its own functions' instructions, and those of what they called (libc, the loader,
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
"""
import re
import subprocess
import sys


def exported(preload):
    out = subprocess.run(['nm', '-D', '--defined-only', preload], capture_output=True,
                         text=True, check=True).stdout
    return {line.split()[-1] for line in out.splitlines() if line.strip()}


def added(profile, preload):
    """Reads callgrind's own file, not callgrind_annotate's report: the report prints an object
    only beside some of a function's lines, and with whole-program optimisation most of the
    preload's code is inlined from other files, whose lines the report leaves without one."""
    wrapped = exported(preload)
    reads = 0
    obj_name = preload.rsplit('/', 1)[-1]
    real_lib = re.compile(r'/lib(rdmacm|ibverbs)\.so|/libibverbs/')
    # The profiled program's own executable (callgrind's "cmd:" line). The preload never calls
    # into it, but callgrind on aarch64 takes the entry trampoline's branch (`b`, a tail call
    # that keeps the caller's x30) for a call, and then books the program's code after the
    # wrapper returns as that call's inclusive cost: a billion instructions "in" the preload.
    program = ''
    names = {'ob': {}, 'fn': {}}
    total, parts = 0, {}
    obj = fn = cobj = cfn = ''
    in_ours = False
    call_pending = False

    def named(kind, rest):
        # "(id) name" defines an id, "(id)" refers to one defined before.
        m = re.match(r'\((\d+)\)(?: (.*))?$', rest)
        if not m:
            return rest
        if m.group(2) is not None:
            names[kind][m.group(1)] = m.group(2)
        return names[kind].get(m.group(1), '')

    def ours(o, f):
        return o.endswith('/' + obj_name) and f not in wrapped

    with open(profile) as lines:
        for line in lines:
            line = line.rstrip('\n')
            if line.startswith('cmd:'):
                argv0 = line[4:].split()
                program = '/' + argv0[0].rsplit('/', 1)[-1] if argv0 else ''
                continue
            if line.startswith('ob='):
                obj = named('ob', line[3:])
                continue
            if line.startswith('fn='):
                fn = named('fn', line[3:])
                cobj = obj
                in_ours = ours(obj, fn)
                continue
            if line.startswith('cob='):
                cobj = named('ob', line[4:])
                continue
            if line.startswith('cfn='):
                cfn = named('fn', line[4:])
                continue
            if line.startswith('calls='):
                call_pending = True
                if in_ours and cfn == 'rdma_get_cm_event' and real_lib.search(cobj):
                    reads += int(line[6:].split()[0])
                continue
            if not line or not (line[0].isdigit() or line[0] in '+-*'):
                continue
            fields = line.split()
            ir = int(fields[1]) if len(fields) > 1 else 0
            if call_pending:
                # The call's inclusive cost: counted when one of ours calls what is neither
                # ours (counted as its own lines) nor the real work behind a wrapper.
                call_pending = False
                callee_obj = cobj
                cobj = obj
                if (in_ours and not ours(callee_obj, cfn) and cfn not in wrapped
                        and not real_lib.search(callee_obj)
                        and not (program and callee_obj.endswith(program))):
                    total += ir
                    parts['> ' + cfn] = parts.get('> ' + cfn, 0) + ir
                continue
            if in_ours:
                total += ir
                parts[fn] = parts.get(fn, 0) + ir
    return total, parts, reads


def per_iteration(n, first, second, preload, top):
    """Where the steady state's instructions go: LTO inlines most of the preload into its
    wrappers, so a part is a wrapper with what was inlined into it, or a callee it calls."""
    first_total, a, _ = added(first, preload)
    total, b, _ = added(second, preload)
    diff = {k: (v - a.get(k, 0)) / n for k, v in b.items()}
    print('| part (function, or > a callee outside the preload) | instructions per iteration |')
    print('|---|---:|')
    for name, ir in sorted(diff.items(), key=lambda kv: -kv[1])[:top]:
        if round(ir) > 0:
            print(f'| `{name[:80]}` | {ir:.0f} |')
    print(f'| all of the preload | {(total - first_total) / n:.0f} |')


def main():
    if len(sys.argv) == 7 and sys.argv[1] == '--per':
        per_iteration(int(sys.argv[2]), sys.argv[3], sys.argv[4], sys.argv[5], int(sys.argv[6]))
        return
    if len(sys.argv) == 4 and sys.argv[1] == '--reads':
        total, _, reads = added(sys.argv[2], sys.argv[3])
        print(total, reads)
        return
    if len(sys.argv) not in (3, 4):
        sys.exit('usage: scripts/preload-insns.py PROFILE PRELOAD [TOP]\n'
                 '       scripts/preload-insns.py --per N PROFILE PROFILE2 PRELOAD TOP\n'
                 '       scripts/preload-insns.py --reads PROFILE PRELOAD')
    total, parts, _ = added(sys.argv[1], sys.argv[2])
    print(total)
    if len(sys.argv) == 4:
        for name, ir in sorted(parts.items(), key=lambda kv: -kv[1])[:int(sys.argv[3])]:
            print(f'{ir:>10} {name[:110]}')


if __name__ == '__main__':
    main()
