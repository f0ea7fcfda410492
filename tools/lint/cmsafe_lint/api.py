"""The library calls the rules know: where each takes the event, the CQ or the object it works on.

Three families, as the preload has them (docs/preload.md):

- CM events: `rdma_get_cm_event(channel, &event)` hands out an event that
  `rdma_ack_cm_event(event)` frees; `rdma_destroy_id` and `rdma_migrate_id` wait until every event
  of the id is acked; `rdma_destroy_event_channel` frees the channel, whose events must be acked
  first (rdma_cma.h).
- Completion events: `ibv_get_cq_event(channel, &cq, &context)` gives one event of `cq`;
  `ibv_ack_cq_events(cq, n)` acks n of them; `ibv_destroy_cq` waits until they are all acked.
- Async events: `ibv_get_async_event(context, &event)` fills a struct the program owns;
  `ibv_ack_async_event(&event)` acks it; the destroy of its QP, CQ or SRQ waits for that ack.

Indices are 0-based argument positions.
"""

# CM events.
CM_GET = {"rdma_get_cm_event": 1}  # the event's out parameter: rdma_get_cm_event(ch, &ev)
CM_ACK = {"rdma_ack_cm_event": 0}

# What waits for (or frees the channel of) an id's unacked events, by the finding's kind.
CM_DESTROY = {
    "id": {"rdma_destroy_id": 0},
    "migrate": {"rdma_migrate_id": 0},
    "channel": {"rdma_destroy_event_channel": 0},
    "qp": {"rdma_destroy_qp": 0},
}

# A request's new id rejected: it is still the program's to destroy.
CM_REJECT = {"rdma_reject": 0, "rdma_reject_ece": 0}

# Completion events.
CQ_GET = {"ibv_get_cq_event": 1}  # ibv_get_cq_event(channel, &cq, &context)
CQ_ACK = {"ibv_ack_cq_events": 0}
CQ_DESTROY = {"ibv_destroy_cq": 0}

# Async events.
AS_GET = {"ibv_get_async_event": 1}  # ibv_get_async_event(context, &event)
AS_ACK = {"ibv_ack_async_event": 0}  # ibv_ack_async_event(&event)
# The destroys an async event of the object makes wait (rdma_destroy_qp calls ibv_destroy_qp).
VERBS_DESTROY = {
    "ibv_destroy_qp": 0,
    "ibv_destroy_cq": 0,
    "ibv_destroy_srq": 0,
    "rdma_destroy_qp": 0,
}

# Calls that end the process: no ack is owed on a path through one (nothing waits any more).
PROCESS_EXITS = ("exit", "_exit", "abort", "_Exit", "quick_exit")

# Calls that wait for another thread: an event variable may be filled by that thread meanwhile.
THREAD_WAITS = ("pthread_join", "pthread_timedjoin_np", "pthread_tryjoin_np", "sem_wait",
                "sem_timedwait", "pthread_cond_wait", "pthread_cond_timedwait",
                "pthread_barrier_wait")

# Library calls that only read what they are given and keep no pointer to it: passing a tracked
# pointer to one of them is neither an ack nor a hand-over. Any other function that is not
# defined in the files analyzed may keep it (a queue, another thread): the path then stops
# owing an ack.
BORROWERS = frozenset(
    """
    printf fprintf sprintf snprintf dprintf vprintf vfprintf puts fputs perror syslog
    memcpy memmove memcmp memset strcpy strncpy strcmp strncmp strlen strnlen strdup strndup
    write send sendto assert
    rdma_event_str rdma_get_src_port rdma_get_dst_port rdma_get_local_addr rdma_get_peer_addr
    ibv_poll_cq ibv_req_notify_cq ibv_event_type_str
    """.split()
)

# The libraries' own calls (librdmacm's rdma_cma.h and rdma_verbs.h, libibverbs' verbs.h,
# rdma-core 44 and the three calls of 60): never taken for a helper of the program, even where
# the files analyzed define one of these names (a stand-in library, a wrapper of the same name).
LIBRARY_CALLS = frozenset(
    """
    ibv_ack_async_event ibv_ack_cq_events ibv_advise_mr ibv_alloc_dm ibv_alloc_mw
    ibv_alloc_null_mr ibv_alloc_parent_domain ibv_alloc_pd ibv_alloc_td
    ibv_attach_counters_point_flow ibv_attach_mcast ibv_bind_mw ibv_close_device ibv_close_xrcd
    ibv_cq_ex_to_cq ibv_create_ah ibv_create_ah_from_wc ibv_create_comp_channel
    ibv_create_counters ibv_create_cq ibv_create_cq_ex ibv_create_flow
    ibv_create_flow_action_esp ibv_create_qp ibv_create_qp_ex ibv_create_rwq_ind_table
    ibv_create_srq ibv_create_srq_ex ibv_create_wq ibv_dealloc_mw ibv_dealloc_pd ibv_dealloc_td
    ibv_dereg_mr ibv_destroy_ah ibv_destroy_comp_channel ibv_destroy_counters ibv_destroy_cq
    ibv_destroy_flow ibv_destroy_flow_action ibv_destroy_qp ibv_destroy_rwq_ind_table
    ibv_destroy_srq ibv_destroy_wq ibv_detach_mcast ibv_end_poll ibv_event_type_str
    ibv_flow_label_to_udp_sport ibv_fork_init ibv_free_device_list ibv_free_dm
    ibv_get_async_event ibv_get_cq_event ibv_get_device_guid ibv_get_device_index
    ibv_get_device_list ibv_get_device_name ibv_get_pkey_index ibv_get_srq_num
    ibv_import_device ibv_import_dm ibv_import_mr ibv_import_pd ibv_inc_rkey
    ibv_init_ah_from_wc ibv_is_fork_initialized ibv_is_qpt_supported ibv_memcpy_from_dm
    ibv_memcpy_to_dm ibv_modify_cq ibv_modify_flow_action_esp ibv_modify_qp
    ibv_modify_qp_rate_limit ibv_modify_srq ibv_modify_wq ibv_next_poll ibv_node_type_str
    ibv_open_device ibv_open_qp ibv_open_xrcd ibv_poll_cq ibv_port_state_str ibv_post_recv
    ibv_post_send ibv_post_srq_ops ibv_post_srq_recv ibv_post_wq_recv ibv_qp_to_qp_ex
    ibv_query_device ibv_query_device_ex ibv_query_ece ibv_query_gid ibv_query_gid_ex
    ibv_query_gid_table ibv_query_pkey ibv_query_port ibv_query_qp ibv_query_qp_data_in_order
    ibv_query_rt_values_ex ibv_query_srq ibv_rate_to_mbps ibv_rate_to_mult ibv_read_counters
    ibv_reg_dm_mr ibv_reg_dmabuf_mr ibv_reg_mr ibv_reg_mr_iova ibv_reg_mr_iova2
    ibv_req_notify_cq ibv_rereg_mr ibv_resize_cq ibv_resolve_eth_l2_from_gid ibv_set_ece
    ibv_start_poll ibv_static_providers ibv_unimport_dm ibv_unimport_mr ibv_unimport_pd
    ibv_wc_opcode ibv_wc_read_byte_len ibv_wc_read_completion_ts
    ibv_wc_read_completion_wallclock_ns ibv_wc_read_cvlan ibv_wc_read_dlid_path_bits
    ibv_wc_read_flow_tag ibv_wc_read_imm_data ibv_wc_read_invalidated_rkey ibv_wc_read_opcode
    ibv_wc_read_qp_num ibv_wc_read_sl ibv_wc_read_slid ibv_wc_read_src_qp ibv_wc_read_tm_info
    ibv_wc_read_vendor_err ibv_wc_read_wc_flags ibv_wc_status_str ibv_wr_abort
    ibv_wr_atomic_cmp_swp ibv_wr_atomic_fetch_add ibv_wr_atomic_write ibv_wr_bind_mw
    ibv_wr_complete ibv_wr_local_inv ibv_wr_rdma_read ibv_wr_rdma_write ibv_wr_rdma_write_imm
    ibv_wr_send ibv_wr_send_imm ibv_wr_send_inv ibv_wr_send_tso ibv_wr_set_inline_data
    ibv_wr_set_inline_data_list ibv_wr_set_sge ibv_wr_set_sge_list ibv_wr_set_ud_addr
    ibv_wr_set_xrc_srqn ibv_wr_start rdma_accept rdma_ack_cm_event rdma_bind_addr rdma_connect
    rdma_create_ep rdma_create_event_channel rdma_create_id rdma_create_qp rdma_create_qp_ex
    rdma_create_srq rdma_create_srq_ex rdma_dereg_mr rdma_destroy_ep rdma_destroy_event_channel
    rdma_destroy_id rdma_destroy_qp rdma_destroy_srq rdma_disconnect rdma_establish
    rdma_event_str rdma_free_devices rdma_freeaddrinfo rdma_get_cm_event rdma_get_devices
    rdma_get_dst_port rdma_get_local_addr rdma_get_peer_addr rdma_get_recv_comp
    rdma_get_remote_ece rdma_get_request rdma_get_send_comp rdma_get_src_port rdma_getaddrinfo
    rdma_init_qp_attr rdma_join_multicast rdma_join_multicast_ex rdma_leave_multicast
    rdma_listen rdma_migrate_id rdma_notify rdma_post_read rdma_post_readv rdma_post_recv
    rdma_post_recvv rdma_post_send rdma_post_sendv rdma_post_ud_send rdma_post_write
    rdma_post_writev rdma_query_addrinfo rdma_reg_msgs rdma_reg_read rdma_reg_write rdma_reject
    rdma_reject_ece rdma_resolve_addr rdma_resolve_addrinfo rdma_resolve_route
    rdma_set_local_ece rdma_set_option rdma_seterrno rdma_write_cm_event
    """.split()
)


def is_library(name):
    return name in LIBRARY_CALLS or name.startswith("pthread_")


def family_calls():
    """Every call name the rules treat specially (a file naming none of them is skipped)."""
    names = set(CM_GET) | set(CM_ACK) | set(CQ_GET) | set(CQ_ACK) | set(AS_GET) | set(AS_ACK)
    for table in CM_DESTROY.values():
        names |= set(table)
    names |= set(CQ_DESTROY) | set(VERBS_DESTROY)
    return names


# A file is worth a run when it gets or acks an event of any family.
EVENT_CALLS = tuple(sorted(set(CM_GET) | set(CM_ACK) | set(CQ_GET) | set(CQ_ACK) | set(AS_GET)
                           | set(AS_ACK)))
