// cmsafe-lint, pass 2: completion events (ibv_get_cq_event / ibv_ack_cq_events).
//
// A template, as cm.cocci. A completion event is one count owed to its CQ: ibv_destroy_cq
// waits until the CQ's acks equal its events. Acks are often batched (ibv_ack_cq_events(cq, n)
// once for n events, even in another function), so a path owes an ack only until ANY
// ibv_ack_cq_events; the over-ack and wrong-CQ rules compare the CQ expressions.

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

// ---- cq-never-acked: a path from the get to a return with no ack at all --------------------

@cq_na exists@
expression C, _E1, _l;
position pg, pu, px;
statement _S;
symbol true;
identifier unkf : script:python() { unknown(unkf) };
{{META}}
@@
{{GET_CQ(C,pg)}}
... when != {{ACK_CQ_ANYCQ}}
    when != C = _E1
    when != _l = C
    when != unkf(..., C, ...)
{{WHEN_KEEP_CQ(C)}}
C@pu
... when any
    when != {{ACK_CQ_ANYCQ}}
    when != C = _E1
    when != &C
    when != _l = C
    when != unkf(..., C, ...)
{{WHEN_KEEP_CQ(C)}}
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
C << cq_na.C; pg << cq_na.pg; pu << cq_na.pu; px << cq_na.px;
@@
emit("cq-never-acked", cq=C, get=pg, use=pu, exit=px)

// A helper's CQ with its event, dropped: nothing can ack it through that value.
@cq_na_drop exists@
position pg, px;
statement _S;
symbol true;
{{META}}
@@
{{GET_CQ_DROP(pg)}}
... when != {{ACK_CQ_ANYCQ}}
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
pg << cq_na_drop.pg; px << cq_na_drop.px;
@@
emit("cq-never-acked", cq="", get=pg, exit=px)

// ---- cq-destroy-with-unacked ----------------------------------------------------------------

@cq_held exists@
expression C, X, _E1, _l;
position pg, pu, pd;
statement _S;
symbol true;
identifier unkf : script:python() { unknown(unkf) };
{{META}}
@@
{{GET_CQ(C,pg)}}
... when != {{ACK_CQ_ANYCQ}}
    when != C = _E1
    when != _l = C
    when != unkf(..., C, ...)
C@pu
... when any
    when != {{ACK_CQ_ANYCQ}}
    when != C = _E1
    when != &C
    when != {{PROCESS_EXIT}}
    when != while (1) _S
    when != for (;;) _S
    when != while (true) _S
{{DESTROY_CQ(X,pd)}}

@script:python@
C << cq_held.C; X << cq_held.X; pg << cq_held.pg; pu << cq_held.pu; pd << cq_held.pd;
@@
emit("cq-held-at-destroy", cq=C, obj=X, get=pg, use=pu, call=pd)

// The CQ destroyed, then acked: its event was unacked at the destroy, and the ack is of a
// freed CQ.
@cq_destroy_then_ack exists@
expression C, _E1;
position pd, pa;
statement _S;
symbol true;
{{META}}
@@
{{DESTROY_CQ(C,pd)}}
... when any
    when != {{GET_CQ(C)}}
    when != C = _E1
    when != &C
    when != {{THREAD_WAIT}}
    when != while (1) _S
    when != for (;;) _S
    when != while (true) _S
{{ACK_CQ_SOME(C,pa)}}

@script:python@
C << cq_destroy_then_ack.C; pd << cq_destroy_then_ack.pd; pa << cq_destroy_then_ack.pa;
@@
emit("cq-destroy-then-ack", cq=C, call=pd, ack=pa)

// ---- cq-over-ack ------------------------------------------------------------------------------

// Two acks of one CQ with no get between.
@cq_twice exists@
expression C, _E1;
position p1, p2;
statement _S;
symbol true;
{{META}}
@@
{{ACK_CQ_ALL(C,p1)}}
... when != {{GET_CQ(C)}}
    when != C = _E1
    when != &C
    when != while (1) _S
    when != for (;;) _S
    when != while (true) _S
{{ACK_CQ_ALL(C,p2)}}

@script:python@
C << cq_twice.C; p1 << cq_twice.p1; p2 << cq_twice.p2;
@@
emit("cq-ack-twice", cq=C, first=p1, second=p2)

// A count acked after one get (judge.py: a constant above 1, neither call in a loop).
@cq_count exists@
expression C, N, _E1;
position pg, pa;
statement _S;
symbol true;
{{META}}
@@
{{GET_CQ(C,pg)}}
... when != {{ACK_CQ_ANYCQ}}
    when != C = _E1
    when != &C
    when != while (1) _S
    when != for (;;) _S
    when != while (true) _S
ibv_ack_cq_events@pa(C, N)

@script:python@
C << cq_count.C; N << cq_count.N; pg << cq_count.pg; pa << cq_count.pa;
@@
emit("cq-ack-count", cq=C, n=N, get=pg, ack=pa)

// ---- cq-ack-wrong-cq: an ack of another CQ than the event's, never compared with it ----------

@cq_wrong exists@
expression C, D, _E1, _x;
position pg, pa;
statement _S;
symbol true;
{{META}}
@@
{{GET_CQ(C,pg)}}
... when != {{ACK_CQ_SOME(C)}}
    when != C = _E1
    when != &C
    when != C == _x
    when != C != _x
    when != _x == C
    when != _x != C
    when != while (1) _S
    when != for (;;) _S
    when != while (true) _S
{{ACK_CQ_ALL(D,pa)}}

@script:python@
C << cq_wrong.C; D << cq_wrong.D; pg << cq_wrong.pg; pa << cq_wrong.pa;
@@
emit("cq-wrong", cq=C, other=D, get=pg, ack=pa)
