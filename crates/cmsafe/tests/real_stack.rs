//! The safe Rust API on the real stack. These tests need an RDMA device: `make test` runs them
//! inside the Soft-RoCE guest (`-- --ignored`); on a machine without one they are skipped.

use std::net::Ipv4Addr;
use std::ptr::null_mut;
use std::time::Duration;

use cmsafe::cm::sys::*;
use cmsafe::cm::{rdma_cm_event_type::*, rdma_cm_id};
use cmsafe::{Event, EventChannel};

fn addr(port: u16) -> libc::sockaddr_in {
    let ip: Ipv4Addr = std::env::var("RXE_ADDR")
        .expect("RXE_ADDR: run inside scripts/rxe-vm")
        .parse()
        .expect("an IPv4 address");
    libc::sockaddr_in {
        sin_family: libc::AF_INET as u16,
        sin_port: port.to_be(),
        sin_addr: libc::in_addr {
            s_addr: u32::from(ip).to_be(),
        },
        sin_zero: [0; 8],
    }
}

fn check(rc: i32, what: &str) {
    assert_eq!(rc, 0, "{what}: {}", std::io::Error::last_os_error());
}

fn expect(ch: &EventChannel, want: u32) -> Event {
    let ev = ch
        .get_event_timeout(Some(Duration::from_secs(10)))
        .expect("an event within 10 s");
    assert_eq!(
        ev.event_type_name(),
        cmsafe::cm::event_type_name(want),
        "{ev:?}"
    );
    ev
}

fn create_qp(id: *mut rdma_cm_id) {
    // SAFETY: all-zero is a valid ibv_qp_init_attr; librdmacm fills the PD and CQs.
    let mut attr: ibv_qp_init_attr = unsafe { std::mem::zeroed() };
    attr.cap.max_send_wr = 4;
    attr.cap.max_recv_wr = 4;
    attr.cap.max_send_sge = 1;
    attr.cap.max_recv_sge = 1;
    attr.qp_type = ibv_qp_type::IBV_QPT_RC;
    // SAFETY: `id` is a live cm_id bound to a device.
    check(
        unsafe { rdma_create_qp(id, null_mut(), &mut attr) },
        "rdma_create_qp",
    );
}

/// Whether `id`'s device is iWARP, asked of the device itself (RXE_TRANSPORT only names it):
/// iWARP's MPA carries exactly the private data sent, where IB/RoCE's CM messages always carry
/// their whole room, the bytes sent then zeros.
fn is_iwarp(id: *mut rdma_cm_id) -> bool {
    // SAFETY: a live cm_id; `verbs` is set once it is bound to a device, and points at
    // libibverbs' context, whose device outlives it.
    unsafe {
        let verbs = (*id).verbs;
        assert!(!verbs.is_null(), "the id has no device yet");
        (*(*verbs).device).transport_type == ibv_transport_type::IBV_TRANSPORT_IWARP
    }
}

/// The private data length a message with `room` bytes of it carries when `sent` were sent.
fn pdata_len(iwarp: bool, room: usize, sent: usize) -> usize {
    if iwarp {
        sent
    } else {
        room
    }
}

fn conn_param(data: &[u8]) -> rdma_conn_param {
    // SAFETY: all-zero is a valid rdma_conn_param.
    let mut p: rdma_conn_param = unsafe { std::mem::zeroed() };
    p.private_data = data.as_ptr().cast();
    p.private_data_len = data.len() as u8;
    p.responder_resources = 1;
    p.initiator_depth = 1;
    p.retry_count = 7;
    p.rnr_retry_count = 7;
    p
}

#[test]
#[ignore = "needs an RDMA device: run by `make test` in the Soft-RoCE guest"]
fn private_data_round_trip_through_the_rust_api() {
    const PORT: u16 = 7481;
    let server = EventChannel::new().expect("an event channel");
    let client = EventChannel::new().expect("an event channel");
    let before = cmsafe::stats();
    let (mut listen_id, mut id): (*mut rdma_cm_id, *mut rdma_cm_id) = (null_mut(), null_mut());
    let mut sa = addr(PORT);
    // SAFETY: plain librdmacm calls on live channels and ids; addresses outlive the calls.
    unsafe {
        check(
            rdma_create_id(
                server.as_raw(),
                &mut listen_id,
                null_mut(),
                rdma_port_space::RDMA_PS_TCP,
            ),
            "rdma_create_id",
        );
        check(
            rdma_bind_addr(listen_id, (&mut sa as *mut libc::sockaddr_in).cast()),
            "bind",
        );
        check(rdma_listen(listen_id, 8), "rdma_listen");
        check(
            rdma_create_id(
                client.as_raw(),
                &mut id,
                null_mut(),
                rdma_port_space::RDMA_PS_TCP,
            ),
            "rdma_create_id",
        );
        check(
            rdma_resolve_addr(
                id,
                null_mut(),
                (&mut sa as *mut libc::sockaddr_in).cast(),
                2000,
            ),
            "rdma_resolve_addr",
        );
    }
    expect(&client, RDMA_CM_EVENT_ADDR_RESOLVED);
    // SAFETY: as above.
    check(
        unsafe { rdma_resolve_route(id, 2000) },
        "rdma_resolve_route",
    );
    expect(&client, RDMA_CM_EVENT_ROUTE_RESOLVED);
    create_qp(id);
    let hello: Vec<u8> = (0u8..40).map(|i| i.wrapping_mul(3)).collect();
    let mut p = conn_param(&hello);
    // SAFETY: as above.
    check(unsafe { rdma_connect(id, &mut p) }, "rdma_connect");

    let req = expect(&server, RDMA_CM_EVENT_CONNECT_REQUEST);
    assert_eq!(req.listen_id(), listen_id);
    let pd = req.private_data().expect("private data").clone();
    // The listen id is bound to the device's address: its transport is the connection's.
    let iwarp = is_iwarp(listen_id);
    let req_len = pdata_len(iwarp, 56, hello.len());
    assert_eq!(
        pd.len(),
        req_len,
        "REQ private data: 56 bytes on IB/RoCE, as sent on iWARP (iwarp: {iwarp})"
    );
    assert_eq!(&pd.as_bytes()[..40], &hello[..]);
    assert!(pd.as_bytes()[40..].iter().all(|&b| b == 0));
    let child = req.id();
    // The buffer outlives its event and moves to another thread.
    drop(req);
    let seen = std::thread::spawn(move || pd.as_bytes()[..40].to_vec())
        .join()
        .unwrap();
    assert_eq!(seen, hello);

    create_qp(child);
    let reply = [0xabu8; 100];
    let mut p = conn_param(&reply);
    // SAFETY: as above.
    check(unsafe { rdma_accept(child, &mut p) }, "rdma_accept");
    let est = expect(&client, RDMA_CM_EVENT_ESTABLISHED);
    let bytes = est.private_data().expect("private data").as_bytes();
    let rep_len = pdata_len(iwarp, 196, reply.len());
    assert_eq!(
        bytes.len(),
        rep_len,
        "REP private data: 196 bytes on IB/RoCE, as sent on iWARP (iwarp: {iwarp})"
    );
    assert_eq!(&bytes[..100], &reply[..]);
    // The view librdmacm users read points at the same copy.
    // SAFETY: a conn event: `param.conn` is the live member.
    let view = unsafe { est.cm().param.conn };
    assert_eq!(usize::from(view.private_data_len), rep_len);
    assert_eq!(view.private_data.cast::<u8>(), bytes.as_ptr());
    let sest = expect(&server, RDMA_CM_EVENT_ESTABLISHED);
    assert!(sest.seq() > est.seq(), "fetched later, numbered later");

    // A batch: the client disconnects; the server drains what is queued.
    // SAFETY: as above.
    check(unsafe { rdma_disconnect(id) }, "rdma_disconnect");
    let batch = server
        .get_events(8, Some(Duration::from_secs(10)))
        .expect("a batch");
    assert_eq!(batch.len(), 1, "{batch:?}");
    assert_eq!(batch[0].event_type(), RDMA_CM_EVENT_DISCONNECTED);
    // SAFETY: as above.
    check(unsafe { rdma_disconnect(child) }, "rdma_disconnect");
    expect(&client, RDMA_CM_EVENT_DISCONNECTED);
    // Nothing else is queued.
    let none = client.get_event_timeout(Some(Duration::from_millis(50)));
    assert_eq!(none.unwrap_err().raw_os_error(), Some(libc::ETIMEDOUT));

    drop((est, sest, batch));
    // SAFETY: every event was acked by cmsafe, so none of these waits.
    unsafe {
        rdma_destroy_qp(child);
        rdma_destroy_qp(id);
        check(rdma_destroy_id(child), "rdma_destroy_id");
        check(rdma_destroy_id(id), "rdma_destroy_id");
        check(rdma_destroy_id(listen_id), "rdma_destroy_id");
    }
    let after = cmsafe::stats();
    // ADDR_RESOLVED, ROUTE_RESOLVED, CONNECT_REQUEST, 2 ESTABLISHED, 2 DISCONNECTED.
    assert_eq!(after.fetched - before.fetched, 7);
    assert_eq!(after.acked - before.acked, 7);
    assert_eq!(after.live_events, 0);
    assert_eq!(after.live_buffers, 0);
    assert_eq!(after.pending, 0);
}
