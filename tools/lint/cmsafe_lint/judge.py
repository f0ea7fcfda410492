"""From the rules' candidates to findings: what spatch's paths cannot say is decided here, from
the summaries and a plain reading of the source (ctext.Source).

- Which call a candidate's position is, and through which helper argument it destroys.
- Whether the call's object is the held event's own id (`ev->id`, a name given `ev->id`, a
  handler's parameter given it), its listen id, its channel, or unknown: the message says
  "waits forever" only when it is known.
- The event types the place runs for (a `case` of a switch on `ev->event`, an
  `if (ev->event == ...)`, a handler called only from such places, a getter given the type
  it waits for). A CONNECT_REQUEST counts against its listen id, so destroying (or migrating)
  the request's new id does not wait for it; rdma_destroy_qp is judged only while a
  DISCONNECTED is held (as the preload judges it); a MULTICAST_JOIN's `param.ud.private_data`
  is the program's own context pointer, not event memory.
- The kind, by who holds the event: a path that got it (or acks it after the call) holds it
  in the calling thread (destroy-in-own-handler, as the preload names a destroy by the thread
  holding the event); an event that came from a function returning a `struct rdma_cm_event *`
  whose get is not seen may be another thread's (destroy-with-unacked).
"""

import os
import re

from . import api, ctext, fields
from .finding import Finding
from .summary import Place

CONNECT_REQUEST = "RDMA_CM_EVENT_CONNECT_REQUEST"
DISCONNECTED = "RDMA_CM_EVENT_DISCONNECTED"
MULTICAST = {"RDMA_CM_EVENT_MULTICAST_JOIN", "RDMA_CM_EVENT_MULTICAST_ERROR"}

_DESTROY_KIND = {
    "id": ("destroy-in-own-handler", "destroy-with-unacked", "rdma_destroy_id"),
    "migrate": ("migrate-with-unacked", "migrate-with-unacked", "rdma_migrate_id"),
    "channel": ("channel-destroy-with-unacked", "channel-destroy-with-unacked",
                "rdma_destroy_event_channel"),
    "qp": ("qp-destroy-before-ack", "qp-destroy-before-ack", "rdma_destroy_qp"),
}


class Pos:
    __slots__ = ("file", "line", "col", "line_end", "col_end", "fn")

    def __init__(self, p):
        self.file, self.line, self.col, self.line_end, self.col_end, self.fn = p

    @property
    def key(self):
        return (self.file, self.line, self.col)


class Judge:
    def __init__(self, facts, summaries, sources, field_summaries=None):
        self.facts = facts
        self.summaries = summaries
        self.fields = field_summaries
        self.sources = sources  # file -> ctext.Source
        self.findings = {}
        self._handler_types = {}
        self._judged_with_get = set()
        self._unkept_rejects = set()  # (place, id) of rejects some path reaches unstored

    # --- reading the source --------------------------------------------------------------

    def src(self, file):
        if file not in self.sources:
            self.sources[file] = ctext.Source(file)
        return self.sources[file]

    def call_at(self, pos):
        """The call fact whose name starts at pos (a placeholder's position is on the name)."""
        fn = self.facts.by_file.get(pos.file, {}).get(pos.fn)
        if fn is None:
            return None
        for c in fn.calls:
            if c.line == pos.line and c.col == pos.col:
                return c
        return None

    def types_at(self, file, line, col, fn_name=None, depth=0):
        """The event types the code at a place runs for, or None when unknown."""
        t = self.src(file).event_types_at(line, col)
        if t is not None:
            return t
        if fn_name is None or depth > 3:
            return None
        key = (file, fn_name)
        if key in self._handler_types:
            return self._handler_types[key]
        self._handler_types[key] = None  # recursion guard
        fn = self.facts.by_file.get(file, {}).get(fn_name)
        out = None
        if fn is not None:
            sites = []
            for other in self.facts.functions:
                for c in other.calls:
                    if c.name == fn_name and self.facts.resolve(c.name, c.file) is fn:
                        sites.append(self.types_at(c.file, c.line, c.col, c.fn, depth + 1))
            if sites and all(s is not None for s in sites):
                out = frozenset().union(*sites)
        self._handler_types[key] = out
        return out

    def types_on_the_way(self, pd, inner):
        """The event types at a call, or on its way down to the library call (a handler
        reached from a `case` of the dispatcher it is called by): the first place that says,
        else the handler typing of the calling function."""
        hops = [pd.key] + [h for p in inner for h in p.via] + [(p.file, p.line, p.col)
                                                               for p in inner]
        for f, l, col in hops:
            t = self.src(f).event_types_at(l, col)
            if t is not None:
                return t
        return self.types_at(pd.file, pd.line, pd.col, pd.fn)

    def get_types(self, getpos):
        """The type a getter is told to wait for (`raw_get(ch, RDMA_CM_EVENT_X)`), or None."""
        c = self.call_at(getpos)
        if c is None:
            return None
        names = {a for a in c.args if re.fullmatch(r"RDMA_CM_EVENT_\w+", a)}
        return frozenset(names) if names else None

    def get_origin(self, getpos):
        """How the event at a get was got: 'get' (rdma_get_cm_event, or a helper that is seen
        calling it) or 'typed' (a function returning struct rdma_cm_event *, get unseen)."""
        c = self.call_at(getpos)
        if c is None or c.name in api.CM_GET:
            return "get"
        s = self.summaries.for_name(c.name, c.file)
        if s is not None and s.ret_cm_typed and not s.ret_cm:
            return "typed"
        return "get"

    def use_is_real(self, pos, ev, family="cm"):
        """Whether the first use of `ev` at pos (the use that shows a get succeeded) is a use
        and not, on the same statement, where the path stops owing an ack: the ack itself, a
        store or a return of the event, or a call that may keep it."""
        stmt = ctext.norm(self.src(pos.file).enclosing_statement(pos.line, pos.col))
        e = re.escape(ev)
        if re.search(r"(?<![=!<>])=%s$" % e, stmt) or re.match(r"return%s$" % e, stmt):
            return False
        for name, args in ctext.calls_in(stmt):
            addr = "&" + ev
            if ev not in args and addr not in args:
                continue
            if name in api.BORROWERS:
                continue
            if name in api.CM_ACK or name in api.AS_ACK or name in api.CQ_ACK:
                return False
            if addr in args and (name in api.CM_GET or name in api.CQ_GET or name in api.AS_GET):
                return False  # the get itself (a loop's next turn): not a use
            if name in api.family_calls():
                continue
            s = self.summaries.for_name(name, pos.file)
            if s is None:
                return False  # an unknown call may keep it
            idx = [i for i, a in enumerate(args) if a in (ev, addr)]
            for p in ("ack_cm", "ack_cq", "ack_as", "keeps", "get_cm_out", "get_cq_out",
                      "get_as_out"):
                if any(i in s.props[p] for i in idx):
                    return False
        return True

    def listen_ids(self, file, fn_name):
        fn = self.facts.by_file.get(file, {}).get(fn_name)
        return self.summaries.listen_ids(fn) if fn is not None else set()

    def get_channel(self, getpos):
        """The channel expression an event was got from, when the get shows it."""
        c = self.call_at(getpos)
        if c is None:
            return None
        if c.name in api.CM_GET:
            return c.args[0] if c.args else None
        s = self.summaries.for_name(c.name, c.file)
        if s is not None and s.chan is not None and s.chan < len(c.args):
            return c.args[s.chan]
        return None

    def path_end(self, px, held=()):
        """Where a path that owes something ends, for its message: (severity, words), or None
        when that end hands on one of HELD (`return ev`, `return wrap(ev)`). A return from
        main() ends the process, where nothing waits any more: a note (cmsafe-audit's exit
        summary counts the same); any other end is a warning."""
        stmt = self.src(px.file).statement_at(px.line, px.col)
        m = re.match(r"\s*return\b(.*)", stmt, re.S)
        if m and any(h and ctext.hands_over(ctext.norm(m.group(1)), h) for h in held):
            return None
        if stmt.lstrip().startswith("pthread_exit"):
            return "warning", "the thread exits here"
        if px.fn == "main":
            return "note", "main returns: the process ends here"
        return "warning", "returns here" if m else "reaches the end of %s()" % px.fn

    def flag_guarded_acks(self, pos, ev):
        """The places of the acks of `ev` in the function at pos that run only under
        `if (!acked)`: the program records its acks in a flag, which no path of the flow
        graph follows."""
        fn = self.facts.by_file.get(pos.file, {}).get(pos.fn)
        if fn is None:
            return []
        src = self.src(pos.file)
        out = []
        for c in fn.calls:
            if c.name in api.CM_ACK and c.args and c.args[0] == ev and \
                    src.flag_guard_of(c.line, c.col) is not None:
                out.append((c.line, c.col))
        return out

    def add(self, f):
        """Keeps one finding per line and kind: the first (rules come best-informed first:
        with the get in view before without), at its leftmost column."""
        key = (f.file, f.line, f.kind)
        old = self.findings.get(key)
        if old is None:
            self.findings[key] = f
        elif f.col < old.col and f.message == old.message:
            old.col = f.col

    # --- CM ---------------------------------------------------------------------------------

    def judge(self, rec):
        """Turns one candidate of the rules into findings (or into nothing)."""
        for k in ("ev", "cq"):
            if k in rec and re.search(r"\w\s*\(", ctext.norm(rec[k])):
                return  # a call, not a place: each evaluation is another event
        getattr(self, "_" + rec["rule"].replace("-", "_"))(rec)

    def _ack_name(self, pos):
        c = self.call_at(pos)
        return c.name if c else "rdma_ack_cm_event"

    def in_ack_failure(self, ack, use):
        """Whether `use` is in the branch that runs when the ack at `ack` failed: librdmacm
        frees the event only when the ack succeeds."""
        src = self.src(ack.file)
        branch = src.failure_branch_of(ack.line, ack.col)
        return branch is not None and branch[0] <= src.offset(use.line, use.col) < branch[1]

    def is_local(self, pos, name):
        """Whether `name` is a local variable of the function at pos (not a parameter, a
        field, a global or memory a pointer reaches)."""
        fn = self.facts.by_file.get(pos.file, {}).get(pos.fn)
        return fn is not None and name in fn.locals and name not in fn.params

    def another_each_turn(self, ev, first, second):
        """`entry->evt` at both places inside an iterator macro's loop over `entry`, met again
        round it (the second place not after the first): another entry by then."""
        base = re.match(r"\w+", ev)
        if base is None or base.group(0) == ev or (second.line, second.col) > (first.line,
                                                                             first.col):
            return False
        return self.src(first.file).iterates(base.group(0), [(first.line, first.col),
                                                             (second.line, second.col)])

    def _use_after_ack(self, rec):
        ack, use = Pos(rec["ack"]), Pos(rec["use"])
        ev = ctext.norm(rec["ev"])
        if self.in_ack_failure(ack, use) or self.another_each_turn(ev, ack, use):
            return
        via = ""
        c = self.call_at(use)
        if c is not None and c.name not in ("rdma_ack_cm_event",) and ev in c.args:
            via = ", passed to %s(), which reads it" % c.name
        self.add(Finding("use-after-ack", use.file, use.line, use.col,
                         "`%s` used after %s(%s) at line %d freed it%s" % (
                             ev, self._ack_name(ack), ev, ack.line, via)))

    def _use_after_ack_copy(self, rec):
        at, ack, use = Pos(rec["at"]), Pos(rec["ack"]), Pos(rec["use"])
        ev, copy = ctext.norm(rec["ev"]), ctext.norm(rec["copy"])
        if self.in_ack_failure(ack, use):
            return
        stmt = ctext.norm(self.src(at.file).statement_at(at.line, at.col))
        if "ud.private_data" in stmt:
            types = self.types_at(at.file, at.line, at.col, at.fn)
            if types is None or types & MULTICAST:
                # A multicast event's ud.private_data is the program's own context pointer.
                return
        what = "the event `%s`" % ev if stmt.endswith("=" + ev) else "the event `%s`'s memory" % ev
        self.add(Finding("use-after-ack", use.file, use.line, use.col,
                         "`%s` points into %s (line %d), which %s(%s) at line %d freed" % (
                             copy, what, at.line, self._ack_name(ack), ev, ack.line)))

    def _double_ack(self, rec):
        p1, p2 = Pos(rec["first"]), Pos(rec["second"])
        ev = ctext.norm(rec["ev"])
        if (p2.line, p2.col) in self.flag_guarded_acks(p2, ev):
            return  # `if (!acked) ack`: the flag says whether it was acked already
        if self.another_each_turn(ev, p1, p2):
            return
        self.add(Finding("double-ack", p2.file, p2.line, p2.col,
                         "`%s` acked again: %s(%s) at line %d already acked it (librdmacm "
                         "freed it there)" % (ev, self._ack_name(p1), ev, p1.line)))

    def _foreign_ack(self, rec):
        pa = Pos(rec["ack"])
        ev = ctext.norm(rec["ev"])
        if rec["why"] == "address":
            msg = ("rdma_ack_cm_event(%s): an address rdma_get_cm_event never returned "
                   "(librdmacm frees what it is given)" % ev)
        else:
            msg = ("rdma_ack_cm_event(%s): `%s` is memory from %s() at line %d, not an event "
                   "rdma_get_cm_event returned" % (ev, ev, self._call_name_at(Pos(rec["alloc"])),
                                                   Pos(rec["alloc"]).line))
        self.add(Finding("foreign-ack", pa.file, pa.line, pa.col, msg))

    def _call_name_at(self, pos):
        c = self.call_at(pos)
        return c.name if c else "malloc"

    def _never_acked(self, rec):
        pg, px = Pos(rec["get"]), Pos(rec["exit"])
        ev = ctext.norm(rec["ev"])
        if not self.use_is_real(Pos(rec["use"]), ev):
            return
        if any((pg.line, pg.col) < a < (px.line, px.col) for a in self.flag_guarded_acks(pg, ev)):
            return  # the path went by an ack the program guards with its own flag
        if not self.is_local(pg, ev):
            return  # kept in memory that outlives the function (a field, a global)
        end = self.path_end(px, (ev,))
        if end is None:
            return  # the event is handed to the caller
        severity, where = end
        self.add(Finding("never-acked", px.file, px.line, px.col,
                         "the event `%s` got at line %d is not acked on this path (%s)" % (
                             ev, pg.line, where), severity))

    def _never_acked_loop(self, rec):
        pg, again = Pos(rec["get"]), Pos(rec["again"])
        ev = ctext.norm(rec["ev"])
        pu = Pos(rec["use"])
        if not self.use_is_real(pu, ev):
            return
        if any(a > (pu.line, pu.col) for a in self.flag_guarded_acks(pg, ev)):
            return  # round the loop by an ack the program guards with its own flag
        if pg.key == again.key:
            first = "got here"
        else:
            first = "got at line %d" % pg.line
        self.add(Finding("never-acked", again.file, again.line, again.col,
                         "the event `%s` %s is not acked on some path back to this get, which "
                         "overwrites it (a continue, or an event type no branch acks)" % (
                             ev, first)))

    # calls that wait for the held event

    def _destroy_call(self, pos, obj):
        """(kind, via, report places) of the call at pos on `obj`: via is 'param' (obj is what
        the call destroys) or 'event' (obj is an event whose id the helper destroys)."""
        c = self.call_at(pos)
        if c is None:
            return None
        o = ctext.norm(obj)
        for kind, table in api.CM_DESTROY.items():
            if c.name in table:
                return kind, "param", [Place(pos.file, pos.line, pos.col, c.name, ())]
        s = self.summaries.for_name(c.name, c.file)
        if s is None:
            return None
        for j, a in enumerate(c.args):
            if a != o:
                continue
            for kind in api.CM_DESTROY:
                if j in s.props["destroy_" + kind]:
                    return kind, "param", sorted(s.places("destroy_" + kind, j))
                if kind != "channel" and j in s.props["destroy_%s_ev" % kind]:
                    return kind, "event", sorted(s.places("destroy_%s_ev" % kind, j))
            fs = self.fields.for_call(c) if self.fields else None
            through = sorted(set().union(*[p for k, p in fs.held_destroys.items()
                                           if k.kind == "id" and k.param == j])) if fs else []
            if through:
                return "id", "field", through
        return None

    def _relation(self, ev, obj, via, fn_name, file, getpos=None):
        """'own' (obj is the event's id), 'listen' (its listen id), 'channel' (the channel it
        was got from) or None (unknown)."""
        o, e = ctext.norm(obj), ctext.norm(ev)
        if via == "event":
            return "own" if o == e else None
        if via == "field":
            return None  # an id reached through `obj`'s fields: which one is not known
        if o in (e + "->id",):
            return "own"
        if o == e + "->listen_id":
            return "listen"
        fn = self.facts.by_file.get(file, {}).get(fn_name)
        if fn is not None:
            for lhs, rhs, _ in fn.assigns:
                if lhs == o and rhs == e + "->id":
                    return "own"
                if lhs == o and rhs == e + "->listen_id":
                    return "listen"
            # A handler given the id and the event: every caller passes (ev->id, ev).
            i, j = fn.param_index(o), fn.param_index(e)
            if i is not None and j is not None:
                sites = [c for other in self.facts.functions for c in other.calls
                         if c.name == fn.name and self.facts.resolve(c.name, c.file) is fn
                         and max(i, j) < len(c.args)]
                if sites and all(c.args[i] == c.args[j] + "->id" for c in sites):
                    return "own"
        if getpos is not None:
            chan = self.get_channel(getpos)
            if chan is not None:
                return "channel" if chan == o else "other-channel"
        return None

    def _held(self, rec, ack=None):
        ev = ctext.norm(rec["ev"])
        obj = rec["obj"]
        pd = Pos(rec["call"])
        pg = Pos(rec["get"]) if "get" in rec else None
        if pg is not None:
            self._judged_with_get.add((pd.key, ctext.norm(obj)))
        elif (pd.key, ctext.norm(obj)) in self._judged_with_get:
            return  # judged already by a rule that saw the get (its channel, its type)
        found = self._destroy_call(pd, obj)
        if found is None:
            return
        kind, via, inner = found
        if rec["rule"] == "held-at-call-direct" and not ctext.mentions(ctext.norm(obj), ev):
            return  # the direct form is only for a call on the event's own id
        if "use" in rec and not self.use_is_real(Pos(rec["use"]), ev):
            return
        relation = self._relation(ev, obj, via, pd.fn, pd.file, pg)
        # The types the event can have at the call.
        types = None
        if pg is not None:
            types = self.get_types(pg)
        if types is None:
            types = self.types_on_the_way(pd, inner)
        if relation == "other-channel":
            if kind == "channel":
                return  # another channel than the event's
            relation = None
        listening = ctext.norm(obj) in self.listen_ids(pd.file, pd.fn)
        if kind in ("id", "migrate") and types is not None:
            if types <= {CONNECT_REQUEST} and relation != "listen" and not listening:
                return  # a request counts against its listen id only: any other id is free
            if CONNECT_REQUEST not in types and listening:
                return  # a listen id gets no event but connection requests
        if listening and relation is None:
            relation = "listen"
        if kind == "qp" and (types is None or DISCONNECTED not in types):
            return
        own_thread = ack is not None or pg is None or self.get_origin(pg) == "get"
        name = _DESTROY_KIND[kind][0 if own_thread else 1]
        call = _DESTROY_KIND[kind][2]
        held = "the event `%s`" % ev
        if pg is not None:
            held += " got at line %d" % pg.line
        if ack is not None:
            held += (" is held (acked only at line %d)" % ack.line if pg is None
                     else " and acked only at line %d" % ack.line)
        elif own_thread:
            held += ", not acked yet"
        else:
            held += " (from a function returning it: another thread may have got it), " \
                    "not acked yet"
        if kind == "channel":
            tail = ("rdma_destroy_event_channel frees the channel, whose events must all be "
                    "acked first" + ("" if relation else " (if the event came from it)"))
        elif kind == "qp":
            tail = ("rdma_destroy_qp while the DISCONNECTED is unacked"
                    + ("" if relation == "own" else " (if it is the event of this id)"))
        else:
            waits = "%s waits for that ack forever" % call
            if own_thread:
                waits += ", and this thread holds it"
            if relation == "own":
                tail = waits
            elif relation == "listen":
                tail = waits + " (a CONNECT_REQUEST counts against its listen id)"
            else:
                tail = "if it is an event of this id (or a CONNECT_REQUEST of this listen " \
                       "id), " + waits
        self.at_call(name, pd, inner, call, "{CALL}() while %s: %s" % (held, tail))

    def at_call(self, kind, pd, inner, default_name, message):
        """Adds the finding of a call at pd, which may be a helper doing the library call at
        `inner` places: reported there when the helper is in the same file (a handler), else
        at pd. `{CALL}` in `message` is the library call's name."""
        places = [p for p in inner if p.file == pd.file] if inner else []
        if not places:
            c = self.call_at(pd)
            name = inner[0].name if inner else default_name
            note = "" if not inner else " (through %s())" % (c.name if c else "a helper")
            self.add(Finding(kind, pd.file, pd.line, pd.col, message.replace("{CALL}", name) + note))
            return
        for f, l, col, cname, _ in places:
            note = ""
            if (f, l, col) != pd.key:
                c = self.call_at(pd)
                note = " (through %s() at line %d)" % (c.name if c else "a helper", pd.line)
            self.add(Finding(kind, f, l, col, message.replace("{CALL}", cname) + note))

    def _verbs_destroy(self, pos, obj, prop):
        """(API name, inner places) of a destroy call at pos on obj (prop: destroy_cq or
        destroy_verbs), or None when that call does not destroy obj."""
        c = self.call_at(pos)
        if c is None:
            return None
        table = api.CQ_DESTROY if prop == "destroy_cq" else api.VERBS_DESTROY
        if c.name in table:
            return c.name, []
        s = self.summaries.for_name(c.name, c.file)
        if s is None:
            return None
        o = ctext.norm(obj)
        for j, a in enumerate(c.args):
            if a == o and j in s.props[prop]:
                inner = sorted(s.places(prop, j))
                return (inner[0].name if inner else c.name), inner
        return None

    # --- completion events ----------------------------------------------------------------

    def _cq_never_acked(self, rec):
        pg, px = Pos(rec["get"]), Pos(rec["exit"])
        cq = ctext.norm(rec["cq"])
        if "use" in rec and not self.use_is_real(Pos(rec["use"]), cq, "cq"):
            return
        end = self.path_end(px, (cq,))
        if end is None:
            return
        severity, where = end
        what = "of `%s` " % cq if cq else ""
        c = self.call_at(pg)
        if not cq and c is not None:
            what = "that %s() returned with its CQ (the value is dropped) " % c.name
        if severity == "warning" and not self.acks_cq_after(pg, px):
            # Completion events are often acked in a batch elsewhere, or here under a count
            # (`if (n > 0) ibv_ack_cq_events(cq, n)`): a path owes its ack only in a function
            # that acks them itself, and only when it leaves before reaching any of its acks.
            return
        self.add(Finding("cq-never-acked", px.file, px.line, px.col,
                         "the completion event %sgot at line %d is not acked on this path (%s):"
                         " ibv_destroy_cq of its CQ would wait forever" % (what, pg.line, where),
                         severity))

    def acks_cq_after(self, pg, px):
        """Whether the function of a CQ get acks completion events itself after the get, and
        the exit at px comes before every such ack (in the text: a path that went by an ack
        under a condition, a batch's count, is not taken for one that skips it)."""
        fn = self.facts.by_file.get(pg.file, {}).get(pg.fn)
        if fn is None:
            return False
        acks = []
        for c in fn.calls:
            if (c.line, c.col) <= (pg.line, pg.col):
                continue
            s = self.summaries.for_name(c.name, c.file)
            if c.name in api.CQ_ACK or (s is not None and s.props["ack_cq"]):
                acks.append((c.line, c.col))
        return bool(acks) and all((px.line, px.col) < a for a in acks)

    def _cq_held_at_destroy(self, rec):
        pg, pd = Pos(rec["get"]), Pos(rec["call"])
        cq, obj = ctext.norm(rec["cq"]), ctext.norm(rec["obj"])
        if not self.use_is_real(Pos(rec["use"]), cq, "cq"):
            return
        found = self._verbs_destroy(pd, obj, "destroy_cq")
        if found is None:
            return
        name, inner = found
        tail = "ibv_destroy_cq waits for that ack forever"
        if obj != cq:
            tail = "if the event is `%s`'s, %s" % (obj, tail)
        self.at_call("cq-destroy-with-unacked", pd, inner, name,
                     "{CALL}(%s) while the completion event of `%s` got at line %d is not acked: %s"
                     % (obj, cq, pg.line, tail))

    def _cq_destroy_then_ack(self, rec):
        pd, pa = Pos(rec["call"]), Pos(rec["ack"])
        cq = ctext.norm(rec["cq"])
        found = self._verbs_destroy(pd, cq, "destroy_cq")
        if found is None:
            return
        name, inner = found
        self.at_call("cq-destroy-with-unacked", pd, inner, name,
                     "{CALL}(%s) while an event of `%s` is still unacked (acked only at line %d, "
                     "after it): ibv_destroy_cq waits for that ack forever" % (cq, cq, pa.line))
        self.add(Finding("cq-ack-after-destroy", pa.file, pa.line, pa.col,
                         "ibv_ack_cq_events(%s) after the CQ was destroyed at line %d: it acks "
                         "freed memory" % (cq, pd.line)))

    def _cq_ack_twice(self, rec):
        p1, p2 = Pos(rec["first"]), Pos(rec["second"])
        cq = ctext.norm(rec["cq"])
        if self.flag_parts(p1, p2):
            return
        self.add(Finding("cq-over-ack", p2.file, p2.line, p2.col,
                         "`%s` acked again with no ibv_get_cq_event since its ack at line %d: "
                         "more acks than events, and ibv_destroy_cq waits until the two are "
                         "equal" % (cq, p1.line)))

    def flag_parts(self, p1, p2):
        """A block around the first ack sets a flag (`failed = 1`) that the way to the second
        must find clear: the second ack is under `if (!failed)`, or in a loop whose condition
        asks `!failed` (glusterfs's receive thread). The two are on no one path."""
        src = self.src(p1.file)
        flags = set()
        for block in src.blocks_of(p1.line, p1.col):
            flags |= set(re.findall(r"\b(\w+)\s*=\s*(?:1|true)\s*;", block))
        for f in flags:
            if src.flag_guard_of(p2.line, p2.col) == f:
                return True
            if any(re.search(r"!\s*%s\b" % re.escape(f), c)
                   for c in src.loop_conditions(p2.line, p2.col)):
                return True
        return False

    def _cq_ack_count(self, rec):
        pg, pa = Pos(rec["get"]), Pos(rec["ack"])
        cq, n = ctext.norm(rec["cq"]), ctext.norm(rec["n"])
        fn = self.facts.by_file.get(pa.file, {}).get(pa.fn)
        polled = [line for lhs, rhs, line in (fn.assigns if fn else ())
                  if lhs == n and rhs.startswith("ibv_poll_cq(")]
        if polled:
            self.add(Finding("cq-over-ack", pa.file, pa.line, pa.col,
                             "ibv_ack_cq_events(%s, %s) acks the count of work completions "
                             "ibv_poll_cq returned (line %d), not of the completion events got "
                             "(one at line %d): too many when it polled several, none when it "
                             "polled none, and ibv_destroy_cq waits until acks equal events"
                             % (cq, n, polled[0], pg.line)))
            return
        if not re.fullmatch(r"\d+", n) or int(n) < 2:
            return
        src = self.src(pa.file)
        if src.in_loop(pg.line, pg.col) or src.in_loop(pa.line, pa.col):
            return
        self.add(Finding("cq-over-ack", pa.file, pa.line, pa.col,
                         "ibv_ack_cq_events(%s, %s) after one ibv_get_cq_event (line %d): more "
                         "acks than events, and ibv_destroy_cq waits until the two are equal"
                         % (cq, n, pg.line)))

    def _cq_wrong(self, rec):
        pg, pa = Pos(rec["get"]), Pos(rec["ack"])
        cq, other = ctext.norm(rec["cq"]), ctext.norm(rec["other"])
        if cq == other or self.compares(pg, cq, other):
            return
        c = self.call_at(pg)
        if c is not None and c.name in api.CQ_GET and c.args and c.args[0] == other + "_channel":
            return  # a cm_id's recv_cq_channel carries its recv_cq only (librdmacm's pairing)
        self.add(Finding("cq-ack-wrong-cq", pa.file, pa.line, pa.col,
                         "acks `%s`, but the completion event got at line %d is `%s`'s and the "
                         "two are never compared: on a channel with several CQs this acks the "
                         "wrong one, and both destroys then wait forever" % (other, pg.line, cq)))

    def compares(self, pos, a, b):
        """Whether the function at pos compares `a` with `b` (== or !=) anywhere."""
        fn = self.facts.by_file.get(pos.file, {}).get(pos.fn)
        if fn is None:
            return False
        src = self.src(pos.file)
        body = re.sub(r"\s+", "", src.masked[src.offset(fn.line, 0): src.offset(fn.end + 1, 0)])
        for x, y in ((a, b), (b, a)):
            if re.search(re.escape(x) + r"[!=]=" + re.escape(y) + r"(?![\w\[.>])", body):
                return True
        return False

    # --- async events ---------------------------------------------------------------------

    def _async_never_acked(self, rec):
        pg, px = Pos(rec["get"]), Pos(rec["exit"])
        ev = ctext.norm(rec["ev"])
        if not self.use_is_real(Pos(rec["use"]), ev, "as"):
            return
        if not self.is_local(pg, ev):
            return  # kept in memory that outlives the function (a field, a global)
        end = self.path_end(px, (ev,))
        if end is None:
            return
        severity, where = end
        self.add(Finding("async-never-acked", px.file, px.line, px.col,
                         "the async event `%s` got at line %d is not acked on this path (%s): "
                         "the destroy of its object would wait forever" % (ev, pg.line, where),
                         severity))

    def _async_ack_twice(self, rec):
        p1, p2 = Pos(rec["first"]), Pos(rec["second"])
        ev = ctext.norm(rec["ev"])
        self.add(Finding("async-double-ack", p2.file, p2.line, p2.col,
                         "`%s` acked again: ibv_ack_async_event at line %d already acked it; "
                         "its object's destroy then waits forever (more acks than events)"
                         % (ev, p1.line)))

    def element_kinds(self, file, fn_name, ev):
        """The kinds of object (qp, cq, srq) the code of a function reads from the async
        event `ev` (`ev.element.cq`): an event is about one kind only."""
        fn = self.facts.by_file.get(file, {}).get(fn_name)
        if fn is None:
            return set()
        body = self.src(file).masked
        start, end = self.src(file).offset(fn.line, 0), self.src(file).offset(fn.end + 1, 0)
        text = re.sub(r"\s+", "", body[start:end])
        return set(re.findall(re.escape(ev) + r"(?:\.|->)element\.(qp|cq|srq|wq)\b", text))

    def _async_unrelated(self, pd, ev, destroy_name):
        kinds = self.element_kinds(pd.file, pd.fn, ev)
        kind = {"ibv_destroy_qp": "qp", "rdma_destroy_qp": "qp", "ibv_destroy_cq": "cq",
                "ibv_destroy_srq": "srq"}.get(destroy_name)
        return bool(kinds) and kind is not None and kind not in kinds

    def _async_destroy(self, pd, ev, obj, held):
        """An async event held at the destroy at pd (HELD: how, for the message)."""
        found = self._verbs_destroy(pd, obj, "destroy_verbs")
        if found is None or self._async_unrelated(pd, ev, found[0]):
            return
        name, inner = found
        self.at_call("async-destroy-with-unacked", pd, inner, name,
                     "{CALL}(%s) while the async event `%s` %s: if it is an event of this "
                     "object, the destroy waits for that ack forever" % (obj, ev, held))

    def _async_held_at_destroy(self, rec):
        ev = ctext.norm(rec["ev"])
        if self.use_is_real(Pos(rec["use"]), ev, "as"):
            self._async_destroy(Pos(rec["call"]), ev, ctext.norm(rec["obj"]),
                                "got at line %d is not acked" % Pos(rec["get"]).line)

    def _async_destroy_then_ack(self, rec):
        self._async_destroy(Pos(rec["call"]), ctext.norm(rec["ev"]), ctext.norm(rec["obj"]),
                            "is held (acked only at line %d, after it)" % Pos(rec["ack"]).line)

    # ids and channels used after their destroy

    def _after_destroy(self, rec, kind, what):
        pd, pu = Pos(rec["destroy"]), Pos(rec["use"])
        obj = ctext.norm(rec["obj"])
        if pd.key == pu.key:
            return  # the same call met again round a loop: another object by then
        src = self.src(pd.file)
        if not re.fullmatch(r"\w+", obj) and src.in_loop(pd.line, pd.col) and \
                src.in_loop(pu.line, pu.col):
            return  # `ids[i]`, `node->id` in a loop: each turn names another object
        c = self.call_at(pu)
        use = "%s(%s)" % (c.name, obj) if c is not None else "`%s`" % obj
        dc = self.call_at(pd)
        self.add(Finding(kind, pu.file, pu.line, pu.col,
                         "%s after %s(%s) at line %d freed the %s" % (
                             use, dc.name if dc else "its destroy", obj, pd.line, what)))

    def _field_use_after_destroy(self, rec):
        """A helper destroyed ids (or a channel) it reaches through a field of Y; then a helper
        uses one through the same field of Y, or a call uses a name the function gave that
        field (`conn->cm_id = cm_id`). Fields written between (a new id in `nodes[i].id`, the
        array allocated again) end it."""
        pd, pu = Pos(rec["destroy"]), Pos(rec["use"])
        kind, y = rec["kind"], ctext.norm(rec["obj"])
        dc, uc = self.call_at(pd), self.call_at(pu)
        fn = self.facts.by_file.get(pd.file, {}).get(pd.fn)
        if dc is None or uc is None or fn is None or pd.key == pu.key or self.fields is None:
            return
        base = fields.split(y)
        if base is None:
            return
        destroyed = self._field_keys(dc, y, base, "destroys", kind)
        if "used" in rec:
            used = self._named_field(fn, ctext.norm(rec["used"]), base, pd)
            used = {used: set()} if used is not None else {}
        else:
            used = self._field_keys(uc, y, base, "uses", kind)
        hit = sorted(set(destroyed) & set(used))
        if not hit or self._field_written_between(fn, base, hit[0], pd, pu):
            return
        path = hit[0]
        inner = sorted(destroyed[path], key=lambda p: (p.file, p.line))[0]
        what = "cm_id" if kind == "id" else "event channel"
        where = "%s:%d" % (os.path.basename(inner.file), inner.line)
        if used[path]:
            u = sorted(used[path], key=lambda p: (p.file, p.line))[0]
            use = "%s(%s) reaches `%s` (%s at %s:%d)" % (
                uc.name, y, fields.display(base[0], path), u.name, os.path.basename(u.file), u.line)
        else:
            use = "%s(%s), which is `%s`," % (uc.name, ctext.norm(rec["used"]),
                                               fields.display(base[0], path))
        self.add(Finding("use-after-destroy-id" if kind == "id" else "use-after-destroy-channel",
                         pu.file, pu.line, pu.col,
                         "%s after %s(%s) at line %d freed that %s (%s at %s)" % (
                             use, dc.name, y, pd.line, what, inner.name, where)))

    def _field_keys(self, call, y, base, table, kind):
        """{path: places} of the field-reached objects of KIND a helper call destroys or uses
        through its argument Y (`base`: Y's own name and path). An element of an array counts
        as a destroy only in a loop (each element)."""
        fs = self.fields.for_call(call)
        if fs is None or y not in call.args:
            return {}
        j = call.args.index(y)
        out = {}
        for k, places in getattr(fs, table).items():
            if k.kind != kind or k.param != j:
                continue
            if table == "destroys" and "[]" in k.path:
                places = {p for p in places if self.src(p.file).in_loop(p.line, p.col)}
                if not places:
                    continue
            out.setdefault(fields.norm_path(base[1] + k.path), set()).update(places)
        return out

    @staticmethod
    def _named_field(fn, name, base, pd):
        """The path of Y's field that `name` is in fn: given it, or given to it, before pd
        (`conn->cm_id = cm_id`), or the field itself (`conn->cm_id`); None otherwise."""
        sp = fields.split(name)
        if sp is not None and sp[0] == base[0] and sp[1]:
            return sp[1]
        for lhs, rhs, line in fn.assigns:
            if line >= pd.line:
                continue
            for a, b in ((lhs, rhs), (rhs, lhs)):
                sp = fields.split(a)
                if b == name and sp is not None and sp[0] == base[0] and sp[1]:
                    return sp[1]
        return None

    def _field_written_between(self, fn, base, path, pd, pu):
        """Whether fn writes Y's field at `path` (or a field on the way to it) between the
        destroy and the use: assigned, its address handed to a call, or written by a helper.
        Round a loop (the use before the destroy), anything after the destroy or before the
        use counts."""
        def between(line):
            if pu.line > pd.line:
                return pd.line < line < pu.line
            return line > pd.line or line < pu.line

        def on_the_way(p):
            return fields.on_the_way(fields.norm_path(p), path)

        for lhs, _, line in fn.assigns:
            sp = fields.split(lhs)
            if between(line) and sp is not None and sp[0] == base[0] and on_the_way(sp[1]):
                return True
        for c in fn.calls:
            if not between(c.line):
                continue
            fs = self.fields.for_call(c)
            for j, a in enumerate(c.args):
                sp = fields.split(a)
                if sp is None or sp[0] != base[0]:
                    continue
                if a.startswith("&") and sp[1] and on_the_way(sp[1]):
                    return True
                if fs is not None and any(
                        i == j and on_the_way(sp[1] + p) for i, p in fs.writes):
                    return True
        return False

    def _use_after_destroy_id(self, rec):
        self._after_destroy(rec, "use-after-destroy-id", "cm_id")

    def _use_after_destroy_channel(self, rec):
        self._after_destroy(rec, "use-after-destroy-channel", "event channel")

    def destroyed_before(self, pos, obj):
        """Whether the function at pos calls a destroy of `obj` before pos (a reject of an id
        already destroyed is use-after-destroy-id's business, not a leak)."""
        fn = self.facts.by_file.get(pos.file, {}).get(pos.fn)
        if fn is None:
            return False
        for c in fn.calls:
            if (c.line, c.col) >= (pos.line, pos.col) or obj not in c.args:
                continue
            j = c.args.index(obj)
            if c.name in api.CM_DESTROY["id"] and j == 0:
                return True
            s = self.summaries.for_name(c.name, c.file)
            if s is not None and j in s.props["destroy_id"]:
                return True
        return False

    def _reject_unkept(self, rec):
        self._unkept_rejects.add((Pos(rec["reject"]).key, ctext.norm(rec["obj"])))

    def _rejected_not_destroyed(self, rec):
        pr, px = Pos(rec["reject"]), Pos(rec["exit"])
        obj = ctext.norm(rec["obj"])
        # The id must be lost when the function returns: a local name, or the id of a local
        # event (once acked, nothing else holds it); a parameter is still the caller's.
        base = obj[:-len("->id")] if obj.endswith("->id") else obj
        if not self.is_local(pr, base) or self.destroyed_before(pr, obj) or \
                (pr.key, obj) not in self._unkept_rejects:
            return
        end = self.path_end(px, (obj, base))
        if end is None:
            return
        severity, where = end
        c = self.call_at(pr)
        self.add(Finding("rejected-id-never-destroyed", px.file, px.line, px.col,
                         "`%s`, rejected by %s() at line %d, is never destroyed on this path "
                         "(%s): it keeps a kernel cm_id until the process exits" % (
                             obj, c.name if c else "rdma_reject", pr.line, where), severity))

    def _held_at_call(self, rec):
        self._held(rec)

    def _held_at_call_direct(self, rec):
        self._held(rec)

    def _get_call_ack(self, rec):
        self._held(rec, ack=Pos(rec["ack"]))

    def _call_then_ack(self, rec):
        self._held(rec, ack=Pos(rec["ack"]))
