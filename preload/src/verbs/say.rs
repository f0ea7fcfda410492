//! Findings about libibverbs objects (CQs, QPs, SRQs, WQs), said through the findings sink
//! (audit/sink.rs), which says and counts every finding.

use crate::audit::findings;
use crate::sys::{this_thread, whereis};

/// Says a finding about a libibverbs object `id` (stderr, report, summary), made at the program
/// address `at` by the calling thread.
pub fn say_about(
    kind: findings::Kind,
    event_type: &'static str,
    id: usize,
    at: usize,
    message: String,
) {
    let f = findings::Finding::about_object(
        kind,
        event_type,
        id,
        this_thread::id(),
        whereis::describe(at),
        message,
    );
    crate::audit::sink::say(f);
}
