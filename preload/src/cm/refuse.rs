//! Calls on objects the program may have destroyed (or that cannot be objects at all): named by
//! the tracker's judgment (cm/judge.rs) and, in safe mode, refused with librdmacm's errno before
//! librdmacm reads freed memory. The checks most calls pass are lock-free (the destroyed ids' and
//! channels' summaries, objects.rs), inlined into the wrappers; the judgment under the tracker's
//! lock stays out of line.

use cmsafe_core::cm::{rdma_cm_id, rdma_event_channel};
use cmsafe_core::errno;

use crate::cm::objects::{GONE_CHANNELS, GONE_IDS};
use crate::cm::track::{with_state, State};
use crate::lifecycle::quietly;
use crate::sys::config::{Mode, CONFIG};
use crate::sys::whereis;

/// Before a call on an object the program may have destroyed (`gone` reports it): true when safe
/// mode refuses the call, errno then `err`. Audit reports it and lets the call go on, as
/// librdmacm would take it without the preload.
pub fn refused(
    ret: usize,
    err: i32,
    gone: impl FnOnce(&mut State, whereis::Caller) -> bool,
) -> bool {
    let mut was_gone = false;
    quietly(|| {
        let caller = whereis::caller_at(ret);
        was_gone = with_state(|s| gone(s, caller));
    });
    if was_gone && CONFIG.mode == Mode::Safe {
        errno::set(err);
        return true;
    }
    false
}

/// The same for a call on `id`. Inlined to the lock-free checks, true for few ids; the judgment
/// under the lock stays out of line.
#[inline(always)]
pub fn id_refused(call: &str, id: *mut rdma_cm_id, ret: usize) -> bool {
    let p = id as usize;
    !id.is_null()
        && (crate::sys::address::cannot_be_object(p) || GONE_IDS.may_hold(p))
        && id_judged(call, p, ret)
}

#[cold]
#[inline(never)]
fn id_judged(call: &str, id: usize, ret: usize) -> bool {
    refused(ret, libc::EINVAL, |s, c| s.use_of_id(call, id, c))
}

/// Whether `channel` can be one the program destroyed: not NULL, and among the destroyed
/// channels the check can read without the tracker's lock (`objects::GoneChannels`).
#[inline(always)]
pub fn channel_may_be_gone(channel: *mut rdma_event_channel) -> bool {
    !channel.is_null() && GONE_CHANNELS.may_hold(channel as usize)
}

/// The same as `id_refused` for a call on `channel`. Inlined to the lock-free check, which
/// rdma_get_cm_event makes for every event; the judgment under the lock stays out of line.
#[inline(always)]
pub fn channel_refused(call: &str, channel: *mut rdma_event_channel, ret: usize) -> bool {
    channel_may_be_gone(channel) && channel_judged(call, channel, ret)
}

#[cold]
#[inline(never)]
fn channel_judged(call: &str, channel: *mut rdma_event_channel, ret: usize) -> bool {
    refused(ret, libc::EBADF, |s, c| {
        s.use_of_channel(call, channel as usize, c)
    })
}
