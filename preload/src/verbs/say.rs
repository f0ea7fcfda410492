//! Findings about libibverbs objects (CQs, QPs, SRQs, WQs), said through the CM tracker, which
//! says and counts every finding.

use crate::audit::findings;
use crate::cm::track::with_state;
use crate::sys::whereis;

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
        whereis::thread_id(),
        whereis::describe(at),
        message,
    );
    with_state(|s| s.add_finding(f));
}
