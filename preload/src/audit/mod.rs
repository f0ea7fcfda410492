//! What the preload finds and says: the findings, the report, the records and histograms behind
//! them, and audit mode's guarded pages (the page ring, the fault queue, the SIGSEGV handler),
//! whose faults name reads after the ack; and the USDT probes a tracer attaches to.

pub mod faults;
pub mod findings;
pub mod held;
pub mod pages;
pub mod probes;
pub mod record;
pub mod report;
pub mod report_file;
pub mod segv;
pub mod sink;
pub mod uffd;
