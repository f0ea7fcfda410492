#!/usr/bin/env python3
"""The instructions the preload executed in one process, from a callgrind profile of the whole
process: its own functions' instructions, and those of what they called (libc, the loader,
libgcc), but not the work of the real librdmacm and libibverbs functions behind its wrappers,
which the program pays without the preload too.

    scripts/preload-insns.py PROFILE PRELOAD [TOP]

PROFILE: a callgrind.out file; PRELOAD: the libcmsafe_preload.so the process loaded (its
exported names are the wrapped functions); TOP: also print the TOP largest parts, by function.
Prints the total on the first line.

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
    wrapped = exported(preload)
    obj_name = preload.rsplit('/', 1)[-1]
    # --auto=no: no annotated source after the tree (the preload has debug info), only the tree.
    out = subprocess.run(['callgrind_annotate', '--tree=calling', '--inclusive=no',
                          '--threshold=100', '--auto=no', profile], capture_output=True, text=True,
                         check=True).stdout
    line_re = re.compile(r'^\s*([\d,]+) \([^)]*\)\s+([*>])\s+(.*?)(?: \([\d,]+x\))?'
                         r'(?: \[(.*)\])?$')
    real_lib = re.compile(r'/lib(rdmacm|ibverbs)\.so|/libibverbs/')

    def name_of(full):
        return full.split(':', 1)[-1]

    def ours(full, obj):
        return obj.endswith('/' + obj_name) and name_of(full) not in wrapped

    total, parts, in_ours, caller_obj = 0, {}, False, ''

    for line in out.splitlines():
        m = line_re.match(line)
        if not m:
            continue
        ir = int(m.group(1).replace(',', ''))
        kind, full, obj = m.group(2), m.group(3), m.group(4) or ''
        if kind == '*':
            caller_obj = obj
            in_ours = ours(full, obj)
            if in_ours:
                total += ir
                parts[name_of(full)] = parts.get(name_of(full), 0) + ir
            continue
        # A call made by one of the preload's functions: counted unless it is the real work,
        # or a function of ours (counted as its own block). A callee in the caller's object is
        # printed without one.
        obj = obj or caller_obj
        if not in_ours or ours(full, obj) or name_of(full) in wrapped or real_lib.search(obj):
            continue
        total += ir
        key = '> ' + name_of(full)
        parts[key] = parts.get(key, 0) + ir
    return total, parts


def main():
    if len(sys.argv) not in (3, 4):
        sys.exit('usage: scripts/preload-insns.py PROFILE PRELOAD [TOP]')
    total, parts = added(sys.argv[1], sys.argv[2])
    print(total)
    if len(sys.argv) == 4:
        for name, ir in sorted(parts.items(), key=lambda kv: -kv[1])[:int(sys.argv[3])]:
            print(f'{ir:>10} {name[:110]}')


if __name__ == '__main__':
    main()
