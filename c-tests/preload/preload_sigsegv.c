/* A program with its own SIGSEGV handler, under the preload: faults that are not on the preload's
 * pages must still reach it.
 *   preload_sigsegv [mprotect|longjmp]   (default mprotect)
 * Installs its handler first, then sets up a connection (events 1..5, acked at once, except the
 * child's ESTABLISHED, held), and writes to a PROT_NONE page of its own twice: once while an
 * event is held, once after every event was acked and the connection torn down. The handler
 * records the fault address and either makes the page writable (mprotect: the write is retried
 * and lands) or leaves with siglongjmp (longjmp). Checks the handler ran once per fault, at the
 * page's address. Every event is acked: no finding. Prints "preload_sigsegv: handler ran 2
 * times, both at the program's own page" and the harness line. Exit 0. */
#define _GNU_SOURCE
#include <errno.h>
#include <setjmp.h>
#include <signal.h>
#include <sys/mman.h>

#include "harness.h"
#include "raw_util.h"

enum { PORT = 7491 };

static int use_longjmp;
static char *page;
static size_t page_size;
static volatile sig_atomic_t faults;
static void *volatile fault_addr;
static sigjmp_buf escape;

static void on_segv(int sig, siginfo_t *info, void *uc)
{
    (void)sig;
    (void)uc;
    faults++;
    fault_addr = info->si_addr;
    if (use_longjmp)
        siglongjmp(escape, 1);
    if (mprotect(page, page_size, PROT_READ | PROT_WRITE) != 0)
        _exit(97);
}

/* Writes `value` to the protected page; returns 1 if the handler saw exactly that fault. */
static int fault_once(int value)
{
    REQUIRE(mprotect(page, page_size, PROT_NONE) == 0, "mprotect: %s", strerror(errno));
    int before = faults;
    fault_addr = NULL;
    if (use_longjmp) {
        if (sigsetjmp(escape, 1) == 0) {
            *(volatile int *)page = value;
            CHECK(0, "the write to the PROT_NONE page did not fault");
        }
    } else {
        *(volatile int *)page = value;
        CHECK_EQ_INT(*(volatile int *)page, value);
    }
    CHECK_EQ_INT(faults, before + 1);
    CHECK(fault_addr == page, "fault at %p, want %p", fault_addr, (void *)page);
    return faults == before + 1 && fault_addr == page;
}

int main(int argc, char **argv)
{
    use_longjmp = argc > 1 && strcmp(argv[1], "longjmp") == 0;
    REQUIRE(argc < 2 || use_longjmp || strcmp(argv[1], "mprotect") == 0,
            "usage: preload_sigsegv [mprotect|longjmp]");
    harness_watchdog(60);
    page_size = (size_t)sysconf(_SC_PAGESIZE);
    page = mmap(NULL, page_size, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    REQUIRE(page != MAP_FAILED, "mmap: %s", strerror(errno));
    struct sigaction sa = {.sa_sigaction = on_segv, .sa_flags = SA_SIGINFO};
    sigemptyset(&sa.sa_mask);
    REQUIRE(sigaction(SIGSEGV, &sa, NULL) == 0, "sigaction: %s", strerror(errno));

    struct raw_pair p;
    struct rdma_cm_event *est = NULL;
    raw_pair_connect(&p, PORT, &est); /* seq 1..5, 5 held */
    int ok = fault_once(1);
    raw_ack(est);

    REQUIRE(rdma_disconnect(p.client) == 0, "rdma_disconnect: %s", strerror(errno));
    raw_get_ack(p.sch, RDMA_CM_EVENT_DISCONNECTED);
    REQUIRE(rdma_disconnect(p.child) == 0, "rdma_disconnect: %s", strerror(errno));
    raw_get_ack(p.cch, RDMA_CM_EVENT_DISCONNECTED);
    rdma_destroy_qp(p.child);
    rdma_destroy_qp(p.client);
    CHECK_EQ_INT(rdma_destroy_id(p.child), 0);
    CHECK_EQ_INT(rdma_destroy_id(p.client), 0);
    CHECK_EQ_INT(rdma_destroy_id(p.listen), 0);
    rdma_destroy_event_channel(p.cch);
    rdma_destroy_event_channel(p.sch);

    ok &= fault_once(2);
    if (ok)
        printf("preload_sigsegv: handler ran %d times, both at the program's own page\n",
               (int)faults);
    return harness_exit();
}
