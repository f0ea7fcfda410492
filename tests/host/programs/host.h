/* What the host tests' programs share: CM steps on the stand-in librdmacm that must work (a step
 * that fails says where on stdout and exits 2: some programs take over their fd 2), and the
 * private data bytes printed so that a test can compare them. stdout is unbuffered (host_start):
 * a program killed by a signal has said everything up to it. */
#ifndef CMSAFE_HOST_H
#define CMSAFE_HOST_H

#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/auxv.h>
#include <unistd.h>

#include "standin.h"

#define REQUIRE(cond, ...)                                           \
    do {                                                             \
        if (!(cond)) {                                               \
            int require_errno = errno;                               \
            printf("%s:%d: %s failed: ", __FILE__, __LINE__, #cond); \
            printf(__VA_ARGS__);                                     \
            printf(" (errno %s)\n", strerror(require_errno));        \
            _exit(2);                                                \
        }                                                            \
    } while (0)

static inline void host_start(void)
{
    setvbuf(stdout, NULL, _IONBF, 0);
}

/* A case of a program: its name, how many arguments follow it, and what runs it (given them). */
struct host_case {
    const char *name;
    int args;
    int (*run)(char **args);
};

/* Runs the case ARGV[1] names with the arguments after it; otherwise says USAGE, exit 2. */
static inline int host_main(int argc, char **argv, const struct host_case *cases, size_t n,
                            const char *usage)
{
    host_start();
    for (size_t i = 0; argc >= 2 && i < n; i++) {
        if (strcmp(argv[1], cases[i].name) == 0 && argc == cases[i].args + 2)
            return cases[i].run(argv + 2);
    }
    printf("usage: %s\n", usage);
    return 2;
}

/* The setuid programs' start (secure.c, secure_api.c): AT_SECURE as the kernel gave it, and the
 * ids, said on stdout; exit 3 when it is not EXPECTED ("0" or "1"). */
static inline void host_secure(const char *expected)
{
    unsigned long secure = getauxval(AT_SECURE);
    printf("AT_SECURE %lu, uid %d, euid %d\n", secure, (int)getuid(), (int)geteuid());
    if (secure != strtoul(expected, NULL, 10))
        _exit(3);
}

static inline struct rdma_event_channel *host_channel(void)
{
    struct rdma_event_channel *ch = rdma_create_event_channel();
    REQUIRE(ch, "rdma_create_event_channel");
    return ch;
}

static inline struct rdma_cm_id *host_id(struct rdma_event_channel *ch)
{
    struct rdma_cm_id *id = NULL;
    REQUIRE(rdma_create_id(ch, &id, NULL, RDMA_PS_TCP) == 0, "rdma_create_id");
    return id;
}

/* Queues an event of TYPE for ID (for a CONNECT_REQUEST, ID is the listen id): its id. */
static inline struct rdma_cm_id *host_queue(struct rdma_cm_id *id, enum rdma_cm_event_type type,
                                            const char *private_data)
{
    uint8_t len = private_data ? (uint8_t)strlen(private_data) : 0;
    struct rdma_cm_id *got = standin_queue_event(id, type, 0, private_data, len);
    REQUIRE(got, "standin_queue_event(%s)", rdma_event_str(type));
    return got;
}

/* The next event on CH, which must be of TYPE. */
static inline struct rdma_cm_event *host_get(struct rdma_event_channel *ch,
                                             enum rdma_cm_event_type type)
{
    struct rdma_cm_event *ev = NULL;
    REQUIRE(rdma_get_cm_event(ch, &ev) == 0, "rdma_get_cm_event");
    REQUIRE(ev->event == type, "got %s, want %s", rdma_event_str(ev->event), rdma_event_str(type));
    return ev;
}

static inline void host_ack(struct rdma_cm_event *ev)
{
    REQUIRE(rdma_ack_cm_event(ev) == 0, "rdma_ack_cm_event");
}

/* One event of TYPE for ID, got and acked at once. */
static inline void host_round(struct rdma_cm_id *id, enum rdma_cm_event_type type)
{
    host_queue(id, type, NULL);
    host_ack(host_get(id->channel, type));
}

/* "LABEL<bytes>\n", each byte that is not printable ASCII as \xNN. */
static inline void host_print_bytes(const char *label, const void *bytes, size_t n)
{
    const unsigned char *b = bytes;
    printf("%s", label);
    for (size_t i = 0; i < n; i++) {
        if (b[i] >= 0x20 && b[i] < 0x7f && b[i] != '\\')
            putchar(b[i]);
        else
            printf("\\x%02x", b[i]);
    }
    putchar('\n');
}

#endif
