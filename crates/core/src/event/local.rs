//! A thread's own block: its cache of free slots and its per-type counters, reached through one
//! thread-local lookup per call (each thread-local of a shared library costs a
//! `__tls_get_addr`).

use crate::pool::Cache;
use crate::stats::TypeCounts;

pub(crate) struct Local {
    pub slots: Cache,
    pub types: TypeCounts,
}

thread_local! {
    static LOCAL: Local = const {
        Local {
            slots: Cache::new(),
            types: TypeCounts::new(),
        }
    };
}

/// Runs `f` with this thread's block, or with None once the thread's thread-locals are gone
/// (a call from another thread-local's destructor). Always inlined: left to the compiler's
/// judgment it was once outlined from the copy, which costs instructions on every event
/// (bench/README.md, "The counts behind the code's shape").
#[inline(always)]
pub(crate) fn with<R>(f: impl FnOnce(Option<&Local>) -> R) -> R {
    let mut f = Some(f);
    match LOCAL.try_with(|l| (f.take().expect("runs once"))(Some(l))) {
        Ok(r) => r,
        Err(_) => (f.take().expect("runs once"))(None),
    }
}
