"""Helper summaries: what each function of the files analyzed does with its parameters and
what it returns, in terms of the rules (acks, gets, destroys, reads, keeps), computed from the
facts of pass 1 until nothing changes.

A property is per parameter index, with the places of the library calls behind it (a destroy
inside a helper is reported at the helper's own `rdma_destroy_id`). Summaries say what happens
on SOME path of the helper; `ack_*_all` (the helper acks on EVERY path, checked by spatch in
lint.py) is the only all-paths property, because an ack is where use-after-ack and double-ack
start, and a helper that acks only on its error path must not start them.
"""

import re
from collections import namedtuple

from . import api, ctext

# Where a property comes from: the library call (file, line, col, its name) and the call sites
# (file, line, col) the way down to it from the function summarized (`via`, outermost first).
Place = namedtuple("Place", "file line col name via")

# Per-parameter properties.
PROPS = (
    "ack_cm", "ack_cq", "ack_as",  # acks the event (CQ, async event) it is given
    "get_cm_out", "get_cq_out", "get_as_out",  # gets an event into this out parameter
    "reads",  # dereferences it
    "keeps",  # stores it, returns it, or hands it to a call that may keep it
    "destroy_id", "destroy_migrate", "destroy_channel", "destroy_qp",  # CM calls that wait
    "destroy_id_ev", "destroy_migrate_ev", "destroy_qp_ev",  # the same on param->id (an event)
    "destroy_cq", "destroy_verbs",
    "reject",  # rejects this id (a connection request's)
    "call_param",  # calls this parameter (a function pointer): {i: [(callee arg, own param)]}
)

# The library calls as summaries of their own: which argument each does what to (the places
# are the calls themselves, filled in where a call is met: _through).
_API = {}
_API_TABLES = (
    (api.CM_ACK, "ack_cm"), (api.CM_GET, "get_cm_out"), (api.CM_REJECT, "reject"),
    (api.CQ_ACK, "ack_cq"), (api.CQ_GET, "get_cq_out"), (api.CQ_DESTROY, "destroy_cq"),
    (api.AS_ACK, "ack_as"), (api.AS_GET, "get_as_out"), (api.VERBS_DESTROY, "destroy_verbs"),
) + tuple((table, "destroy_" + kind) for kind, table in api.CM_DESTROY.items())
for _table, _prop in _API_TABLES:
    for _name, _i in _table.items():
        _API.setdefault(_name, {}).setdefault(_prop, {})[_i] = set()

CM_EVENT_PTR = "structrdma_cm_event*"
CQ_PTR = "structibv_cq*"
ASYNC_EVENT = "structibv_async_event"


class Summary:
    def __init__(self, fn):
        self.fn = fn
        self.props = {p: {} for p in PROPS}
        self.ack_cm_all, self.ack_cq_all, self.ack_as_all = set(), set(), set()
        self.ret_cm = False  # returns an event it got (or a helper got), unacked
        self.ret_cm_typed = False  # returns a struct rdma_cm_event *, origin unseen
        self.ret_cq = False  # returns the CQ of a completion event it got, unacked
        self.ret_as = False  # returns (by value) an async event it got, unacked
        self.chan = None  # the parameter a CM event it hands out was got from (a channel)
        self.listens = set()  # parameters it calls rdma_listen on
        self.ret_listen = False  # returns an id it called rdma_listen on

    def has(self, prop, i):
        return i in self.props[prop]

    def places(self, prop, i):
        return self.props[prop].get(i, set())

    def add(self, prop, i, places):
        """Adds `places` to property `prop` of parameter i; whether anything changed."""
        return add_places(self.props[prop], i, places)


def add_places(table, key, places):
    """Adds PLACES to TABLE[KEY] (a new key: those places); whether anything changed."""
    if key not in table:
        table[key] = set(places)
        return True
    before = len(table[key])
    table[key] |= places
    return len(table[key]) != before


def _through(call, callee_summary, places):
    """A callee's places seen from a call: the call itself for a library call, else the
    callee's places one call site further down."""
    if callee_summary is None:
        return {Place(call.file, call.line, call.col, call.name, ())}
    hop = (call.file, call.line, call.col)
    return {Place(p.file, p.line, p.col, p.name, (hop,) + p.via)
            for p in places if isinstance(p, Place)}


def _callee(facts, call):
    return facts.resolve(call.name, call.file)


def _call_name(expr):
    m = re.match(r"^(\w+)\(", expr)
    return m.group(1) if m else None


is_library = api.is_library


class Summaries:
    def __init__(self, facts):
        self.facts = facts
        self.of = {}  # Function -> Summary
        for fn in facts.functions:
            self.of[fn] = Summary(fn)
        self._compute()

    def for_name(self, name, from_file):
        if name in _API:
            return None  # the library's own call, whatever the files define under its name
        fn = self.facts.resolve(name, from_file)
        return self.of.get(fn) if fn else None

    def api_props(self, name):
        return _API.get(name)

    def callee_props(self, call):
        """The callee's property table ({prop: {index: places}}), its Summary or None, and
        whether it is unknown (neither the library's known calls nor defined here)."""
        if call.name in _API:
            return _API[call.name], None, False
        fn = _callee(self.facts, call) if not is_library(call.name) else None
        if fn is not None:
            s = self.of[fn]
            return s.props, s, False
        return {}, None, call.name not in api.BORROWERS

    # --- the fixpoint ---------------------------------------------------------------------

    def _compute(self):
        changed = True
        rounds = 0
        while changed and rounds < 20:
            rounds += 1
            changed = False
            for fn, s in self.of.items():
                changed |= self._one(fn, s)

    def got_locals(self, fn, family):
        """Names `fn` holds an event of `family` in: out parameters `&x` of a get, `x = helper()`
        of a helper returning one."""
        getp = {"cm": "get_cm_out", "cq": "get_cq_out", "as": "get_as_out"}[family]
        got = set()
        for c in fn.calls:
            props, _, _ = self.callee_props(c)
            for j in props.get(getp, {}):
                if j < len(c.args) and c.args[j].startswith("&"):
                    got.add(c.args[j][1:])
        for lhs, rhs, _ in fn.assigns:
            name = _call_name(rhs)
            if name:
                s = self.for_name(name, fn.file)
                if s and ((family == "cm" and (s.ret_cm or s.ret_cm_typed))
                          or (family == "cq" and s.ret_cq) or (family == "as" and s.ret_as)):
                    got.add(lhs)
        return got

    def _one(self, fn, s):
        changed = False
        params = fn.params
        for c in fn.calls:
            # A call of a parameter: a function pointer whose use depends on the caller.
            if c.name in params:
                k = params.index(c.name)
                mapping = [(j, params.index(a)) for j, a in enumerate(c.args) if a in params]
                old = s.props["call_param"].get(k)
                if old is None or not set(mapping) <= old:
                    s.props["call_param"][k] = (old or set()) | set(mapping)
                    changed = True
                continue
            props, cs, unknown = self.callee_props(c)
            for j, a in enumerate(c.args):
                i = fn.param_index(a)
                if i is not None:
                    for p in PROPS:
                        if p == "call_param":
                            continue
                        if j in props.get(p, {}):
                            changed |= s.add(p, i, _through(c, cs, props[p][j]))
                    if unknown and not is_library(c.name) or (
                            unknown and c.name.startswith("pthread_")):
                        changed |= s.add("keeps", i, set())
                if a.endswith("->id") and fn.param_index(a[:-4]) is not None and \
                        ctext.is_type(fn.param_types[fn.param_index(a[:-4])], CM_EVENT_PTR):
                    i = fn.param_index(a[:-4])  # the id of the event it is given
                    for p in ("destroy_id", "destroy_migrate", "destroy_qp"):
                        if j in props.get(p, {}):
                            changed |= s.add(p + "_ev", i, _through(c, cs, props[p][j]))
            # Higher order: a function of ours passed to a callee that calls that parameter.
            if cs is not None:
                for j, a in enumerate(c.args):
                    h = self.facts.resolve(a, c.file) if re.fullmatch(r"\w+", a) else None
                    if h is None or j not in cs.props["call_param"]:
                        continue
                    hs = self.of[h]
                    for h_arg, callee_param in cs.props["call_param"][j]:
                        if callee_param >= len(c.args):
                            continue
                        i = fn.param_index(c.args[callee_param])
                        if i is None:
                            continue
                        for p in PROPS:
                            if p != "call_param" and h_arg in hs.props[p]:
                                changed |= s.add(p, i, _through(c, hs, hs.props[p][h_arg]))
        # Out parameters filled with an event got here: `*out = ev`.
        for family, prop in (("cm", "get_cm_out"), ("cq", "get_cq_out"), ("as", "get_as_out")):
            got = None
            for lhs, rhs, line in fn.assigns:
                if lhs.startswith("*") and fn.param_index(lhs[1:]) is not None:
                    if got is None:
                        got = self.got_locals(fn, family)
                    if rhs in got:
                        changed |= s.add(prop, fn.param_index(lhs[1:]),
                                         {Place(fn.file, line, 0, "*" + lhs[1:], ())})
        # Stored (in a field, an array, through a pointer) or returned parameters are kept; a
        # plain name given a parameter is only another name for it.
        for lhs, rhs, _ in fn.assigns:
            i = fn.param_index(rhs)
            if i is not None and not re.fullmatch(r"\w+", lhs):
                changed |= s.add("keeps", i, set())
        for expr, _ in fn.returns:
            i = fn.param_index(expr)
            if i is not None:
                changed |= s.add("keeps", i, set())
        for name, _ in fn.derefs:
            i = fn.param_index(name)
            if i is not None and i not in s.props["reads"]:
                s.props["reads"][i] = set()
                changed = True
        # Returns.
        changed |= self._returns(fn, s)
        changed |= self._channel_and_listen(fn, s)
        return changed

    def _channel_and_listen(self, fn, s):
        """Where the CM events it hands out come from, and the listen ids it makes."""
        before = (s.chan, set(s.listens), s.ret_listen)
        if s.ret_cm or s.props["get_cm_out"]:
            for c in fn.calls:
                if c.name in api.CM_GET and c.args:
                    chan = c.args[0]
                else:
                    cs = self.for_name(c.name, fn.file)
                    if cs is None or cs.chan is None or cs.chan >= len(c.args) or not (
                            cs.ret_cm or cs.props["get_cm_out"]):
                        continue
                    chan = c.args[cs.chan]
                i = fn.param_index(chan)
                if i is not None:
                    s.chan = i
        if s.chan is None and s.ret_cm_typed:
            chans = [i for i, t in enumerate(fn.param_types)
                     if ctext.is_type(t, "structrdma_event_channel*")]
            if len(chans) == 1:
                s.chan = chans[0]  # its only channel parameter
        listened = set()
        for c in fn.calls:
            if c.name == "rdma_listen" and c.args:
                listened.add(c.args[0])
            cs = self.for_name(c.name, fn.file)
            if cs is not None:
                for i in cs.listens:
                    if i < len(c.args):
                        listened.add(c.args[i])
        for lhs, rhs, _ in fn.assigns:
            name = _call_name(rhs)
            cs = self.for_name(name, fn.file) if name else None
            if cs is not None and cs.ret_listen:
                listened.add(lhs)
        for name in listened:
            i = fn.param_index(name)
            if i is not None:
                s.listens.add(i)
        for expr, _ in fn.returns:
            name = _call_name(expr)
            cs = self.for_name(name, fn.file) if name else None
            # `return make_listener(...)`: a helper's listen id handed on as it comes.
            if expr in listened or (cs is not None and cs.ret_listen):
                s.ret_listen = True
        return before != (s.chan, s.listens, s.ret_listen)

    def listen_ids(self, fn):
        """The names in `fn` that hold a listen id: given to rdma_listen (or a helper that
        calls it), or got from a helper that returns one."""
        out = set()
        for c in fn.calls:
            if c.name == "rdma_listen" and c.args:
                out.add(c.args[0])
            cs = self.for_name(c.name, fn.file)
            if cs is not None:
                out |= {c.args[i] for i in cs.listens if i < len(c.args)}
        for lhs, rhs, _ in fn.assigns:
            name = _call_name(rhs)
            cs = self.for_name(name, fn.file) if name else None
            if cs is not None and cs.ret_listen:
                out.add(lhs)
        return out

    def _returns(self, fn, s):
        before = (s.ret_cm, s.ret_cm_typed, s.ret_cq, s.ret_as)
        for family in ("cm", "cq", "as"):
            got = self.got_locals(fn, family)
            acked = self._acked_names(fn, family)
            for expr, _ in fn.returns:
                name = _call_name(expr)
                hs = self.for_name(name, fn.file) if name else None
                via_helper = hs is not None and (
                    (family == "cm" and hs.ret_cm) or (family == "cq" and hs.ret_cq)
                    or (family == "as" and hs.ret_as))
                if (expr in got and expr not in acked) or via_helper:
                    if family == "cm":
                        s.ret_cm = True
                    elif family == "cq" and ctext.is_type(fn.type, CQ_PTR):
                        s.ret_cq = True
                    elif family == "as" and ctext.is_type(fn.type, ASYNC_EVENT):
                        s.ret_as = True
        if not s.ret_cm and ctext.is_type(fn.type, CM_EVENT_PTR):
            s.ret_cm_typed = True
        return before != (s.ret_cm, s.ret_cm_typed, s.ret_cq, s.ret_as)

    def _acked_names(self, fn, family):
        prop = {"cm": "ack_cm", "cq": "ack_cq", "as": "ack_as"}[family]
        out = set()
        for c in fn.calls:
            props, _, _ = self.callee_props(c)
            for j in props.get(prop, {}):
                if j < len(c.args):
                    a = c.args[j]
                    out.add(a[1:] if family == "as" and a.startswith("&") else a)
        return out
