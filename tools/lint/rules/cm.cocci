// cmsafe-lint, pass 2: CM events (rdma_get_cm_event / rdma_ack_cm_event).
//
// A template: cmsafe_lint/expand.py fills each {{...}} with the calls of the library and of
// the program's own helpers that do that thing (cmsafe_lint/summary.py), and {{META}} with
// the metavariables they need. Each rule reports candidates as "@C <json>" lines; judge.py
// turns them into findings. Paths never go round an infinite loop's head (`while (1)`,
// `for (;;)`): spatch's flow graph gives such a loop an exit edge the program can never take.
//
// Known limits (the tests in tests/cases hold each): an event handed to a function of another
// file, stored in memory, or given to another thread is no longer followed; a path is any
// path of the flow graph, whatever the values (two ifs on the same flag are not correlated).

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

// ---- use-after-ack: the event read after its ack -------------------------------------------

@uaa exists@
expression E, _E1;
identifier _fld;
position pa, pu;
statement _S;
symbol true;
{{META}}
@@
{{ACK_CM_ALL(E,pa)}}
... when != {{GET_CM(E)}}
    when != E = _E1
    when != &E
    when != while (1) _S
    when != for (;;) _S
    when != while (true) _S
(
E@pu->_fld
|
 *E@pu
|
{{READ_CM(E,pu)}}
)

@script:python@
E << uaa.E; pa << uaa.pa; pu << uaa.pu;
@@
emit("use-after-ack", ev=E, ack=pa, use=pu)

// The event's private data (or the event itself, or any field's address) kept in another
// pointer before the ack and read through it after.
@uaa_copy exists@
expression E, P, _E1;
identifier _fld, _g;
type _T;
position pc, pa, pu;
statement _S;
symbol true;
{{META}}
@@
(
P@pc = E->param.conn.private_data
|
P@pc = E->param.ud.private_data
|
P@pc = &E->_fld
|
P@pc = &E->param._fld
|
P@pc = &E->param._g._fld
|
P@pc = E
)
... when != P = _E1
    when != &P
{{ACK_CM_ALL(E,pa)}}
... when != P = _E1
    when != &P
    when != {{GET_CM(E)}}
    when != while (1) _S
    when != for (;;) _S
    when != while (true) _S
(
P@pu->_fld
|
 *P@pu
|
P@pu[...]
|
_g(..., P@pu, ...)
|
_g(..., (_T)P@pu, ...)
)

@script:python@
E << uaa_copy.E; P << uaa_copy.P; pc << uaa_copy.pc; pa << uaa_copy.pa; pu << uaa_copy.pu;
@@
emit("use-after-ack-copy", ev=E, copy=P, at=pc, ack=pa, use=pu)

// ---- double-ack, foreign-ack ----------------------------------------------------------------

@dack exists@
expression E, _E1;
position p1, p2;
statement _S;
symbol true;
{{META}}
@@
{{ACK_CM_ALL(E,p1)}}
... when != {{GET_CM(E)}}
    when != E = _E1
    when != &E
    when != while (1) _S
    when != for (;;) _S
    when != while (true) _S
{{ACK_CM_ALL(E,p2)}}

@script:python@
E << dack.E; p1 << dack.p1; p2 << dack.p2;
@@
emit("double-ack", ev=E, first=p1, second=p2)

@fack_addr@
expression X;
position pa;
@@
rdma_ack_cm_event@pa(&X)

@script:python@
X << fack_addr.X; pa << fack_addr.pa;
@@
emit("foreign-ack", ev="&" + str(X), ack=pa, why="address")

@fack_heap exists@
expression X, _E1;
position pm, pa;
identifier alloc = {malloc, calloc, realloc, strdup, memalign, aligned_alloc};
@@
X = alloc@pm(...)
... when != X = _E1
    when != &X
rdma_ack_cm_event@pa(X)

@script:python@
X << fack_heap.X; pm << fack_heap.pm; pa << fack_heap.pa;
@@
emit("foreign-ack", ev=X, ack=pa, alloc=pm, why="heap")

// ---- never-acked: a path from the get to where the event is dropped -------------------------
//
// The path must first use the event (so that it is the get's success path: after a failed get
// the program touches no event), then reach a return, the end of the function or
// pthread_exit() without an ack, without storing the event or handing it to a call that may
// keep it, and without a call that ends the process.

@na exists@
expression E, _E1, _l;
position pg, pu, px;
statement _S;
symbol true;
identifier unkf : script:python() { unknown(unkf) };
{{META}}
@@
{{GET_CM(E,pg)}}
... when != {{ACK_CM_ANY(E)}}
    when != E = _E1
    when != _l = E
    when != unkf(..., E, ...)
{{WHEN_KEEP_CM(E)}}
E@pu
... when any
    when != {{ACK_CM_ANY(E)}}
    when != E = _E1
    when != &E
    when != _l = E
    when != unkf(..., E, ...)
{{WHEN_KEEP_CM(E)}}
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
E << na.E; pg << na.pg; pu << na.pu; px << na.px;
@@
emit("never-acked", ev=E, get=pg, use=pu, exit=px)

// The same path back to a get of the next event into the same pointer (a `continue`, an
// event type no branch acks): the event is overwritten unacked.
@na_loop exists@
expression E, _E1, _l;
position pg, pu, px;
identifier unkf : script:python() { unknown(unkf) };
{{META}}
@@
{{GET_CM(E,pg)}}
... when != {{ACK_CM_ANY(E)}}
    when != E = _E1
    when != _l = E
    when != unkf(..., E, ...)
{{WHEN_KEEP_CM(E)}}
E@pu
... when any
    when != {{ACK_CM_ANY(E)}}
    when != E = _E1
    when != &E
    when != _l = E
    when != unkf(..., E, ...)
{{WHEN_KEEP_CM(E)}}
    when != {{PROCESS_EXIT}}
{{GET_CM(E,px)}}

@script:python@
E << na_loop.E; pg << na_loop.pg; pu << na_loop.pu; px << na_loop.px;
@@
emit("never-acked-loop", ev=E, get=pg, use=pu, again=px)

// ---- a call that waits for (or frees the channel of) an event still held -------------------
//
// Either the event is got, used, and the call comes before its ack; or the call comes and the
// event is acked after it on the same path (whoever got it: a handler's caller, another
// thread's queue): at the call it was held.

@held_call exists@
expression E, X, _E1, _l;
position pg, pu, pd;
statement _S;
symbol true;
identifier unkf : script:python() { unknown(unkf) };
{{META}}
@@
{{GET_CM(E,pg)}}
... when != {{ACK_CM_ANY(E)}}
    when != E = _E1
    when != _l = E
    when != unkf(..., E, ...)
{{WHEN_KEEP_CM(E)}}
E@pu
... when any
    when != {{ACK_CM_ANY(E)}}
    when != E = _E1
    when != &E
    when != _l = E
    when != unkf(..., E, ...)
{{WHEN_KEEP_CM(E)}}
    when != {{PROCESS_EXIT}}
    when != while (1) _S
    when != for (;;) _S
    when != while (true) _S
(
{{DESTROY_ID(X,pd)}}
|
{{MIGRATE(X,pd)}}
|
{{DESTROY_CH(X,pd)}}
|
{{DESTROY_QP(X,pd)}}
)

@script:python@
E << held_call.E; X << held_call.X; pg << held_call.pg; pu << held_call.pu;
pd << held_call.pd;
@@
emit("held-at-call", ev=E, obj=X, get=pg, use=pu, call=pd)

// The call's argument is the event's own id: no use before it is needed.
@held_call_direct exists@
expression E, X, _E1, _l;
position pg, pd;
statement _S;
symbol true;
identifier unkf : script:python() { unknown(unkf) };
{{META}}
@@
{{GET_CM(E,pg)}}
... when any
    when != {{ACK_CM_ANY(E)}}
    when != E = _E1
    when != &E
    when != _l = E
    when != unkf(..., E, ...)
{{WHEN_KEEP_CM(E)}}
    when != {{PROCESS_EXIT}}
    when != while (1) _S
    when != for (;;) _S
    when != while (true) _S
(
{{DESTROY_ID(X,pd)}}
|
{{MIGRATE(X,pd)}}
|
{{DESTROY_QP(X,pd)}}
)

@script:python@
E << held_call_direct.E; X << held_call_direct.X; pg << held_call_direct.pg;
pd << held_call_direct.pd;
@@
emit("held-at-call-direct", ev=E, obj=X, get=pg, call=pd)

// The event is got and acked on the path, and the call comes between: held at the call.
@get_call_ack exists@
expression E, X, _E1, _l;
position pg, pd, pa;
statement _S;
symbol true;
identifier unkf : script:python() { unknown(unkf) };
{{META}}
@@
{{GET_CM(E,pg)}}
... when any
    when != {{ACK_CM_ANY(E)}}
    when != E = _E1
    when != &E
    when != _l = E
    when != unkf(..., E, ...)
{{WHEN_KEEP_CM(E)}}
    when != {{PROCESS_EXIT}}
    when != while (1) _S
    when != for (;;) _S
    when != while (true) _S
(
{{DESTROY_ID(X,pd)}}
|
{{MIGRATE(X,pd)}}
|
{{DESTROY_CH(X,pd)}}
|
{{DESTROY_QP(X,pd)}}
)
... when any
    when != {{GET_CM(E)}}
    when != E = _E1
    when != &E
    when != {{PROCESS_EXIT}}
    when != while (1) _S
    when != for (;;) _S
    when != while (true) _S
{{ACK_CM_ANY_POS(E,pa)}}

@script:python@
E << get_call_ack.E; X << get_call_ack.X; pg << get_call_ack.pg; pd << get_call_ack.pd;
pa << get_call_ack.pa;
@@
emit("get-call-ack", ev=E, obj=X, get=pg, call=pd, ack=pa)

// The same without the get in view (a handler's caller got it, a global another thread
// filled): the ack after the call shows it was held there, unless the path waits for another
// thread in between (which may have got the event meanwhile).
@call_then_ack exists@
expression E, X, _E1;
position pd, pa;
statement _S;
symbol true;
{{META}}
@@
(
{{DESTROY_ID(X,pd)}}
|
{{MIGRATE(X,pd)}}
|
{{DESTROY_CH(X,pd)}}
|
{{DESTROY_QP(X,pd)}}
)
... when any
    when != {{GET_CM(E)}}
    when != E = _E1
    when != &E
    when != {{PROCESS_EXIT}}
    when != {{THREAD_WAIT}}
    when != while (1) _S
    when != for (;;) _S
    when != while (true) _S
{{ACK_CM_ANY_POS(E,pa)}}

@script:python@
E << call_then_ack.E; X << call_then_ack.X; pd << call_then_ack.pd; pa << call_then_ack.pa;
@@
emit("call-then-ack", ev=E, obj=X, call=pd, ack=pa)

// ---- an id or a channel used after its destroy (the preload's use-after-destroy-id and
// use-after-destroy-channel): librdmacm freed it ----------------------------------------------

@uad exists@
expression X, _E1;
identifier _fld;
position pd, pu;
statement _S;
symbol true;
identifier uc = {rdma_accept, rdma_reject, rdma_connect, rdma_get_request, rdma_disconnect,
                 rdma_bind_addr, rdma_resolve_addr, rdma_resolve_route, rdma_listen,
                 rdma_create_qp, rdma_set_option, rdma_destroy_qp, rdma_migrate_id,
                 rdma_destroy_id, rdma_notify, rdma_establish, rdma_join_multicast,
                 rdma_leave_multicast, rdma_init_qp_attr};
{{META}}
@@
{{DESTROY_ID_PLAIN(X,pd)}}
... when != X = _E1
    when != &X
    when != while (1) _S
    when != for (;;) _S
    when != while (true) _S
(
uc@pu(X, ...)
|
X@pu->_fld
)

@script:python@
X << uad.X; pd << uad.pd; pu << uad.pu;
@@
emit("use-after-destroy-id", obj=X, destroy=pd, use=pu)

@uadc exists@
expression C, _E1, _x;
identifier _fld;
position pd, pu;
statement _S;
symbol true;
{{META}}
@@
{{DESTROY_CH(C,pd)}}
... when != C = _E1
    when != &C
    when != while (1) _S
    when != for (;;) _S
    when != while (true) _S
(
rdma_get_cm_event@pu(C, ...)
|
rdma_create_id@pu(C, ...)
|
rdma_migrate_id@pu(_x, C)
|
rdma_destroy_event_channel@pu(C)
|
C@pu->_fld
)

@script:python@
C << uadc.C; pd << uadc.pd; pu << uadc.pu;
@@
emit("use-after-destroy-channel", obj=C, destroy=pd, use=pu)

// ---- an id or a channel a helper destroyed through a field of Y (`destroy_all(ctx)`:
// `ctx->nodes[i].id`), then used through Y by a helper, or by name (`conn->id = id`): judge.py
// matches the destroyed field with the used one (fields.py) ------------------------------------

@uadf exists@
expression Y, _E1;
position pd, pu;
statement _S;
symbol true;

{{META}}
@@
{{FIELD_DESTROY(id,Y,pd)}}
... when != Y = _E1
    when != &Y
    when != while (1) _S
    when != for (;;) _S
    when != while (true) _S
{{FIELD_USE(id,Y,pu)}}

@script:python@
Y << uadf.Y; pd << uadf.pd; pu << uadf.pu;
@@
emit("field-use-after-destroy", kind="id", obj=Y, destroy=pd, use=pu)

@uadfx exists@
expression Y, _E1, X;
position pd, pu;
statement _S;
symbol true;
identifier uc = {rdma_accept, rdma_reject, rdma_connect, rdma_get_request, rdma_disconnect,
                 rdma_bind_addr, rdma_resolve_addr, rdma_resolve_route, rdma_listen,
                 rdma_create_qp, rdma_set_option, rdma_destroy_qp, rdma_migrate_id,
                 rdma_destroy_id, rdma_notify, rdma_establish, rdma_join_multicast,
                 rdma_leave_multicast, rdma_init_qp_attr};
{{META}}
@@
{{FIELD_DESTROY(id,Y,pd)}}
... when != Y = _E1
    when != &Y
    when != while (1) _S
    when != for (;;) _S
    when != while (true) _S
uc@pu(X, ...)

@script:python@
Y << uadfx.Y; X << uadfx.X; pd << uadfx.pd; pu << uadfx.pu;
@@
emit("field-use-after-destroy", kind="id", obj=Y, used=X, destroy=pd, use=pu)

@uadfc exists@
expression Y, _E1;
position pd, pu;
statement _S;
symbol true;

{{META}}
@@
{{FIELD_DESTROY(channel,Y,pd)}}
... when != Y = _E1
    when != &Y
    when != while (1) _S
    when != for (;;) _S
    when != while (true) _S
{{FIELD_USE(channel,Y,pu)}}

@script:python@
Y << uadfc.Y; pd << uadfc.pd; pu << uadfc.pu;
@@
emit("field-use-after-destroy", kind="channel", obj=Y, destroy=pd, use=pu)

@uadfcx exists@
expression Y, _E1, X;
position pd, pu;
statement _S;
symbol true;

{{META}}
@@
{{FIELD_DESTROY(channel,Y,pd)}}
... when != Y = _E1
    when != &Y
    when != while (1) _S
    when != for (;;) _S
    when != while (true) _S
(
rdma_get_cm_event@pu(X, ...)
|
rdma_create_id@pu(X, ...)
)

@script:python@
Y << uadfcx.Y; X << uadfcx.X; pd << uadfcx.pd; pu << uadfcx.pu;
@@
emit("field-use-after-destroy", kind="channel", obj=Y, used=X, destroy=pd, use=pu)

// ---- a connection request's id rejected and never destroyed (the preload's
// rejected-id-never-destroyed): each keeps a kernel cm_id until the process exits ------------

// Rejects that some path reaches without storing the id first (one stored in memory, say
// `ep->tgt_id = id`, is destroyed by whoever holds it there): judge.py keeps only these.
@rej_unkept exists@
identifier fn;
expression X, _l;
position pr;
{{META}}
@@
fn(...) {
... when != _l = X
{{REJECT(X,pr)}}
... when any
}

@script:python@
X << rej_unkept.X; pr << rej_unkept.pr;
@@
emit("reject-unkept", obj=X, reject=pr)

@rej exists@
expression X, _E1, _l;
position pr, px;
statement _S;
symbol true;
identifier unkf : script:python() { unknown(unkf) };
{{META}}
@@
{{REJECT(X,pr)}}
... when any
    when != {{DESTROY_ID_PLAIN(X)}}
    when != X = _E1
    when != &X
    when != _l = X
    when != unkf(..., X, ...)
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
X << rej.X; pr << rej.pr; px << rej.px;
@@
emit("rejected-not-destroyed", obj=X, reject=pr, exit=px)
