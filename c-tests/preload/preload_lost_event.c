/* An event the kernel reported that librdmacm never completed: rdma_destroy_id then waits for
 * its ack forever. The field's way in is a CM thread cancelled as the kernel hands it an event
 * (glibc before 2.41 acts on the cancel after the read returned: the event is lost; libiscsi
 * 1.19 cancels its CM thread at every disconnect). That timing cannot be had on demand, so this
 * program loses the event the deterministic way: it reads it from the channel's fd itself,
 * bypassing librdmacm, just as the cancelled read did.
 *   preload_lost_event direct      the event is read past librdmacm, then rdma_destroy_id
 *   preload_lost_event cancelled   first a reader thread is cancelled inside rdma_get_cm_event
 *                                  on the same channel (the field's cause), then the same
 * Raw, rdma_destroy_id blocks forever in both; the audit names the hang while it lasts. */
#define _GNU_SOURCE
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <stdint.h>
#include <unistd.h>

#include "harness.h"
#include "raw_util.h"

enum { PORT = 7433 };

/* The kernel's rdma_ucm ABI (<rdma/rdma_user_cm.h>, which cannot share a translation unit with
 * <rdma/rdma_cma.h>): the command header, GET_EVENT's command and the head of its response. */
enum { UCM_CMD_GET_EVENT = 12 };
struct ucm_cmd_hdr {
    uint32_t cmd;
    uint16_t in, out;
};
struct ucm_get_event {
    uint64_t response;
};
struct ucm_event_resp {
    uint64_t uid;
    uint32_t id, event, status;
    unsigned char rest[500]; /* param and ece: more than the kernel writes */
};

static void *reader(void *arg)
{
    struct rdma_cm_event *ev;
    rdma_get_cm_event(arg, &ev);
    return NULL;
}

int main(int argc, char **argv)
{
    REQUIRE(argc == 2 && (!strcmp(argv[1], "direct") || !strcmp(argv[1], "cancelled")),
            "usage: preload_lost_event direct|cancelled");
    struct rdma_event_channel *ch = raw_channel();

    if (!strcmp(argv[1], "cancelled")) {
        pthread_t t;
        void *ret;
        REQUIRE(pthread_create(&t, NULL, reader, ch) == 0, "pthread_create");
        usleep(300 * 1000);
        pthread_cancel(t);
        REQUIRE(pthread_join(t, &ret) == 0 && ret == PTHREAD_CANCELED, "the reader was not cancelled");
        STEP("a reader thread was cancelled inside rdma_get_cm_event");
    }

    struct rdma_cm_id *id = raw_addr_queued(ch, PORT);

    /* The kernel's own command, past librdmacm: the kernel counts the event as reported. */
    struct ucm_event_resp resp;
    struct {
        struct ucm_cmd_hdr hdr;
        struct ucm_get_event get;
    } cmd = {
        .hdr = {.cmd = UCM_CMD_GET_EVENT, .in = sizeof cmd.get, .out = sizeof resp},
        .get = {.response = (uintptr_t)&resp},
    };
    REQUIRE(write(ch->fd, &cmd, sizeof cmd) == (ssize_t)sizeof cmd, "UCMA GET_EVENT: %s",
            strerror(errno));
    CHECK_EQ_INT(resp.event, RDMA_CM_EVENT_ADDR_RESOLVED);
    STEP("read the ADDR_RESOLVED past librdmacm; calling rdma_destroy_id");
    rdma_destroy_id(id);
    STEP("rdma_destroy_id returned");
    return harness_exit();
}
