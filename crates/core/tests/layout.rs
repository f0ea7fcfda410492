//! cmsafe's librdmacm bindings (`cm::sys`) are written by hand: compare every size, offset and
//! constant cmsafe relies on with what the C compiler makes of librdmacm's own header.

use std::collections::BTreeMap;
use std::mem::{offset_of, size_of};
use std::path::PathBuf;
use std::process::Command;

use cmsafe_core::cm::sys::{
    ibv_ah_attr, ibv_context, ibv_device, ibv_gid, ibv_global_route, ibv_qp_cap, ibv_qp_init_attr,
    ibv_qp_type, ibv_transport_type, rdma_addr, rdma_cm_event, rdma_cm_event_type, rdma_cm_id,
    rdma_conn_param, rdma_event_channel, rdma_port_space, rdma_route, rdma_ud_param,
};

fn c_layout() -> BTreeMap<String, usize> {
    // The workspace root, two floors up from this crate.
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../..");
    let out = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("layout");
    let cc = std::env::var("CC").unwrap_or_else(|_| "cc".into());
    let status = Command::new(&cc)
        .args(["-std=c11", "-Wall", "-Werror", "-o"])
        .arg(&out)
        .arg(root.join("c-tests/api/layout.c"))
        .status()
        .expect("run the C compiler");
    assert!(status.success(), "c-tests/api/layout.c did not compile");
    let output = Command::new(&out).output().expect("run the layout program");
    assert!(output.status.success());
    String::from_utf8(output.stdout)
        .unwrap()
        .lines()
        .map(|line| {
            let (key, value) = line.rsplit_once(' ').expect("a `key value` line");
            (key.to_string(), value.parse().expect("a number"))
        })
        .collect()
}

#[test]
fn bindings_match_the_c_header() {
    macro_rules! size {
        ($c:literal, $t:ty) => {
            (concat!("size ", $c), size_of::<$t>())
        };
    }
    macro_rules! off {
        ($c:literal, $t:ty, $($f:tt)+) => {
            (concat!("offset ", $c), offset_of!($t, $($f)+))
        };
    }
    macro_rules! val {
        ($m:ident :: $c:ident) => {
            (concat!("value ", stringify!($c)), $m::$c as usize)
        };
    }
    let rust = [
        size!("struct rdma_cm_event", rdma_cm_event),
        off!("struct rdma_cm_event.id", rdma_cm_event, id),
        off!("struct rdma_cm_event.listen_id", rdma_cm_event, listen_id),
        off!("struct rdma_cm_event.event", rdma_cm_event, event),
        off!("struct rdma_cm_event.status", rdma_cm_event, status),
        off!("struct rdma_cm_event.param", rdma_cm_event, param),
        off!(
            "struct rdma_cm_event.param.conn.private_data",
            rdma_cm_event,
            param.conn.private_data
        ),
        off!(
            "struct rdma_cm_event.param.conn.private_data_len",
            rdma_cm_event,
            param.conn.private_data_len
        ),
        off!(
            "struct rdma_cm_event.param.ud.private_data",
            rdma_cm_event,
            param.ud.private_data
        ),
        off!(
            "struct rdma_cm_event.param.ud.private_data_len",
            rdma_cm_event,
            param.ud.private_data_len
        ),
        size!("struct rdma_conn_param", rdma_conn_param),
        off!(
            "struct rdma_conn_param.private_data",
            rdma_conn_param,
            private_data
        ),
        off!(
            "struct rdma_conn_param.private_data_len",
            rdma_conn_param,
            private_data_len
        ),
        off!(
            "struct rdma_conn_param.responder_resources",
            rdma_conn_param,
            responder_resources
        ),
        off!(
            "struct rdma_conn_param.initiator_depth",
            rdma_conn_param,
            initiator_depth
        ),
        off!(
            "struct rdma_conn_param.flow_control",
            rdma_conn_param,
            flow_control
        ),
        off!(
            "struct rdma_conn_param.retry_count",
            rdma_conn_param,
            retry_count
        ),
        off!(
            "struct rdma_conn_param.rnr_retry_count",
            rdma_conn_param,
            rnr_retry_count
        ),
        off!("struct rdma_conn_param.srq", rdma_conn_param, srq),
        off!("struct rdma_conn_param.qp_num", rdma_conn_param, qp_num),
        size!("struct rdma_ud_param", rdma_ud_param),
        off!(
            "struct rdma_ud_param.private_data",
            rdma_ud_param,
            private_data
        ),
        off!(
            "struct rdma_ud_param.private_data_len",
            rdma_ud_param,
            private_data_len
        ),
        off!("struct rdma_ud_param.ah_attr", rdma_ud_param, ah_attr),
        off!("struct rdma_ud_param.qp_num", rdma_ud_param, qp_num),
        off!("struct rdma_ud_param.qkey", rdma_ud_param, qkey),
        size!("struct ibv_ah_attr", ibv_ah_attr),
        off!("struct ibv_ah_attr.grh", ibv_ah_attr, grh),
        off!("struct ibv_ah_attr.dlid", ibv_ah_attr, dlid),
        off!("struct ibv_ah_attr.sl", ibv_ah_attr, sl),
        off!(
            "struct ibv_ah_attr.src_path_bits",
            ibv_ah_attr,
            src_path_bits
        ),
        off!("struct ibv_ah_attr.static_rate", ibv_ah_attr, static_rate),
        off!("struct ibv_ah_attr.is_global", ibv_ah_attr, is_global),
        off!("struct ibv_ah_attr.port_num", ibv_ah_attr, port_num),
        size!("struct ibv_global_route", ibv_global_route),
        off!("struct ibv_global_route.dgid", ibv_global_route, dgid),
        off!(
            "struct ibv_global_route.flow_label",
            ibv_global_route,
            flow_label
        ),
        off!(
            "struct ibv_global_route.sgid_index",
            ibv_global_route,
            sgid_index
        ),
        off!(
            "struct ibv_global_route.hop_limit",
            ibv_global_route,
            hop_limit
        ),
        off!(
            "struct ibv_global_route.traffic_class",
            ibv_global_route,
            traffic_class
        ),
        size!("union ibv_gid", ibv_gid),
        size!("struct rdma_cm_id", rdma_cm_id),
        off!("struct rdma_cm_id.verbs", rdma_cm_id, verbs),
        off!("struct rdma_cm_id.channel", rdma_cm_id, channel),
        off!("struct rdma_cm_id.context", rdma_cm_id, context),
        off!("struct rdma_cm_id.qp", rdma_cm_id, qp),
        off!("struct rdma_cm_id.route", rdma_cm_id, route),
        off!("struct rdma_cm_id.ps", rdma_cm_id, ps),
        off!("struct rdma_cm_id.port_num", rdma_cm_id, port_num),
        off!("struct rdma_cm_id.event", rdma_cm_id, event),
        off!("struct rdma_cm_id.pd", rdma_cm_id, pd),
        off!("struct rdma_cm_id.qp_type", rdma_cm_id, qp_type),
        size!("struct rdma_route", rdma_route),
        off!("struct rdma_route.addr", rdma_route, addr),
        off!("struct rdma_route.path_rec", rdma_route, path_rec),
        off!("struct rdma_route.num_paths", rdma_route, num_paths),
        size!("struct rdma_addr", rdma_addr),
        off!("struct rdma_addr.src_storage", rdma_addr, src_addr_union),
        off!("struct rdma_addr.dst_storage", rdma_addr, dst_addr_union),
        off!("struct rdma_addr.addr", rdma_addr, addr),
        size!("struct rdma_event_channel", rdma_event_channel),
        off!("struct rdma_event_channel.fd", rdma_event_channel, fd),
        off!("struct ibv_context.device", ibv_context, device),
        off!(
            "struct ibv_device.transport_type",
            ibv_device,
            transport_type
        ),
        size!("struct ibv_qp_cap", ibv_qp_cap),
        off!("struct ibv_qp_cap.max_recv_sge", ibv_qp_cap, max_recv_sge),
        size!("struct ibv_qp_init_attr", ibv_qp_init_attr),
        off!("struct ibv_qp_init_attr.srq", ibv_qp_init_attr, srq),
        off!("struct ibv_qp_init_attr.cap", ibv_qp_init_attr, cap),
        off!("struct ibv_qp_init_attr.qp_type", ibv_qp_init_attr, qp_type),
        off!(
            "struct ibv_qp_init_attr.sq_sig_all",
            ibv_qp_init_attr,
            sq_sig_all
        ),
        size!("enum rdma_cm_event_type", rdma_cm_event_type::Type),
        size!("enum rdma_port_space", rdma_port_space::Type),
        size!("enum ibv_qp_type", ibv_qp_type::Type),
        size!("enum ibv_transport_type", ibv_transport_type::Type),
        val!(rdma_cm_event_type::RDMA_CM_EVENT_ADDR_RESOLVED),
        val!(rdma_cm_event_type::RDMA_CM_EVENT_ADDR_ERROR),
        val!(rdma_cm_event_type::RDMA_CM_EVENT_ROUTE_RESOLVED),
        val!(rdma_cm_event_type::RDMA_CM_EVENT_ROUTE_ERROR),
        val!(rdma_cm_event_type::RDMA_CM_EVENT_CONNECT_REQUEST),
        val!(rdma_cm_event_type::RDMA_CM_EVENT_CONNECT_RESPONSE),
        val!(rdma_cm_event_type::RDMA_CM_EVENT_CONNECT_ERROR),
        val!(rdma_cm_event_type::RDMA_CM_EVENT_UNREACHABLE),
        val!(rdma_cm_event_type::RDMA_CM_EVENT_REJECTED),
        val!(rdma_cm_event_type::RDMA_CM_EVENT_ESTABLISHED),
        val!(rdma_cm_event_type::RDMA_CM_EVENT_DISCONNECTED),
        val!(rdma_cm_event_type::RDMA_CM_EVENT_DEVICE_REMOVAL),
        val!(rdma_cm_event_type::RDMA_CM_EVENT_MULTICAST_JOIN),
        val!(rdma_cm_event_type::RDMA_CM_EVENT_MULTICAST_ERROR),
        val!(rdma_cm_event_type::RDMA_CM_EVENT_ADDR_CHANGE),
        val!(rdma_cm_event_type::RDMA_CM_EVENT_TIMEWAIT_EXIT),
        val!(rdma_port_space::RDMA_PS_TCP),
        val!(rdma_port_space::RDMA_PS_UDP),
        val!(ibv_qp_type::IBV_QPT_RC),
        val!(ibv_qp_type::IBV_QPT_UD),
        val!(ibv_transport_type::IBV_TRANSPORT_IB),
        val!(ibv_transport_type::IBV_TRANSPORT_IWARP),
    ];
    let c = c_layout();
    assert_eq!(
        c.len(),
        rust.len(),
        "layout.c and this test must list the same fields"
    );
    let mismatches: Vec<String> = rust
        .iter()
        .filter(|(name, value)| c.get(*name) != Some(value))
        .map(|(name, value)| format!("{name}: C {:?}, Rust {value}", c.get(*name)))
        .collect();
    assert!(
        mismatches.is_empty(),
        "layout mismatches:\n{}",
        mismatches.join("\n")
    );
}
