//! cmsafe's `log` messages: to the host program's callback when one is set, else to stderr.
//! The level comes from `cmsafe_set_log_level`, else the CMSAFE_LOG environment variable
//! (off, error, warn, info, debug, trace; not read under AT_SECURE: `env`), else warnings and
//! errors.

use std::ffi::CString;
use std::fmt;
use std::sync::RwLock;

use log::{LevelFilter, Log, Metadata, Record};
use once_cell::sync::OnceCell;

use crate::stderr;

/// A host program's log sink: `(user_data, level, message)`, level as `log::Level` numbers
/// (1 = error ... 5 = trace); the message is NUL-terminated and valid during the call only.
pub type Callback = unsafe extern "C" fn(*mut libc::c_void, libc::c_int, *const libc::c_char);

#[derive(Clone, Copy)]
struct Sink {
    callback: Callback,
    user_data: usize,
}

struct Logger {
    sink: RwLock<Option<Sink>>,
}

static LOGGER: Logger = Logger {
    sink: RwLock::new(None),
};
static INIT: OnceCell<()> = OnceCell::new();

impl Log for Logger {
    fn enabled(&self, metadata: &Metadata<'_>) -> bool {
        metadata.level() <= log::max_level()
    }

    fn log(&self, record: &Record<'_>) {
        if !self.enabled(record.metadata()) {
            return;
        }
        // Copied out, so a callback that logs or changes the sink does not deadlock.
        let sink = *self.sink.read().unwrap_or_else(|e| e.into_inner());
        match sink {
            Some(s) => {
                // Not `to_string`, which panics when a Display fails: the line is cut instead.
                let mut text = String::new();
                let _ = fmt::write(&mut text, *record.args());
                let msg = CString::new(text.replace('\0', " ")).unwrap_or_default();
                // SAFETY: the host gave us this callback and its user data for this purpose.
                unsafe {
                    (s.callback)(
                        s.user_data as *mut libc::c_void,
                        record.level() as libc::c_int,
                        msg.as_ptr(),
                    )
                };
            }
            // Not `eprintln!`, which panics when stderr fails: a log line must never unwind
            // (from a misuse report, it would turn the abort into a return).
            None => stderr::line(format_args!(
                "cmsafe[{}]: {}",
                record.level(),
                record.args()
            )),
        }
    }

    fn flush(&self) {}
}

/// Parses a CMSAFE_LOG value.
pub fn parse_level(s: &str) -> Option<LevelFilter> {
    s.trim().parse().ok()
}

/// Installs the logger once (if the host already installed a `log` logger, messages go there).
pub fn init() {
    INIT.get_or_init(|| {
        let level = crate::env::var(c"CMSAFE_LOG")
            .and_then(|v| parse_level(&v))
            .unwrap_or(LevelFilter::Warn);
        if log::set_logger(&LOGGER).is_ok() {
            log::set_max_level(level);
        }
    });
}

pub fn set_level(level: LevelFilter) {
    init();
    log::set_max_level(level);
}

pub fn set_callback(callback: Option<Callback>, user_data: *mut libc::c_void) {
    init();
    *LOGGER.sink.write().unwrap_or_else(|e| e.into_inner()) = callback.map(|callback| Sink {
        callback,
        user_data: user_data as usize,
    });
}

/// `log::Level` as the C API numbers it.
pub fn level_filter_from_c(level: libc::c_int) -> Option<LevelFilter> {
    Some(match level {
        0 => LevelFilter::Off,
        1 => LevelFilter::Error,
        2 => LevelFilter::Warn,
        3 => LevelFilter::Info,
        4 => LevelFilter::Debug,
        5 => LevelFilter::Trace,
        _ => return None,
    })
}
