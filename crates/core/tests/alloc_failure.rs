//! An injected allocation failure fails exactly the chosen allocation, as ENOMEM-able errors.
//! One test alone in its binary: the fault hook and the counters are process-wide.

use cmsafe_core::{fault, AllocError, PrivateData};

#[test]
fn the_chosen_allocation_fails_once() {
    let before = cmsafe_core::stats();
    fault::arm(1);
    let first = PrivateData::copy_from(b"first").expect("allocation 1 succeeds");
    assert_eq!(PrivateData::copy_from(b"second").unwrap_err(), AllocError);
    let third = PrivateData::copy_from(b"third").expect("then allocations succeed again");
    assert_eq!(first.as_bytes(), b"first");
    assert_eq!(third.as_bytes(), b"third");
    let after = cmsafe_core::stats();
    assert_eq!(after.alloc_failures - before.alloc_failures, 1);
    assert_eq!(after.live_buffers, 2);
    drop((first, third));
    assert_eq!(cmsafe_core::stats().live_buffers, 0);

    // librdmacm's length is a uint8_t: more than 255 bytes is cut, never overrun.
    let pd = PrivateData::copy_from(&[7u8; 300]).unwrap();
    assert_eq!(pd.len(), 255);
    assert!(pd.as_bytes().iter().all(|&b| b == 7));
}
