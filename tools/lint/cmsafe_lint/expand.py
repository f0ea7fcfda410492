"""Pass 2's rules for one file: the templates (rules/*.cocci) with each {{PLACEHOLDER(...)}}
replaced by the SmPL disjunction of the calls that do that thing: the library's, and the
helpers' the summaries found (a helper defined in this file first, then one defined once in
another file analyzed).

A placeholder's arguments name the template's own metavariables: the tracked expression and,
optionally, a position to attach to the call. Arguments of a call other than the tracked one
get fresh expression metavariables, declared where the rule says {{META}}.
"""

import re

from . import api
from .summary import is_library as summary_is_library

NEVER = "cmsafe_lint_no_such_call"  # an alternative for an empty list: matches nothing


class Expander:
    def __init__(self, facts, summaries, file, field_summaries=None):
        self.facts = facts
        self.summaries = summaries
        self.fields = field_summaries
        self.file = file
        self._fresh = 0
        self._meta = []
        self.helpers = self._visible_helpers()

    def _visible_helpers(self):
        """(Function, Summary) of every function a call in this file reaches by name."""
        seen = {}
        for fn in self.facts.functions:
            if fn.name in seen or summary_is_library(fn.name):
                continue
            resolved = self.facts.resolve(fn.name, self.file)
            if resolved is not None:
                seen[fn.name] = (resolved, self.summaries.of[resolved])
        return list(seen.values())

    # --- building blocks ------------------------------------------------------------------

    def fresh(self):
        self._fresh += 1
        name = "_m%d" % self._fresh
        self._meta.append(name)
        return name

    @staticmethod
    def _at(pos):
        return "@" + pos if pos else ""

    def call(self, name, arity, index, tracked, pos, variadic=False):
        """`name@pos(_m1, ..., tracked, ...)` with `tracked` as argument `index`."""
        args = [self.fresh() for _ in range(index)] + [tracked]
        if variadic or index < arity - 1:
            args.append("...")
        return "%s%s(%s)" % (name, self._at(pos), ", ".join(args))

    def helper_calls(self, prop, tracked, pos, address=False):
        out = []
        for fn, s in self.helpers:
            for i in sorted(s.props[prop]):
                t = "&" + tracked if address else tracked
                out.append(self.call(fn.name, len(fn.params), i, t, pos))
        return out

    def all_ackers(self, family, tracked, pos, address=False):
        attr = {"cm": "ack_cm_all", "cq": "ack_cq_all", "as": "ack_as_all"}[family]
        out = []
        for fn, s in self.helpers:
            for i in sorted(getattr(s, attr)):
                t = "&" + tracked if address else tracked
                out.append(self.call(fn.name, len(fn.params), i, t, pos))
        return out

    @staticmethod
    def disj(alts):
        if not alts:
            return None
        if len(alts) == 1:
            return alts[0]
        return "\\( " + " \\| ".join(alts) + " \\)"

    def disj_or_never(self, alts, tracked, pos):
        return self.disj(alts) or "%s%s(%s)" % (NEVER, self._at(pos), tracked)

    # --- the placeholders -------------------------------------------------------------------

    def GET_CM(self, e, pos=None):
        alts = ["rdma_get_cm_event%s(%s, &%s)" % (self._at(pos), self.fresh(), e)]
        alts += self.helper_calls("get_cm_out", e, pos, address=True)
        for fn, s in self.helpers:
            if s.ret_cm or s.ret_cm_typed:
                alts.append("%s = %s%s(...)" % (e, fn.name, self._at(pos)))
        return self.disj(alts)

    def ACK_CM_ALL(self, e, pos=None):
        return self.disj(["rdma_ack_cm_event%s(%s)" % (self._at(pos), e)]
                         + self.all_ackers("cm", e, pos))

    def ACK_CM_ANY(self, e, pos=None):
        return self.disj(["rdma_ack_cm_event%s(%s)" % (self._at(pos), e)]
                         + self.helper_calls("ack_cm", e, pos))

    ACK_CM_ANY_POS = ACK_CM_ANY

    def READ_CM(self, e, pos=None):
        alts = []
        for fn, s in self.helpers:
            for i in sorted(s.props["reads"]):
                if i not in s.props["ack_cm"]:
                    alts.append(self.call(fn.name, len(fn.params), i, e, pos))
        return self.disj_or_never(alts, e, pos)

    def _destroys(self, kind, x, pos, with_event=True):
        alts = []
        for name, i in sorted(api.CM_DESTROY[kind].items()):
            arity = 2 if name == "rdma_migrate_id" else 1
            alts.append(self.call(name, arity, i, x, pos))
        alts += self.helper_calls("destroy_" + kind, x, pos)
        if with_event and kind in ("id", "migrate", "qp"):
            alts += self.helper_calls("destroy_%s_ev" % kind, x, pos)
        if with_event and kind == "id":
            # A helper destroying an id it reaches through `x` (`evt->id->context`'s
            # `cm_id`): which id is not known, so the finding says "if".
            alts += [a for a in self._field_helpers("held_destroys", "id", x, pos)
                     if a not in alts]
        return self.disj(alts)

    def DESTROY_ID(self, x, pos=None):
        return self._destroys("id", x, pos)

    def DESTROY_ID_PLAIN(self, x, pos=None):
        return self._destroys("id", x, pos, with_event=False)

    def REJECT(self, x, pos=None):
        alts = [self.call(n, 3, i, x, pos) for n, i in sorted(api.CM_REJECT.items())]
        for fn, s in self.helpers:
            for i in sorted(s.props["reject"]):
                if i not in s.props["destroy_id"]:  # one that also destroys leaks nothing
                    alts.append(self.call(fn.name, len(fn.params), i, x, pos))
        return self.disj(alts)

    def MIGRATE(self, x, pos=None):
        return self._destroys("migrate", x, pos)

    def DESTROY_CH(self, x, pos=None):
        return self._destroys("channel", x, pos, with_event=False)

    def DESTROY_QP(self, x, pos=None):
        return self._destroys("qp", x, pos)

    def _field_helpers(self, table, kind, x, pos):
        """Calls of the helpers whose field summary has KIND in TABLE ("destroys", "uses") for
        the parameter given `x`."""
        alts = []
        for fn, _ in self.helpers:
            fs = self.fields.of[fn] if self.fields else None
            params = sorted({k.param for k in getattr(fs, table, {}) if k.kind == kind})
            for i in params:
                alts.append(self.call(fn.name, len(fn.params), i, x, pos))
        return alts

    def FIELD_DESTROY(self, kind, x, pos=None):
        """A helper's destroy of an id (or channel) it reaches through a field of `x`."""
        return self.disj_or_never(self._field_helpers("destroys", kind, x, pos), x, pos)

    def FIELD_USE(self, kind, x, pos=None):
        """A helper's use of an id (or channel) it reaches through a field of `x`."""
        return self.disj_or_never(self._field_helpers("uses", kind, x, pos), x, pos)

    def _when_keep(self, e, address=False):
        lines = []
        for fn, s in self.helpers:
            for i in sorted(s.props["keeps"]):
                t = "&" + e if address else e
                lines.append("    when != " + self.call(fn.name, len(fn.params), i, t, None))
        return "\n".join(lines)

    def WHEN_KEEP_CM(self, e):
        return self._when_keep(e)

    def WHEN_KEEP_CQ(self, c):
        return self._when_keep(c)

    def WHEN_KEEP_AS(self, v):
        return self._when_keep(v, address=True)

    def THREAD_WAIT(self):
        return self.disj(["%s(...)" % n for n in api.THREAD_WAITS])

    def PROCESS_EXIT(self):
        return self.disj(["%s(...)" % n for n in api.PROCESS_EXITS])

    # completion events

    def GET_CQ(self, c, pos=None):
        alts = ["ibv_get_cq_event%s(%s, &%s, %s)" % (self._at(pos), self.fresh(), c, self.fresh())]
        alts += self.helper_calls("get_cq_out", c, pos, address=True)
        for fn, s in self.helpers:
            if s.ret_cq:
                alts.append("%s = %s%s(...)" % (c, fn.name, self._at(pos)))
        return self.disj(alts)

    def GET_CQ_DROP(self, pos):
        alts = ["%s%s(...);" % (fn.name, self._at(pos)) for fn, s in self.helpers if s.ret_cq]
        return self.disj(alts) or "%s%s();" % (NEVER, self._at(pos))

    def ACK_CQ_ALL(self, c, pos=None):
        return self.disj(["ibv_ack_cq_events%s(%s, %s)" % (self._at(pos), c, self.fresh())]
                         + self.all_ackers("cq", c, pos))

    def ACK_CQ_SOME(self, c, pos=None):
        return self.disj(["ibv_ack_cq_events%s(%s, %s)" % (self._at(pos), c, self.fresh())]
                         + self.helper_calls("ack_cq", c, pos))

    def ACK_CQ_ANYCQ(self):
        alts = ["ibv_ack_cq_events(...)"]
        alts += ["%s(...)" % fn.name for fn, s in self.helpers if s.props["ack_cq"]]
        return self.disj(alts)

    def DESTROY_CQ(self, x, pos=None):
        return self.disj(["ibv_destroy_cq%s(%s)" % (self._at(pos), x)]
                         + self.helper_calls("destroy_cq", x, pos))

    # async events

    def GET_AS(self, v, pos=None):
        alts = ["ibv_get_async_event%s(%s, &%s)" % (self._at(pos), self.fresh(), v)]
        alts += self.helper_calls("get_as_out", v, pos, address=True)
        for fn, s in self.helpers:
            if s.ret_as:
                alts.append("%s = %s%s(...)" % (v, fn.name, self._at(pos)))
        return self.disj(alts)

    def ACK_AS_ALL(self, v, pos=None):
        return self.disj(["ibv_ack_async_event%s(&%s)" % (self._at(pos), v)]
                         + self.all_ackers("as", v, pos, address=True))

    def ACK_AS_ANY(self, v, pos=None):
        return self.disj(["ibv_ack_async_event%s(&%s)" % (self._at(pos), v)]
                         + self.helper_calls("ack_as", v, pos, address=True))

    ACK_AS_ANY_POS = ACK_AS_ANY

    def DESTROY_VERBS(self, x, pos=None):
        alts = ["%s%s(%s)" % (n, self._at(pos), x) for n in sorted(api.VERBS_DESTROY)]
        alts += self.helper_calls("destroy_verbs", x, pos)
        return self.disj(alts)

    def PYTHON(self):
        known = set(api.family_calls()) | set(api.BORROWERS) | {NEVER}
        known |= {fn.name for fn in self.facts.functions}
        return ("KNOWN = frozenset(%r)\n\ndef unknown(name):\n"
                "    return str(name) not in KNOWN\n" % sorted(known))

    # --- the template ---------------------------------------------------------------------

    _PH = re.compile(r"\{\{(\w+)(?:\(([^)]*)\))?\}\}")

    def expand(self, template):
        """The template with its placeholders filled; {{META}} declares each rule's fresh
        metavariables (those its own placeholders made)."""
        rules = re.split(r"(?m)^(?=@(?!@))", template)
        out = []
        for rule in rules:
            self._meta = []
            body = self._PH.sub(self._fill, rule)
            meta = "expression %s;" % ", ".join(self._meta) if self._meta else ""
            out.append(body.replace("\x00META\x00", meta))
        return "".join(out)

    def _fill(self, m):
        name, args = m.group(1), m.group(2)
        if name == "META":
            return "\x00META\x00"
        fn = getattr(self, name, None)
        if fn is None:
            raise ValueError("unknown placeholder {{%s}}" % name)
        argv = [a.strip() for a in args.split(",")] if args else []
        return fn(*argv)
