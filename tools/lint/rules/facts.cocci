// cmsafe-lint, pass 1: the facts helper summaries are computed from (cmsafe_lint/summary.py).
// Every function defined, every call with its arguments, every return, assignment and
// dereference of a plain name, each with its place and the function it is in. One JSON object
// a line on stdout, prefixed "@F " so that nothing else spatch prints can be taken for one.

@initialize:python@
@@
import json

def emit(kind, p, **fields):
    q = p[0]
    rec = {"k": kind, "file": q.file, "line": int(q.line), "col": int(q.column),
           "line_end": int(q.line_end), "col_end": int(q.column_end), "fn": q.current_element}
    rec.update({k: str(v) for k, v in fields.items()})
    print("@F " + json.dumps(rec))

@def@
identifier fn;
parameter list ps;
type T;
position p;
@@
T fn@p(ps) {...}

@script:python@
fn << def.fn; ps << def.ps; T << def.T; p << def.p;
@@
emit("def", p, name=fn, type=T, params=ps,
     end=int(p[0].current_element_line_end))

@call@
identifier f;
expression list es;
position p;
@@
f@p(es)

@script:python@
f << call.f; es << call.es; p << call.p;
@@
emit("call", p, name=f, args=es)

// A call through a field (`qpair->transport->ops->qpair_fini(qpair, ...)`), and the functions
// given such fields in a struct's initializer (`.qpair_fini = nvmf_rdma_close_qpair`): facts.py
// makes the call one of the function when the files give that field one function only.
@fcall@
expression E;
identifier fld;
expression list es;
position p;
@@
E->fld@p(es)

@script:python@
fld << fcall.fld; es << fcall.es; p << fcall.p;
@@
emit("fcall", p, name=fld, args=es)

@ops@
identifier I, fld, fn;
type T;
position p;
@@
T I@p = { ..., .fld = fn, ..., };

@script:python@
fld << ops.fld; fn << ops.fn; p << ops.p;
@@
emit("op", p, field=fld, name=fn)

@ret@
expression E;
position p;
@@
return@p E;

@script:python@
E << ret.E; p << ret.p;
@@
emit("ret", p, expr=E)

@asg@
expression L, R;
position p;
@@
L@p = R

@script:python@
L << asg.L; R << asg.R; p << asg.p;
@@
emit("asg", p, lhs=L, rhs=R)

@deref@
identifier x, fld;
position p;
@@
(
x@p->fld
|
 *x@p
)

@script:python@
x << deref.x; p << deref.p;
@@
emit("deref", p, name=x)

@decl@
type T;
identifier x;
expression E;
position p;
@@
(
T x@p;
|
T x@p = E;
)

@script:python@
x << decl.x; p << decl.p;
@@
emit("decl", p, name=x)
