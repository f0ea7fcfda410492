/* Prints the size and offset of every rdma_cm_event field cmsafe copies, as the C compiler sees
 * librdmacm's header; tests/layout.rs compares them with rdma-sys's hand-written Rust structs. */
#include <stddef.h>
#include <stdio.h>
#include <rdma/rdma_cma.h>

#define SIZE(t) printf("size %s %zu\n", #t, sizeof(t))
#define OFF(t, f) printf("offset %s.%s %zu\n", #t, #f, offsetof(t, f))

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
    OFF(struct rdma_cm_id, route);
    OFF(struct rdma_cm_id, ps);
    OFF(struct rdma_cm_id, qp_type);
    SIZE(struct rdma_route);
    OFF(struct rdma_route, addr);
    SIZE(struct rdma_addr);
    return 0;
}
