/* What the API tests (api/cm_util.c) and the raw librdmacm programs (preload/raw_util.c) set up
 * the same way, whichever way they then fetch events: the guest's RDMA address, a listen id, a
 * small RC QP, the connection parameters; and the harness's counters (harness.h). */
#ifndef CMSAFE_RXE_SETUP_H
#define CMSAFE_RXE_SETUP_H

#include <netinet/in.h>
#include <rdma/rdma_cma.h>

/* The guest's RDMA address ($RXE_ADDR, set by scripts/rxe-vm) and a port; fails the test when
 * $RXE_ADDR holds none. */
struct sockaddr_in rxe_addr(unsigned short port);

/* A listen id bound to $RXE_ADDR:port on `ch`, in port space `ps`, with `backlog`. */
struct rdma_cm_id *rxe_listen(struct rdma_event_channel *ch, unsigned short port,
                              enum rdma_port_space ps, int backlog);

/* The attributes of the tests' RC QPs: 4 send and 4 receive work requests, one SGE each. */
struct ibv_qp_init_attr rxe_qp_attr(void);

/* An RC QP of rxe_qp_attr's on `id` with librdmacm's default PD and CQs. */
void rxe_create_qp(struct rdma_cm_id *id);

/* rdma_connect's and rdma_accept's parameters: `len` bytes of private data at `pdata`, one
 * outstanding RDMA read each way, retries as many as allowed. */
struct rdma_conn_param rxe_conn_param(const void *pdata, unsigned char len);

#endif
