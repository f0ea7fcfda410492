/* Misuse: cq-never-acked. A completion event got and never acked; the program exits without
 * destroying the CQ (had it, ibv_destroy_cq would have waited for good).
 *   CM events: seq 1..5, all acked. Completion events: 1, from the CQ printed as "cq 0x...",
 *   got by the thread printed as "main thread <tid>".
 * Raw libibverbs: runs to the end, exit 0. Audit and safe: cq-never-acked at exit. */
#define _GNU_SOURCE
#include <errno.h>

#include "harness.h"
#include "raw_util.h"

enum { PORT = 7496 };

int main(void)
{
    harness_watchdog(60);
    struct raw_cq_pair p;
    raw_cq_main_event(&p, PORT, 1);
    STEP("exiting with the completion event unacked");
    return harness_exit();
}
