/* Misuse: use-after-ack. The classic bug, on raw librdmacm: the server acks CONNECT_REQUEST and
 * then reads its private data (freed inside rdma_ack_cm_event). One process, a listener and a
 * client on two channels.
 *   Events, in fetch order: 1 ADDR_RESOLVED, 2 ROUTE_RESOLVED (client), 3 CONNECT_REQUEST (the
 *   misused one), 4 REJECTED (client). Expected finding: use-after-ack seq=3 type=CONNECT_REQUEST.
 * Prints on stdout the private data length and bytes read before the ack (the same with and
 * without the preload: the transport's length, checked here, 56 on IB/RoCE and the 35 bytes sent
 * on iWARP; RAW_TOKEN) and "use-after-ack read: <bytes>": under the preload's safe mode the
 * bytes are RAW_TOKEN (read from the preload's copy); raw, they come from freed heap memory.
 * Otherwise well-behaved: every other event is acked at once and every id destroyed. Exit 0.
 * With the argument "syscall", the read after the ack is the kernel's: write(2) of the private
 * data to a pipe (as a server logs or forwards it), then read back from the pipe and printed the
 * same way; the write must succeed (raw it reads freed heap memory, under audit the preload's
 * userfaultfd serves it: as root it must, docs/preload.md). */
#define _GNU_SOURCE
#include <errno.h>

#include "harness.h"
#include "raw_util.h"

enum { PORT = 7481 };

int main(int argc, char **argv)
{
    int by_syscall = argc == 2 && strcmp(argv[1], "syscall") == 0;
    harness_watchdog(60);
    struct rdma_event_channel *sch = raw_channel(), *cch = raw_channel();
    struct rdma_cm_id *listen_id = raw_listen(sch, PORT);
    struct rdma_cm_id *client = raw_client(cch, PORT, 0); /* seq 1, 2 */
    raw_connect(client, RAW_TOKEN, sizeof RAW_TOKEN);

    struct rdma_cm_event *req = raw_get(sch, RDMA_CM_EVENT_CONNECT_REQUEST); /* seq 3 */
    struct rdma_cm_id *child = req->id;
    const unsigned char *pdata = req->param.conn.private_data;
    unsigned pdata_len = req->param.conn.private_data_len;
    REQUIRE(pdata && pdata_len >= sizeof RAW_TOKEN, "CONNECT_REQUEST private data: %u bytes",
            pdata_len);
    CHECK_EQ_INT(pdata_len, cm_req_len(raw_transport(child), sizeof RAW_TOKEN));
    printf("CONNECT_REQUEST private_data_len=%u\n", pdata_len);
    raw_print_bytes("before the ack: ", pdata, sizeof RAW_TOKEN - 1);
    STEP("acking CONNECT_REQUEST, then reading its private data");
    raw_ack(req);

    char got[sizeof RAW_TOKEN];
    if (by_syscall) {
        int pipefd[2];
        REQUIRE(pipe(pipefd) == 0, "pipe");
        /* The misuse, by the kernel: write(2) reads the acked event's memory. */
        ssize_t n = write(pipefd[1], pdata, sizeof got);
        REQUIRE(n == (ssize_t)sizeof got, "write(2) of the private data after the ack: %zd", n);
        REQUIRE(read(pipefd[0], got, sizeof got) == (ssize_t)sizeof got, "read back");
        close(pipefd[0]);
        close(pipefd[1]);
    } else {
        memcpy(got, pdata, sizeof got); /* the misuse: reads the acked event's memory */
    }
    raw_print_bytes("use-after-ack read: ", got, sizeof got - 1);
    STEP("read done");

    raw_reject(child);
    raw_get_ack(cch, RDMA_CM_EVENT_REJECTED); /* seq 4 */
    rdma_destroy_id(child);
    raw_destroy_id(client);
    rdma_destroy_id(listen_id);
    rdma_destroy_event_channel(cch);
    rdma_destroy_event_channel(sch);
    return harness_exit();
}
