//! Where no object of this process can be: the first page, and past the end of user space
//! for the architecture (with the configurations a process may opt into). A "cm_id" there is
//! memory that never held one, which librdmacm would fault reading (cm/judge.rs names it).

/// True when no object of this process can be at `p`: the first page is never mapped, and no
/// user mapping reaches the end of user space (`Space`). librdmacm would fault reading such an
/// "id": it is memory that never held one, often a freed struct's slot reused for something else.
pub fn cannot_be_object(p: usize) -> bool {
    #[cfg(target_arch = "aarch64")]
    {
        impossible(p as u64, Some(AARCH64), tagged_addr_abi)
    }
    #[cfg(target_arch = "x86_64")]
    {
        impossible(p as u64, Some(X86_64), || false)
    }
    #[cfg(not(any(target_arch = "x86_64", target_arch = "aarch64")))]
    {
        impossible(p as u64, None, || false)
    }
}

/// Nothing is mapped below 4096: the smallest page of any port, so on 16K and 64K pages too.
const FIRST_PAGE: u64 = 4096;

/// Where user space ends on an architecture, counting the configurations a process opts into:
/// a bound that refuses a pointer some program could really hold would break that program.
#[derive(Clone, Copy)]
struct Space {
    /// The first address past every user mapping.
    end: u64,
    /// The hardware ignores the top byte of a user address (a tag).
    tagged: bool,
}

/// x86-64: user space ends at 2^47 with 4-level paging and at 2^56 with 5-level paging, whose
/// upper part a process gets by an mmap hint above 2^47 (Documentation/arch/x86/x86_64/
/// 5level-paging.rst).
#[cfg(any(test, target_arch = "x86_64"))]
const X86_64: Space = Space {
    end: 1 << 56,
    tagged: false,
};

/// arm64: user space ends at 2^48 (39 or 42 bits on some kernels), and at 2^52 with 52-bit VAs,
/// which a process gets by an mmap hint above 2^48 (Documentation/arch/arm64/memory.rst). The
/// top byte of a user address is ignored by the hardware (TBI0, always set): a nonzero one is a
/// tag, which only a program that opted into the tagged address ABI passes on (HWASan and MTE
/// heaps do; Documentation/arch/arm64/tagged-address-abi.rst). Otherwise the pointer is not one
/// the program took from malloc or mmap.
#[cfg(any(test, target_arch = "aarch64"))]
const AARCH64: Space = Space {
    end: 1 << 52,
    tagged: true,
};

/// `cannot_be_object` for `space` (None: only the first page is known); `tags_allowed` says
/// whether the process opted into tagged pointers, asked only for a pointer with a tag.
fn impossible(p: u64, space: Option<Space>, tags_allowed: impl FnOnce() -> bool) -> bool {
    let Some(space) = space else {
        return p < FIRST_PAGE;
    };
    let address = if space.tagged && p >> 56 != 0 {
        if !tags_allowed() {
            return true;
        }
        p & ((1 << 56) - 1)
    } else {
        p
    };
    address < FIRST_PAGE || address >= space.end
}

/// Whether the process opted into the tagged address ABI (prctl(2) PR_SET_TAGGED_ADDR_CTRL):
/// once seen on it is taken as on for good (runtimes turn it on at start and leave it), so only
/// tagged pointers of a process that never turned it on cost a system call each, and those are
/// refused.
#[cfg(target_arch = "aarch64")]
fn tagged_addr_abi() -> bool {
    use std::sync::atomic::{AtomicBool, Ordering};
    static ON: AtomicBool = AtomicBool::new(false);
    // Relaxed: a flag read on its own; a thread that misses it asks the kernel once more.
    if ON.load(Ordering::Relaxed) {
        return true;
    }
    // SAFETY: PR_GET_TAGGED_ADDR_CTRL reads the calling thread's setting; unused arguments 0.
    let ctrl = unsafe { libc::prctl(libc::PR_GET_TAGGED_ADDR_CTRL, 0, 0, 0, 0) };
    let on = ctrl > 0 && ctrl as libc::c_ulong & libc::PR_TAGGED_ADDR_ENABLE != 0;
    if on {
        ON.store(true, Ordering::Relaxed);
    }
    on
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn no_object_is_in_the_first_page_or_past_user_space() {
        for space in [Some(X86_64), Some(AARCH64), None] {
            assert!(impossible(0, space, || false));
            assert!(impossible(1, space, || false));
            assert!(impossible(4095, space, || false));
            assert!(!impossible(4096, space, || false));
            assert!(!impossible(0x5555_5555_4000, space, || false));
            assert!(
                !impossible(0xffff_ffff_f000, space, || false),
                "the top of 48-bit VA"
            );
        }
        let x86 = |p| impossible(p, Some(X86_64), || panic!("no tags on x86-64"));
        // The top of user space with 5-level paging is still a possible address.
        assert!(!x86((1 << 56) - 4096));
        assert!(x86(1 << 56));
        // A sockaddr_in for 192.0.2.1:18515 read as a pointer, as perftest's retry passes it.
        assert!(x86(0x0102_00c0_5348_0002));
        assert!(x86(0xffff_8000_0000_0000));
        // Only the first page is known elsewhere.
        assert!(!impossible(u64::MAX, None, || false));
        // This process's own: its heap and stack are possible, perftest's pointer is not.
        let heap = Box::new(0u64);
        let stack = 0u64;
        assert!(!cannot_be_object(&*heap as *const u64 as usize));
        assert!(!cannot_be_object(&stack as *const u64 as usize));
        #[cfg(any(target_arch = "x86_64", target_arch = "aarch64"))]
        assert!(cannot_be_object(0x0102_00c0_5348_0002));
    }

    #[test]
    fn arm64_user_space_ends_at_2_52_and_a_tag_needs_the_tagged_abi() {
        let untagged = |p| impossible(p, Some(AARCH64), || false);
        let tagged = |p| impossible(p, Some(AARCH64), || true);
        // 52-bit VAs, asked for by an mmap hint, end at 2^52.
        assert!(!untagged((1 << 52) - 4096));
        assert!(untagged(1 << 52));
        assert!(untagged(0x00ff_ffff_ffff_f000));
        assert!(untagged(0xffff_0000_0000_0000), "a kernel address");
        // perftest's sockaddr_in: top byte 0x01, not a tag the program may use.
        assert!(untagged(0x0102_00c0_5348_0002));
        assert!(
            untagged(0x0b00_aaaa_c000_1230),
            "an MTE-tagged heap pointer, no opt-in"
        );
        // Opted in: the tag is ignored and the address checked.
        assert!(!tagged(0x0b00_aaaa_c000_1230));
        assert!(tagged(0x0b00_0000_0000_0010), "a tagged first page");
        // Untagged, perftest's pointer is 0x2_00c0_5348_0002, below 2^52: a process that opted
        // in has it passed on, to fault in librdmacm as it would without the preload.
        assert!(!tagged(0x0102_00c0_5348_0002));
    }
}
