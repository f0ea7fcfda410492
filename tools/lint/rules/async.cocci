// cmsafe-lint, pass 2: async events (ibv_get_async_event / ibv_ack_async_event).
//
// A template, as cm.cocci. The event is a struct the program owns (filled by the get, acked
// by its address); the destroy of its QP, CQ or SRQ waits until it is acked.

@initialize:python@
@@
import json
{{PYTHON}}

def pos(p):
    q = p[0]
    return [q.file, int(q.line), int(q.column), int(q.line_end), int(q.column_end),
            q.current_element]

def emit(rule, **kw):
    rec = {"rule": rule}
    for k, v in kw.items():
        rec[k] = pos(v) if isinstance(v, (list, tuple)) else str(v)
    print("@C " + json.dumps(rec))

// ---- async-never-acked -------------------------------------------------------------------------

@as_na exists@
expression V, _E1, _l;
position pg, pu, px;
statement _S;
symbol true;
identifier unkf : script:python() { unknown(unkf) };
{{META}}
@@
{{GET_AS(V,pg)}}
... when != {{ACK_AS_ANY(V)}}
    when != V = _E1
    when != _l = V
    when != unkf(..., &V, ...)
{{WHEN_KEEP_AS(V)}}
V@pu
... when any
    when != {{ACK_AS_ANY(V)}}
    when != V = _E1
    when != _l = V
    when != unkf(..., &V, ...)
{{WHEN_KEEP_AS(V)}}
    when != {{GET_AS(V)}}
    when != {{PROCESS_EXIT}}
    when != while (1) _S
    when != for (;;) _S
    when != while (true) _S
(
return@px ...;
|
pthread_exit@px(...);
)

@script:python@
V << as_na.V; pg << as_na.pg; pu << as_na.pu; px << as_na.px;
@@
emit("async-never-acked", ev=V, get=pg, use=pu, exit=px)

// ---- async-double-ack ----------------------------------------------------------------------

@as_twice exists@
expression V, _E1;
position p1, p2;
statement _S;
symbol true;
{{META}}
@@
{{ACK_AS_ALL(V,p1)}}
... when != {{GET_AS(V)}}
    when != V = _E1
    when != while (1) _S
    when != for (;;) _S
    when != while (true) _S
{{ACK_AS_ALL(V,p2)}}

@script:python@
V << as_twice.V; p1 << as_twice.p1; p2 << as_twice.p2;
@@
emit("async-ack-twice", ev=V, first=p1, second=p2)

// ---- async-destroy-with-unacked --------------------------------------------------------------

@as_held exists@
expression V, X, _E1, _l;
position pg, pu, pd;
statement _S;
symbol true;
identifier unkf : script:python() { unknown(unkf) };
{{META}}
@@
{{GET_AS(V,pg)}}
... when != {{ACK_AS_ANY(V)}}
    when != V = _E1
    when != _l = V
    when != unkf(..., &V, ...)
V@pu
... when any
    when != {{ACK_AS_ANY(V)}}
    when != V = _E1
    when != {{GET_AS(V)}}
    when != {{PROCESS_EXIT}}
    when != while (1) _S
    when != for (;;) _S
    when != while (true) _S
{{DESTROY_VERBS(X,pd)}}

@script:python@
V << as_held.V; X << as_held.X; pg << as_held.pg; pu << as_held.pu; pd << as_held.pd;
@@
emit("async-held-at-destroy", ev=V, obj=X, get=pg, use=pu, call=pd)

@as_destroy_then_ack exists@
expression V, X, _E1;
position pd, pa;
statement _S;
symbol true;
{{META}}
@@
{{DESTROY_VERBS(X,pd)}}
... when any
    when != {{GET_AS(V)}}
    when != V = _E1
    when != {{THREAD_WAIT}}
    when != while (1) _S
    when != for (;;) _S
    when != while (true) _S
{{ACK_AS_ANY_POS(V,pa)}}

@script:python@
V << as_destroy_then_ack.V; X << as_destroy_then_ack.X; pd << as_destroy_then_ack.pd;
pa << as_destroy_then_ack.pa;
@@
emit("async-destroy-then-ack", ev=V, obj=X, call=pd, ack=pa)
