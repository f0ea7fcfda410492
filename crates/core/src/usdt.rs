//! USDT probes (SystemTap SDT notes) whose enabled-test is apart from their firing.
//!
//! A tracer (bpftrace, perf) that attaches to a probe reads its ELF note (`.note.stapsdt`: the
//! probe's address, provider, name, argument locations and semaphore address), plants a uprobe
//! on the probe's `nop`, and raises the semaphore by one for as long as it is attached. A
//! library's probes share one semaphore here, so that the hot path tests it once and calls the
//! cold code that fires, and so that the library may raise it itself for its own slow path (the
//! preload's JSON report): then the report's test and the probes' are one. The `probe` crate
//! gives each probe a semaphore of its own, tested where it fires, which costs the hot path
//! registers for every argument.
//!
//! The note's layout is SystemTap's (sys/sdt.h: version 3 notes, 8-byte addresses, arguments
//! as `-8@LOCATION` for signed 64-bit values); docs/tracing.md lists the probes.

use std::sync::atomic::{AtomicU16, Ordering};

/// A library's probe semaphore: non-zero while a tracer is attached to any of its probes (or
/// the library raised it itself). The kernel adds to and subtracts from it in place (uprobes'
/// reference counter), so it is a plain u16 in the `.probes` section that tracers look for.
#[repr(transparent)]
pub struct Semaphore(AtomicU16);

impl Semaphore {
    pub const fn new() -> Self {
        Semaphore(AtomicU16::new(0))
    }

    /// Whether a tracer (or the library itself) wants the probes to fire: one compare with
    /// memory. A volatile read, not an atomic load: the compiler folds it into the compare (an
    /// atomic load it keeps apart, one instruction more on every call site).
    #[inline(always)]
    pub fn on(&self) -> bool {
        // SAFETY: the semaphore's own, aligned u16; the kernel changes it in place whenever a
        // tracer attaches or leaves, with no order promised to anyone, so a read that sees
        // either value is right, and a u16 read is one access.
        unsafe { std::ptr::read_volatile(self.0.as_ptr()) != 0 }
    }

    /// Raises it for the library's own use, for good (the preload's report).
    pub fn raise(&self) {
        self.0.fetch_add(1, Ordering::Relaxed);
    }
}

impl Default for Semaphore {
    fn default() -> Self {
        Self::new()
    }
}

/// Declares a library's probe semaphore, `pub static $name` in the `.probes` section where
/// tracers look for it, and `pub fn on()`, the test each call site makes before firing.
#[macro_export]
macro_rules! usdt_semaphore {
    ($(#[$doc:meta])* $name:ident) => {
        $(#[$doc])*
        #[link_section = ".probes"]
        pub static $name: $crate::usdt::Semaphore = $crate::usdt::Semaphore::new();

        /// Whether the probes fire: test this before calling the rest.
        #[inline(always)]
        pub fn on() -> bool {
            $name.on()
        }
    };
}

/// Declares a probe's note and its `nop`, with up to six arguments (each cast to a signed
/// 64-bit value), tied to `$sem`, a `static` [`Semaphore`] in the `.probes` section. Fire it
/// only once `$sem.on()` said so: the arguments are computed here.
#[macro_export]
macro_rules! usdt_fire {
    // Each argument is evaluated here, outside the asm's unsafe block, into a local of its own.
    ($sem:path, $provider:ident, $name:ident) => {
        $crate::usdt_fire!(@asm $sem, $provider, $name, "",)
    };
    ($sem:path, $provider:ident, $name:ident, $a:expr) => {{
        let a = ($a) as i64;
        $crate::usdt_fire!(@asm $sem, $provider, $name, "-8@{}", a)
    }};
    ($sem:path, $provider:ident, $name:ident, $a:expr, $b:expr) => {{
        let (a, b) = (($a) as i64, ($b) as i64);
        $crate::usdt_fire!(@asm $sem, $provider, $name, "-8@{} -8@{}", a, b)
    }};
    ($sem:path, $provider:ident, $name:ident, $a:expr, $b:expr, $c:expr) => {{
        let (a, b, c) = (($a) as i64, ($b) as i64, ($c) as i64);
        $crate::usdt_fire!(@asm $sem, $provider, $name, "-8@{} -8@{} -8@{}", a, b, c)
    }};
    ($sem:path, $provider:ident, $name:ident, $a:expr, $b:expr, $c:expr, $d:expr) => {{
        let (a, b, c, d) = (($a) as i64, ($b) as i64, ($c) as i64, ($d) as i64);
        $crate::usdt_fire!(@asm $sem, $provider, $name, "-8@{} -8@{} -8@{} -8@{}", a, b, c, d)
    }};
    ($sem:path, $provider:ident, $name:ident, $a:expr, $b:expr, $c:expr, $d:expr, $e:expr) => {{
        let (a, b, c, d, e) = (($a) as i64, ($b) as i64, ($c) as i64, ($d) as i64, ($e) as i64);
        $crate::usdt_fire!(@asm $sem, $provider, $name, "-8@{} -8@{} -8@{} -8@{} -8@{}",
                           a, b, c, d, e)
    }};
    ($sem:path, $provider:ident, $name:ident, $a:expr, $b:expr, $c:expr, $d:expr, $e:expr,
     $f:expr) => {{
        let (a, b, c, d, e, f) = (
            ($a) as i64, ($b) as i64, ($c) as i64, ($d) as i64, ($e) as i64, ($f) as i64,
        );
        $crate::usdt_fire!(@asm $sem, $provider, $name, "-8@{} -8@{} -8@{} -8@{} -8@{} -8@{}",
                           a, b, c, d, e, f)
    }};
    (@asm $sem:path, $provider:ident, $name:ident, $args:literal, $($arg:ident),*) => {{
        // AT&T operands on x86 (`%rdi`, as SystemTap's notes write them); the default elsewhere.
        #[cfg(any(target_arch = "x86_64", target_arch = "x86"))]
        $crate::usdt_fire!(@emit [att_syntax] $sem, $provider, $name, $args, $($arg),*);
        #[cfg(not(any(target_arch = "x86_64", target_arch = "x86")))]
        $crate::usdt_fire!(@emit [] $sem, $provider, $name, $args, $($arg),*);
    }};
    (@emit [$($opt:ident)?] $sem:path, $provider:ident, $name:ident, $args:literal,
     $($arg:ident),*) => {
        // SAFETY: a nop, and a note in a section of its own that nothing at run time reads;
        // the operands are only named in the note's text.
        unsafe {
            ::core::arch::asm!(
                "990: nop",
                ".pushsection .note.stapsdt,\"?\",\"note\"",
                ".balign 4",
                ".4byte 992f-991f, 994f-993f, 3",
                "991: .asciz \"stapsdt\"",
                "992: .balign 4",
                "993: .8byte 990b",
                ".8byte _.stapsdt.base",
                ".8byte {sem}",
                concat!(".asciz \"", stringify!($provider), "\""),
                concat!(".asciz \"", stringify!($name), "\""),
                concat!(".asciz \"", $args, "\""),
                "994: .balign 4",
                ".popsection",
                ".ifndef _.stapsdt.base",
                ".pushsection .stapsdt.base,\"aG\",\"progbits\",.stapsdt.base,comdat",
                ".weak _.stapsdt.base",
                ".hidden _.stapsdt.base",
                "_.stapsdt.base: .space 1",
                ".size _.stapsdt.base, 1",
                ".popsection",
                ".endif",
                $(in(reg) $arg,)*
                sem = sym $sem,
                options(nomem, nostack, preserves_flags $(, $opt)?),
            )
        }
    };
}
