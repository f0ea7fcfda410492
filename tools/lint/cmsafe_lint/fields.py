"""Ids and event channels a function reaches through a field of a parameter
(`ctx->cma_master.nodes[i].cma_id`, `conn->cm_id`): which it destroys, which it uses and which
fields it writes, computed to a fixpoint through helpers of helpers as summary.py does for the
parameters themselves. A retry that destroys a context's ids in one helper and resolves them
again in another (perftest's), or a clean-up that destroys `conn->cm_id` before the caller
rejects `cm_id` (tgt's), is a use after destroy that no single parameter shows.

A path is kept as its fields with the separators made one (`->` and `.`: `&x->a` then `->b` is
`x->a.b`) and each index made `[]`: an array's elements are one object here, so a destroy of
an element counts only where it destroys them all (in a loop: judge.py checks).
"""

import re
from collections import namedtuple

from . import api
from .summary import Place, add_places

# Library calls that use an id (argument 0) or a channel (the argument given).
ID_USES = frozenset((
    "rdma_accept", "rdma_reject", "rdma_connect", "rdma_get_request", "rdma_disconnect",
    "rdma_bind_addr", "rdma_resolve_addr", "rdma_resolve_route", "rdma_listen",
    "rdma_create_qp", "rdma_set_option", "rdma_destroy_qp", "rdma_migrate_id",
    "rdma_destroy_id", "rdma_notify", "rdma_establish", "rdma_join_multicast",
    "rdma_leave_multicast", "rdma_init_qp_attr"))
CHANNEL_USES = {"rdma_get_cm_event": 0, "rdma_create_id": 0, "rdma_migrate_id": 1,
                "rdma_destroy_event_channel": 0}
DESTROYS = {"rdma_destroy_id": ("id", 0), "rdma_destroy_event_channel": ("channel", 0)}

# One field-reached object of a parameter: "id" or "channel", the parameter's index, the path.
Key = namedtuple("Key", "kind param path")

_EXPR = re.compile(r"^&?(\w+)((?:(?:->|\.)\w+|\[[^\]]*\])*)$")


def norm_path(path):
    """A path with one separator and indices as `[]` (see the module doc)."""
    return re.sub(r"\[[^\]]*\]", "[]", path.replace("->", "."))


def split(expr, aliases=None):
    """(base name, normalized path) of an expression made of a name and fields or indices
    (`&` aside), through ALIASES ({local: (base, path)}: a local given `&ctx->nodes[i]`);
    None for any other expression."""
    m = _EXPR.match(expr or "")
    if not m:
        return None
    base, path = m.group(1), norm_path(m.group(2))
    if aliases and base in aliases:
        b, p = aliases[base]
        return b, p + path
    return base, path


def on_the_way(field, path):
    """Whether FIELD is PATH or a field PATH goes through (`.m.nodes` for `.m.nodes[].id`)."""
    return path == field or path.startswith(field + ".") or path.startswith(field + "[")


def display(base, path):
    """`c->m.nodes[].id` for the base `c` and the path `.m.nodes[].id`."""
    return base + "->" + path[1:] if path.startswith(".") else base + path


class FieldSummary:
    def __init__(self):
        self.destroys = {}  # Key -> {Place}
        # The same, but only destroys no ack of that parameter (an event) comes before in the
        # function: what an event's holder waits for (SPDK acks the DISCONNECTED in its handler
        # and only then disconnects the qpair of its id).
        self.held_destroys = {}
        self.uses = {}  # Key -> {Place}
        self.writes = set()  # (param, path): assigned, or its address handed to a call


# The macros that give the struct a member is in (`rqpair = SPDK_CONTAINEROF(qpair, struct
# spdk_nvmf_rdma_qpair, qpair)`): the same object here, as its member's address is.
_CONTAINER_OF = re.compile(r"^(?:container_of|SPDK_CONTAINEROF|containerof|CONTAINER_OF)"
                           r"\((&?\w+(?:(?:->|\.)\w+|\[[^\]]*\])*),")


def aliases_of(fn):
    """The locals of `fn` given the address or value of a parameter's field (`node =
    &ctx->nodes[i]`), or the struct a parameter is a member of (container_of), as {local:
    (param name, path)}."""
    out = {}
    for lhs, rhs, _ in fn.assigns:
        if not re.fullmatch(r"\w+", lhs) or lhs in fn.params:
            continue
        m = _CONTAINER_OF.match(rhs)
        if m:
            sp = split(m.group(1), out)
            if sp and sp[0] in fn.params:
                out[lhs] = sp
            continue
        sp = split(rhs, out)
        if sp and sp[1] and sp[0] in fn.params:
            out[lhs] = sp
    return out


class FieldSummaries:
    def __init__(self, facts, summaries=None):
        self.facts = facts
        self.summaries = summaries  # summary.Summaries: which helpers ack their parameters
        self.of = {fn: FieldSummary() for fn in facts.functions}
        self.aliases = {fn: aliases_of(fn) for fn in facts.functions}
        changed, rounds = True, 0
        while changed and rounds < 20:
            rounds += 1
            changed = False
            for fn in facts.functions:
                changed |= self._one(fn, self.of[fn])

    def for_call(self, call):
        """The field summary of the function a call reaches, or None (a library call)."""
        fn = self.facts.resolve(call.name, call.file)
        return self.of.get(fn) if fn is not None else None

    def reached(self, fn, expr):
        """(parameter index, path) of `expr` in `fn` when it is a parameter or reached through
        one; None otherwise."""
        sp = split(expr, self.aliases[fn])
        if sp is None or sp[0] not in fn.params:
            return None
        return fn.params.index(sp[0]), sp[1]

    def _acked_lines(self, fn):
        """{parameter index: the first line fn acks it on}: rdma_ack_cm_event or a helper that
        acks that argument."""
        out = {}
        for c in fn.calls:
            if c.name in api.CM_ACK:
                acked = [c.args[api.CM_ACK[c.name]]] if c.args else []
            else:
                cs = self.summaries.for_name(c.name, c.file) if self.summaries else None
                acked = [c.args[j] for j in (cs.props["ack_cm"] if cs else ())
                         if j < len(c.args)]
            for a in acked:
                if a in fn.params:
                    out.setdefault(fn.params.index(a), c.line)
        return out

    def _one(self, fn, s):
        changed = False
        acked = self._acked_lines(fn)

        def held(i, line):
            return not (i in acked and acked[i] < line)

        for c in fn.calls:
            here = {Place(c.file, c.line, c.col, c.name, ())}
            cs = self.for_call(c)
            for j, a in enumerate(c.args):
                r = self.reached(fn, a)
                if r is None:
                    continue
                i, path = r
                if a.startswith("&") and path:
                    changed |= _add_write(s, (i, path))
                if cs is None:
                    # Not the caller's object: one this function made (and destroys on its
                    # failure path), or one it clears after the destroy.
                    fresh = self._written_before(fn, (i, path), c.line)
                    if path and c.name in DESTROYS and DESTROYS[c.name][1] == j and \
                            not fresh and not self._cleared_after(fn, (i, path), c.line):
                        key = Key(DESTROYS[c.name][0], i, path)
                        changed |= add_places(s.destroys, key, here)
                        if held(i, c.line):
                            changed |= add_places(s.held_destroys, key, here)
                    if path and c.name in ID_USES and j == 0 and not fresh:
                        changed |= add_places(s.uses, Key("id", i, path), here)
                    if path and CHANNEL_USES.get(c.name) == j and not fresh:
                        changed |= add_places(s.uses, Key("channel", i, path), here)
                    continue
                hop = (c.file, c.line, c.col)
                tables = [(cs.destroys, s.destroys), (cs.uses, s.uses)]
                if held(i, c.line):
                    tables.append((cs.held_destroys, s.held_destroys))
                for table, mine in tables:
                    for k, places in list(table.items()):
                        if k.param == j and _short(path + k.path) and not (
                                mine is s.uses and self._written_before(
                                    fn, (i, path + k.path), c.line)):
                            down = {Place(p.file, p.line, p.col, p.name, (hop,) + p.via)
                                    for p in places}
                            changed |= add_places(mine, Key(k.kind, i, path + k.path), down)
                for k_param, k_path in list(cs.writes):
                    if k_param == j and _short(path + k_path):
                        changed |= _add_write(s, (i, path + k_path))
        for lhs, rhs, _ in fn.assigns:
            for r in self._written(fn, lhs, rhs):
                changed |= _add_write(s, r)
        return changed

    def _written(self, fn, lhs, rhs):
        """The parameters' fields an assignment writes: its left side, and each field whose
        address it takes (`pp = cond ? &c->a : &c->b`: written through `pp` later)."""
        if lhs in self.aliases[fn]:
            return []  # `node = &c->nodes[i]`: another name for the field, not a write
        out = []
        r = self.reached(fn, lhs)
        if r is not None and r[1]:
            out.append(r)
        for m in re.finditer(r"&(\w+(?:(?:->|\.)\w+|\[[^\]]*\])+)", rhs):
            r = self.reached(fn, m.group(1))
            if r is not None and r[1]:
                out.append(r)
        return out

    def _written_before(self, fn, reached, line):
        """Whether `fn` gave the field (or one on the way to it) a value of its own before LINE
        (`c->channel = rdma_create_event_channel()`): what it uses there is not the caller's."""
        i, path = reached
        for lhs, rhs, ln in fn.assigns:
            if ln < line and any(r[0] == i and on_the_way(r[1], path)
                                 for r in self._written(fn, lhs, rhs)):
                return True
        for c in fn.calls:
            if c.line >= line:
                continue
            for a in c.args:
                r = self.reached(fn, a) if a.startswith("&") else None
                if r is not None and r[0] == i and r[1] and on_the_way(r[1], path):
                    return True
        return False

    def _cleared_after(self, fn, reached, line):
        """Whether `fn` writes the field it destroys at LINE after it (`node->id = NULL`): its
        caller then finds no dangling id there."""
        return any(ln > line and self.reached(fn, lhs) == reached for lhs, _, ln in fn.assigns)


# Paths longer than this are not followed: a recursive helper handing on `p->next` would
# otherwise grow them at every round of the fixpoint.
MAX_FIELDS = 6


def _short(path):
    return path.count(".") <= MAX_FIELDS


def _add_write(s, w):
    if w in s.writes:
        return False
    s.writes.add(w)
    return True
