"""cmsafe-migrate: a C file's raw rdma_get_cm_event / rdma_ack_cm_event handling rewritten onto
cmsafe's API, as a patch a person reviews.

Per event variable: a `struct rdma_cm_event *E` local to a function, got there with
rdma_get_cm_event(CH, &E) and acked there with rdma_ack_cm_event(E), is ported:

- a handle `cmsafe_event *E_ref = NULL` beside it;
- the get becomes cmsafe_migrate_get(CH, &E_ref, &E): cmsafe_get_event (which copies and acks
  librdmacm's event at once), E pointing into cmsafe's copy (cmsafe_event_cm), the copy of the
  previous turn released first;
- the ack becomes cmsafe_migrate_release(&E_ref), where the copy goes; or, where the code reads
  the event after its ack (cmsafe-lint's use-after-ack), cmsafe_migrate_kept(E_ref): the copy
  stays until the next get or the function's return, each of which releases it, so the late
  read reads cmsafe's copy;
- where a path leaves the function without the ack (cmsafe-lint's never-acked: an early return,
  an error branch), the copy is released before each return too (a no-op where the path acked:
  the handle is NULL by then), so the port does not keep what the original never acked; a
  function whose return reads the event keeps that path's copy, said in a comment above its get.

A variable that cannot be ported so is left on librdmacm's calls, with a comment above its get
saying why: an event handed to a function that acks it itself, or that may keep it (a queue,
another thread), stored in memory, returned, got into a field or a parameter, or returned in a
function that reads it in the same return. Such a file can still be built with
cmsafe_compat.h (--compat), which keeps librdmacm's calls and makes them safe.

The rewrite is Coccinelle's (spatch keeps the layout and adds the braces an added statement
needs); what to rewrite is decided here from cmsafe-lint's facts, summaries and findings.
"""

import difflib
import os
import re
import tempfile

from . import api, ctext, facts, lint, spatch, summary

HELPERS = """\
/* cmsafe-migrate: librdmacm's CM event calls onto cmsafe's API (cmsafe.h, cmsafe(7)). Each
 * `struct rdma_cm_event *` got here points into cmsafe's copy of the event, which
 * cmsafe_get_event acked at once: the copy goes where the program acked (or, where it reads
 * the event after its ack, at the next get or the function's return), and a destroy never
 * waits for an ack. */
static int cmsafe_migrate_get(struct rdma_event_channel *channel, cmsafe_event **ref,
                              struct rdma_cm_event **event)
{
    cmsafe_event_release(*ref); /* the previous event's copy, when the program kept it */
    *ref = NULL;
    if (cmsafe_get_event(channel, ref))
        return -1;
    /* The program only reads the event: the cast gives it the pointer type it declared. */
    *event = (struct rdma_cm_event *)cmsafe_event_cm(*ref);
    return 0;
}

"""

RELEASE = """
static int cmsafe_migrate_release(cmsafe_event **ref)
{
    cmsafe_event_release(*ref);
    *ref = NULL;
    return 0;
}
"""

KEPT = """
/* Where the original acked and then read on: the copy stays, for those reads. */
static int cmsafe_migrate_kept(const cmsafe_event *ref)
{
    (void)ref;
    return 0;
}
"""


class Plan:
    """One event variable of one function: ported (in place or kept), or left with a reason."""

    def __init__(self, fn, var, gets):
        self.fn = fn
        self.var = var
        self.gets = gets  # the rdma_get_cm_event calls into it
        self.reason = None
        self.kept = False  # read after its ack: released at the next get or the return
        self.unacked = None  # the line of a path out of the function that never acks
        self.unacked_stays = None  # why that path's copy is not released at the return


def _plans(fx, sums, file, late_reads, unacked):
    plans = []
    left = []  # (call, reason) of gets not into a local variable
    for fn in sorted(fx.by_file.get(file, {}).values(), key=lambda f: f.line):
        by_var = {}
        for c in fn.calls:
            if c.name not in api.CM_GET or len(c.args) != 2:
                continue
            out = c.args[1]
            if not out.startswith("&"):
                left.append((c, "the event goes to `%s`, not to a variable of %s()" % (out, fn.name)))
                continue
            var = out[1:]
            if not re.fullmatch(r"\w+", var) or var not in fn.locals or var in fn.params:
                left.append((c, "the event goes into `%s`, memory that outlives %s()" % (
                    var, fn.name)))
                continue
            by_var.setdefault(var, []).append(c)
        for var, gets in by_var.items():
            plan = Plan(fn, var, gets)
            plan.reason = _why_not(fx, sums, fn, var)
            plan.kept = (fn.name, var) in late_reads
            if plan.reason is None and plan.kept:
                for expr, _ in fn.returns:
                    if ctext.mentions(expr, var):
                        plan.reason = ("a return of %s() reads `%s`, whose copy the return "
                                       "would release first" % (fn.name, var))
            plan.unacked = unacked.get((fn.name, var))
            if plan.reason is None and not plan.kept and plan.unacked is not None:
                for expr, line in fn.returns:
                    if ctext.mentions(expr, var):
                        plan.unacked_stays = (
                            "a path never acks `%s` (line %d) and a return reads it (line %d): "
                            "that path keeps its copy, as the original kept librdmacm's event"
                            % (var, plan.unacked, line))
            plans.append(plan)
    return plans, left


def _why_not(fx, sums, fn, var):
    """Why the variable cannot be ported (None when it can): what the function does with it
    besides reading it and acking it itself."""
    for c in fn.calls:
        if var not in c.args and "&" + var not in c.args:
            continue
        if c.name in api.CM_ACK or c.name in api.CM_GET:
            continue
        j = c.args.index(var) if var in c.args else c.args.index("&" + var)
        s = sums.for_name(c.name, c.file)
        if s is not None:
            if j in s.props["ack_cm"]:
                return "%s() acks `%s` itself (line %d): port it with its caller" % (
                    c.name, var, c.line)
            if j in s.props["keeps"]:
                return "%s() may keep `%s` (line %d): its copy could go while it is held" % (
                    c.name, var, c.line)
            continue
        if c.name in api.BORROWERS or api.is_library(c.name):
            continue
        return "`%s` is handed to %s() (line %d), which may keep it" % (var, c.name, c.line)
    for lhs, rhs, line in fn.assigns:
        if rhs == var and lhs != var:
            return "`%s` is stored in `%s` (line %d)" % (var, lhs, line)
    for expr, line in fn.returns:
        if expr == var:
            return "%s() returns `%s` (line %d)" % (fn.name, var, line)
    return None


def _cocci(plans):
    """The semantic patch of the ported variables."""
    rules = []
    for n, p in enumerate(plans):
        if p.reason is not None:
            continue
        f, e = p.fn.name, p.var
        rules.append("""@decl{n}@
identifier F = {{{f}}};
identifier E = {{{e}}};
fresh identifier R = E ## "_ref";
@@
F(...) {{
<...
(
struct rdma_cm_event *E;
+ cmsafe_event *R = NULL;
|
struct rdma_cm_event *E = NULL;
+ cmsafe_event *R = NULL;
)
...>
}}

@get{n}@
identifier F = {{{f}}};
identifier E = {{{e}}};
identifier decl{n}.R;
expression CH;
@@
F(...) {{
<...
- rdma_get_cm_event(CH, &E)
+ cmsafe_migrate_get(CH, &R, &E)
...>
}}
""".format(n=n, f=f, e=e))
        # The ack: the copy goes there, or (read after the ack) stays until a get or a return.
        ack = "cmsafe_migrate_kept(R)" if p.kept else "cmsafe_migrate_release(&R)"
        rules.append("""@ack{n}@
identifier F = {{{f}}};
identifier E = {{{e}}};
identifier decl{n}.R;
@@
F(...) {{
<...
- rdma_ack_cm_event(E)
+ {ack}
...>
}}
""".format(n=n, f=f, e=e, ack=ack))
        if p.kept or (p.unacked is not None and p.unacked_stays is None):
            rules.append("""@ret{n}@
identifier F = {{{f}}};
identifier decl{n}.R;
@@
F(...) {{
<...
+ cmsafe_event_release(R);
  return ...;
...>
}}
""".format(n=n, f=f))
            if p.fn.type == "void":
                rules.append("""@end{n}@
identifier F = {{{f}}};
identifier decl{n}.R;
@@
F(...) {{
  ...
+ cmsafe_event_release(R);
}}
""".format(n=n, f=f))
    return "\n".join(rules)


def _insert_after_includes(text, block):
    lines = text.split("\n")
    last = -1
    for i, line in enumerate(lines):
        if re.match(r"\s*#\s*include\b", line):
            last = i
    lines.insert(last + 1, block)
    return "\n".join(lines)


def _comment_above(text, call, sites):
    """A comment above the k-th line calling CALL (in source order) for each (k, comment) of
    SITES, at that line's indent."""
    lines = text.split("\n")
    # Calls only: the helpers' own definitions (`static int cmsafe_migrate_get(`) are not.
    found = [i for i, line in enumerate(lines)
             if call + "(" in line and not re.match(r"\s*static\b", line)]
    inserts = []
    for k, comment in sites:
        if k < len(found):
            i = found[k]
            indent = re.match(r"\s*", lines[i]).group(0)
            inserts.append((i, indent + comment))
    for i, comment in sorted(inserts, reverse=True):
        lines.insert(i, comment)
    return "\n".join(lines)


def _comment_left(text, left_sites):
    """A comment above each get left on librdmacm (the k-th rdma_get_cm_event( still in the
    text, in source order), saying why."""
    return _comment_above(text, "rdma_get_cm_event", [
        (k, "/* cmsafe-migrate: left on librdmacm's calls: %s; or build this file with "
            "cmsafe_compat.h */" % reason) for k, reason in left_sites])


def _comment_kept(text, kept_sites):
    """A comment above each ported get (the k-th cmsafe_migrate_get() in the text) whose copy
    one of its paths keeps, saying why."""
    return _comment_above(text, "cmsafe_migrate_get", [
        (k, "/* cmsafe-migrate: %s; release it (cmsafe_event_release) where that path "
            "ends */" % reason) for k, reason in kept_sites])


def migrate(path, compat=False, macros=None):
    """(patched text, notes) for one file; the text is the original when nothing applies."""
    with open(path, encoding="utf-8", errors="replace") as f:
        original = f.read()
    notes = []
    gets = len(re.findall(r"\brdma_get_cm_event\s*\(", ctext._mask(original)))
    acks = len(re.findall(r"\brdma_ack_cm_event\s*\(", ctext._mask(original)))
    if gets == 0 and acks == 0:
        notes.append("no rdma_get_cm_event or rdma_ack_cm_event here: nothing to port (the "
                     "events of a synchronous id are librdmacm's own)")
        return original, notes
    if compat:
        text = _insert_before_includes(original, "/* cmsafe-migrate: librdmacm's calls kept, made "
                                       "safe by cmsafe's compat layer (cmsafe_compat.h). */\n"
                                       "#include <cmsafe_compat.h>")
        return text, notes
    extra = ("--macro-file", macros) if macros else ()
    fx = facts.collect([path], extra)
    sums = summary.Summaries(fx)
    _, found = lint.run([path], macros=macros)
    late = set()
    unacked = {}  # (function, variable): the line of its first path out without the ack
    for f in found:
        fn = fx.function_at(f.file, f.line)
        if fn is None or f.severity != "warning":
            continue
        m = re.search(r"(?:^`(\w+)` used after|into the event `(\w+)`)", f.message)
        if f.kind == "use-after-ack" and m:
            late.add((fn.name, m.group(1) or m.group(2)))
        m = re.match(r"the event `(\w+)` got at line \d+ is not acked on this path", f.message)
        if f.kind == "never-acked" and m:
            unacked.setdefault((fn.name, m.group(1)), f.line)
    plans, left = _plans(fx, sums, path, late, unacked)
    ported = [p for p in plans if p.reason is None]
    order = []  # the gets left on librdmacm, by their place in the file, with why
    stays = {}  # the ported gets whose copy a path keeps, by their place, with why
    for p in plans:
        if p.reason is not None:
            order += [((c.line, c.col), p.reason) for c in p.gets]
        elif p.unacked_stays is not None:
            stays.update({(c.line, c.col): p.unacked_stays for c in p.gets})
    order += [((c.line, c.col), reason) for c, reason in left]
    text = original
    if ported:
        with tempfile.TemporaryDirectory(prefix="cmsafe-migrate-") as work:
            cocci = os.path.join(work, "migrate.cocci")
            with open(cocci, "w") as f:
                f.write(_cocci(plans))
            out = os.path.join(work, "out.c")
            spatch.patch(cocci, path, out, extra)
            if os.path.exists(out):
                with open(out, encoding="utf-8", errors="replace") as f:
                    text = f.read()
        for p in ported:
            if "cmsafe_event *%s_ref" % p.var not in text:
                notes.append("%s(): `%s` left as it was: its declaration is not one "
                             "`struct rdma_cm_event *%s;` of its own" % (p.fn.name, p.var, p.var))
        helpers = HELPERS
        if any(not p.kept for p in ported):
            helpers += RELEASE
        if any(p.kept for p in ported):
            helpers += KEPT
        text = _insert_after_includes(text, "#include <cmsafe.h>\n\n" + helpers)
    # The gets left, in source order among those still in the text; then the ported gets whose
    # copy a path keeps, among the ported gets.
    remaining = sorted(order)
    text = _comment_left(text, [(k, reason) for k, (_, reason) in enumerate(remaining)])
    ported_gets = sorted((c.line, c.col) for p in ported for c in p.gets)
    text = _comment_kept(text, [(k, stays[g]) for k, g in enumerate(ported_gets) if g in stays])
    for p in plans:
        if p.reason is None:
            notes.append("%s(): `%s` ported%s" % (
                p.fn.name, p.var, " (read after its ack: its copy is kept until the next get "
                                  "or the return)" if p.kept else ""))
            if p.unacked is not None and not p.kept:
                notes.append("%s(): `%s` is not acked on the path at line %d: %s" % (
                    p.fn.name, p.var, p.unacked,
                    p.unacked_stays or "its copy is released before each return"))
        else:
            notes.append("%s(): `%s` left on librdmacm's calls: %s" % (p.fn.name, p.var,
                                                                        p.reason))
    for c, reason in left:
        notes.append("%s(), line %d: left on librdmacm's calls: %s" % (c.fn, c.line, reason))
    return text, notes


def _insert_before_includes(text, block):
    lines = text.split("\n")
    for i, line in enumerate(lines):
        if re.match(r"\s*#\s*include\b", line):
            lines.insert(i, block)
            return "\n".join(lines)
    return block + "\n" + text


def unified(path, before, after):
    return "".join(difflib.unified_diff(before.splitlines(True), after.splitlines(True),
                                        "a/" + path.lstrip("/"), "b/" + path.lstrip("/")))
