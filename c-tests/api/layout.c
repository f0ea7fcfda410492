/* Prints the size and offset of every librdmacm field and the value of every constant cmsafe relies
 * on, as the C compiler sees librdmacm's header; tests/layout.rs compares them with cmsafe's own
 * hand-written Rust bindings (crates/core/src/cm/sys.rs). */
#include <stddef.h>
#include <stdio.h>
#include <rdma/rdma_cma.h>

#define SIZE(t) printf("size %s %zu\n", #t, sizeof(t))
#define OFF(t, f) printf("offset %s.%s %zu\n", #t, #f, offsetof(t, f))
#define VAL(c) printf("value %s %zu\n", #c, (size_t)(c))

int main(void)
{
    SIZE(struct rdma_cm_event);
    OFF(struct rdma_cm_event, id);
    OFF(struct rdma_cm_event, listen_id);
    OFF(struct rdma_cm_event, event);
    OFF(struct rdma_cm_event, status);
    OFF(struct rdma_cm_event, param);
    OFF(struct rdma_cm_event, param.conn.private_data);
    OFF(struct rdma_cm_event, param.conn.private_data_len);
    OFF(struct rdma_cm_event, param.ud.private_data);
    OFF(struct rdma_cm_event, param.ud.private_data_len);
    SIZE(struct rdma_conn_param);
    OFF(struct rdma_conn_param, private_data);
    OFF(struct rdma_conn_param, private_data_len);
    OFF(struct rdma_conn_param, responder_resources);
    OFF(struct rdma_conn_param, initiator_depth);
    OFF(struct rdma_conn_param, flow_control);
    OFF(struct rdma_conn_param, retry_count);
    OFF(struct rdma_conn_param, rnr_retry_count);
    OFF(struct rdma_conn_param, srq);
    OFF(struct rdma_conn_param, qp_num);
    SIZE(struct rdma_ud_param);
    OFF(struct rdma_ud_param, private_data);
    OFF(struct rdma_ud_param, private_data_len);
    OFF(struct rdma_ud_param, ah_attr);
    OFF(struct rdma_ud_param, qp_num);
    OFF(struct rdma_ud_param, qkey);
    SIZE(struct ibv_ah_attr);
    OFF(struct ibv_ah_attr, grh);
    OFF(struct ibv_ah_attr, dlid);
    OFF(struct ibv_ah_attr, sl);
    OFF(struct ibv_ah_attr, src_path_bits);
    OFF(struct ibv_ah_attr, static_rate);
    OFF(struct ibv_ah_attr, is_global);
    OFF(struct ibv_ah_attr, port_num);
    SIZE(struct ibv_global_route);
    OFF(struct ibv_global_route, dgid);
    OFF(struct ibv_global_route, flow_label);
    OFF(struct ibv_global_route, sgid_index);
    OFF(struct ibv_global_route, hop_limit);
    OFF(struct ibv_global_route, traffic_class);
    SIZE(union ibv_gid);
    SIZE(struct rdma_cm_id);
    OFF(struct rdma_cm_id, verbs);
    OFF(struct rdma_cm_id, channel);
    OFF(struct rdma_cm_id, context);
    OFF(struct rdma_cm_id, qp);
    OFF(struct rdma_cm_id, route);
    OFF(struct rdma_cm_id, ps);
    OFF(struct rdma_cm_id, port_num);
    OFF(struct rdma_cm_id, event);
    OFF(struct rdma_cm_id, pd);
    OFF(struct rdma_cm_id, qp_type);
    SIZE(struct rdma_route);
    OFF(struct rdma_route, addr);
    OFF(struct rdma_route, path_rec);
    OFF(struct rdma_route, num_paths);
    SIZE(struct rdma_addr);
    OFF(struct rdma_addr, src_storage);
    OFF(struct rdma_addr, dst_storage);
    OFF(struct rdma_addr, addr);
    SIZE(struct rdma_event_channel);
    OFF(struct rdma_event_channel, fd);
    OFF(struct ibv_context, device);
    OFF(struct ibv_device, transport_type);
    SIZE(struct ibv_qp_cap);
    OFF(struct ibv_qp_cap, max_recv_sge);
    SIZE(struct ibv_qp_init_attr);
    OFF(struct ibv_qp_init_attr, srq);
    OFF(struct ibv_qp_init_attr, cap);
    OFF(struct ibv_qp_init_attr, qp_type);
    OFF(struct ibv_qp_init_attr, sq_sig_all);
    SIZE(enum rdma_cm_event_type);
    SIZE(enum rdma_port_space);
    SIZE(enum ibv_qp_type);
    SIZE(enum ibv_transport_type);
    VAL(RDMA_CM_EVENT_ADDR_RESOLVED);
    VAL(RDMA_CM_EVENT_ADDR_ERROR);
    VAL(RDMA_CM_EVENT_ROUTE_RESOLVED);
    VAL(RDMA_CM_EVENT_ROUTE_ERROR);
    VAL(RDMA_CM_EVENT_CONNECT_REQUEST);
    VAL(RDMA_CM_EVENT_CONNECT_RESPONSE);
    VAL(RDMA_CM_EVENT_CONNECT_ERROR);
    VAL(RDMA_CM_EVENT_UNREACHABLE);
    VAL(RDMA_CM_EVENT_REJECTED);
    VAL(RDMA_CM_EVENT_ESTABLISHED);
    VAL(RDMA_CM_EVENT_DISCONNECTED);
    VAL(RDMA_CM_EVENT_DEVICE_REMOVAL);
    VAL(RDMA_CM_EVENT_MULTICAST_JOIN);
    VAL(RDMA_CM_EVENT_MULTICAST_ERROR);
    VAL(RDMA_CM_EVENT_ADDR_CHANGE);
    VAL(RDMA_CM_EVENT_TIMEWAIT_EXIT);
    VAL(RDMA_PS_TCP);
    VAL(RDMA_PS_UDP);
    VAL(IBV_QPT_RC);
    VAL(IBV_QPT_UD);
    VAL(IBV_TRANSPORT_IB);
    VAL(IBV_TRANSPORT_IWARP);
    return 0;
}
