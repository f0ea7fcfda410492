//! Audit mode's fault queue: the reads after the ack that the SIGSEGV handler found on our
//! pages (pages.rs), each said on stderr at once and queued, to be turned into findings by the
//! tracker at any thread's next wrapped call.

use cmsafe_core::cm::rdma_cm_event_type;
use cmsafe_sync::page_state::Occupant;
use cmsafe_sync::signal_queue::SignalQueue;

/// A use-after-ack seen by the signal handler, waiting to be turned into a finding.
#[derive(Clone, Copy, Debug)]
pub struct Fault {
    pub seq: u64,
    pub event_type: u32,
    pub id: usize,
    pub code_addr: usize,
    pub data_addr: usize,
    pub thread: i32,
    /// The stack at the fault (innermost first; zeros past its end), to name the program's
    /// frame when the faulting instruction is in a library (memcpy, strlen, printf...).
    pub stack: [usize; STACK],
}

pub const STACK: usize = 12;

/// Faults recorded by the signal handler of any thread, drained by any thread's next wrapped
/// call: a queue with many producers and many consumers, fit for a signal handler.
static FAULTS: SignalQueue<Fault, 256> = SignalQueue::new();

/// Whether a fault was recorded since the last drain: two loads, for every call's hot path.
#[inline]
pub fn faults_pending() -> bool {
    FAULTS.maybe_pending()
}

/// The faults recorded since the last call, and how many could not be recorded since (the queue
/// was full; each was still said on stderr).
pub fn drain_faults() -> (Vec<Fault>, u64) {
    let mut out = Vec::new();
    while let Some(f) = FAULTS.pop() {
        out.push(f);
    }
    (out, FAULTS.take_lost())
}

/// Records a read of the acked event `o` at `data_addr` by the code at `code`: queued, and said on
/// stderr. Called from the SIGSEGV handler: async-signal-safe only.
pub fn record(o: Occupant, data_addr: usize, code: usize) {
    // SAFETY: gettid is async-signal-safe.
    let tid = unsafe { libc::gettid() };
    let mut frames = [std::ptr::null_mut(); STACK];
    // SAFETY: the unwinder was loaded at install time; unwinding through the signal frame is
    // what crash reporters do with it.
    let n = unsafe { libc::backtrace(frames.as_mut_ptr(), STACK as i32) }.max(0) as usize;
    // A full queue counts it (drain_faults); the line below is said either way.
    let _ = FAULTS.push(Fault {
        seq: o.seq,
        event_type: o.event_type,
        id: o.id,
        code_addr: code,
        data_addr,
        thread: tid,
        stack: std::array::from_fn(|k| if k < n { frames[k] as usize } else { 0 }),
    });
    let (seq, ty) = (o.seq, o.event_type);
    // Said at once: the program may crash for other reasons before the report is written.
    let mut line = SignalLine::new();
    line.push(b"==cmsafe== use-after-ack: seq=");
    line.push_dec(seq);
    line.push(b" type=");
    line.push(cmsafe_core::cm::event_type_name(ty as rdma_cm_event_type::Type).as_bytes());
    line.push(b" id=");
    line.push_hex(o.id as u64);
    line.push(b" thread=");
    line.push_dec(tid as u64);
    line.push(b": read of the event at ");
    line.push_hex(data_addr as u64);
    line.push(b" after its rdma_ack_cm_event, by code at ");
    line.push_hex(code as u64);
    line.push(b"\n");
    line.write_stderr();
}

/// A line built without allocating, for the signal handler.
struct SignalLine {
    buf: [u8; 256],
    len: usize,
}

impl SignalLine {
    fn new() -> Self {
        SignalLine {
            buf: [0; 256],
            len: 0,
        }
    }

    fn push(&mut self, s: &[u8]) {
        let n = s.len().min(self.buf.len() - self.len);
        self.buf[self.len..self.len + n].copy_from_slice(&s[..n]);
        self.len += n;
    }

    fn push_dec(&mut self, mut v: u64) {
        let mut digits = [0u8; 20];
        let mut i = digits.len();
        loop {
            i -= 1;
            digits[i] = b'0' + (v % 10) as u8;
            v /= 10;
            if v == 0 {
                break;
            }
        }
        self.push(&digits[i..]);
    }

    fn push_hex(&mut self, mut v: u64) {
        let mut digits = [0u8; 16];
        let mut i = digits.len();
        loop {
            i -= 1;
            digits[i] = b"0123456789abcdef"[(v & 15) as usize];
            v >>= 4;
            if v == 0 {
                break;
            }
        }
        self.push(b"0x");
        self.push(&digits[i..]);
    }

    fn write_stderr(&self) {
        // A read of an acked event is no cancellation point without the preload: none here
        // either (glibc's pthread_setcancelstate is a few atomic operations on the thread's
        // own word, safe in the handler).
        crate::sys::cancel::uncancellable(|| {
            // SAFETY: write(2) of our own buffer; async-signal-safe.
            unsafe { libc::write(2, self.buf.as_ptr().cast(), self.len) };
        });
    }
}
