/* A program's own SIGSEGV handling, which must reach it exactly as without the preload. Audit mode
 * installs the preload's SIGSEGV handler at the first CM event (its guarded pages are mapped
 * then); in every case but `after` the program sets its action BEFORE that event, so the
 * preload's handler chains to it:
 *   signals resethand  an SA_RESETHAND handler that returns, then a NULL write: the handler runs
 *                      once (it says so on each run, and gives up with exit 4 at the 100th), the
 *                      fault repeats with the default action and kills the process
 *   signals nodefer    an SA_NODEFER handler that leaves by longjmp (which keeps the signal mask
 *                      the handler ran with), two NULL writes: both recovered, exit 0
 *   signals mask       a handler whose sa_mask holds SIGUSR1, a write to a PROT_NONE page: prints
 *                      whether SIGUSR1 and SIGSEGV were blocked while it ran, exit 0
 *   signals default    SIG_DFL, then a NULL write: killed by SIGSEGV
 *   signals ignore     SIG_IGN, then a NULL write: killed by SIGSEGV (the kernel forces it)
 * And one where the program's handler comes AFTER the first event:
 *   signals after TOKEN [HOW]  a CONNECT_REQUEST carrying TOKEN got, then a crash reporter
 *                        installed (a SIGSEGV handler that says so and exits 99) by HOW: sigaction
 *                        (the default), __sigaction, signal, ssignal, bsd_signal or sysv_signal;
 *                        then the request acked and its private data read: prints "after the
 *                        ack: " and the bytes, exit 0
 * A fault that does not come, or a process that survives one meant to kill it, is exit 5. */
#define _GNU_SOURCE
#include <setjmp.h>
#include <signal.h>
#include <sys/mman.h>

#include "host.h"

static int *volatile null_pointer;

static void null_write(void)
{
    *null_pointer = 1;
}

static void say(const char *line)
{
    (void)!write(1, line, strlen(line));
}

static void set_action(void (*handler)(int), int flags, int masked)
{
    struct sigaction sa = {.sa_handler = handler, .sa_flags = flags};
    sigemptyset(&sa.sa_mask);
    if (masked)
        sigaddset(&sa.sa_mask, masked);
    REQUIRE(sigaction(SIGSEGV, &sa, NULL) == 0, "sigaction");
}

/* The first CM event, got and acked: audit mode maps its pages and installs its handler. */
static void first_event(void)
{
    host_round(host_id(host_channel()), RDMA_CM_EVENT_ESTABLISHED);
}

static volatile sig_atomic_t runs;

static void count_and_return(int sig)
{
    (void)sig;
    runs++;
    say("SIGSEGV handler ran\n");
    if (runs >= 100) {
        say("the handler ran 100 times: giving up\n");
        _exit(4);
    }
}

static int resethand(char **args)
{
    (void)args;
    set_action(count_and_return, SA_RESETHAND, 0);
    first_event();
    null_write();
    say("survived the fault\n");
    return 5;
}

static jmp_buf escape;

static void leave(int sig)
{
    (void)sig;
    longjmp(escape, 1);
}

static int nodefer(char **args)
{
    (void)args;
    set_action(leave, SA_NODEFER, 0);
    first_event();
    for (int i = 1; i <= 2; i++) {
        /* glibc's setjmp keeps no signal mask, so longjmp restores none. */
        if (setjmp(escape) == 0) {
            null_write();
            printf("fault %d did not fault\n", i);
            return 5;
        }
        printf("recovered from fault %d\n", i);
    }
    return 0;
}

static char *page;
static size_t page_size;
static volatile sig_atomic_t usr1_blocked = -1, segv_blocked = -1;

static void check_mask(int sig)
{
    (void)sig;
    sigset_t now;
    sigprocmask(SIG_BLOCK, NULL, &now);
    usr1_blocked = sigismember(&now, SIGUSR1);
    segv_blocked = sigismember(&now, SIGSEGV);
    if (mprotect(page, page_size, PROT_READ | PROT_WRITE) != 0)
        _exit(6);
}

static int mask(char **args)
{
    (void)args;
    set_action(check_mask, 0, SIGUSR1);
    first_event();
    page_size = (size_t)sysconf(_SC_PAGESIZE);
    page = mmap(NULL, page_size, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    REQUIRE(page != MAP_FAILED, "mmap");
    *(volatile char *)page = 1;
    REQUIRE(usr1_blocked != -1, "the handler ran");
    printf("in the handler: SIGUSR1 %s, SIGSEGV %s\n", usr1_blocked ? "blocked" : "not blocked",
           segv_blocked ? "blocked" : "not blocked");
    return 0;
}

static int disposition(void (*action)(int))
{
    set_action(action, 0, 0);
    first_event();
    null_write();
    say("survived the fault\n");
    return 5;
}

static int by_default(char **args)
{
    (void)args;
    return disposition(SIG_DFL);
}

static int ignored(char **args)
{
    (void)args;
    return disposition(SIG_IGN);
}

static void crash_reporter(int sig)
{
    (void)sig;
    say("crash reporter: SIGSEGV\n");
    _exit(99);
}

/* glibc's other names for sigaction and signal, declared here: the headers do not all. */
extern int __sigaction(int, const struct sigaction *, struct sigaction *);
extern sighandler_t ssignal(int, sighandler_t);
extern sighandler_t bsd_signal(int, sighandler_t);
extern sighandler_t sysv_signal(int, sighandler_t);

/* The crash reporter installed by HOW (after's). */
static void install(const char *how)
{
    if (strcmp(how, "sigaction") == 0) {
        set_action(crash_reporter, 0, 0);
        return;
    }
    if (strcmp(how, "__sigaction") == 0) {
        struct sigaction sa = {.sa_handler = crash_reporter};
        sigemptyset(&sa.sa_mask);
        REQUIRE(__sigaction(SIGSEGV, &sa, NULL) == 0, "__sigaction");
        return;
    }
    sighandler_t (*set)(int, sighandler_t) = strcmp(how, "signal") == 0      ? signal
                                             : strcmp(how, "ssignal") == 0    ? ssignal
                                             : strcmp(how, "bsd_signal") == 0 ? bsd_signal
                                             : strcmp(how, "sysv_signal") == 0 ? sysv_signal
                                                                               : NULL;
    REQUIRE(set, "no way %s", how);
    REQUIRE(set(SIGSEGV, crash_reporter) != SIG_ERR, "%s", how);
}

static int after(char **args)
{
    const char *token = args[0];
    struct rdma_event_channel *ch = host_channel();
    struct rdma_cm_id *listen = host_id(ch);
    struct rdma_cm_id *child = host_queue(listen, RDMA_CM_EVENT_CONNECT_REQUEST, token);
    struct rdma_cm_event *req = host_get(ch, RDMA_CM_EVENT_CONNECT_REQUEST);
    install(args[1] ? args[1] : "sigaction");
    const unsigned char *pdata = req->param.conn.private_data;
    unsigned len = req->param.conn.private_data_len;
    REQUIRE(pdata && len == strlen(token), "private data of %u bytes", len);
    host_ack(req);
    unsigned char got[256];
    memcpy(got, pdata, len); /* the event's memory after its ack */
    host_print_bytes("after the ack: ", got, len);
    REQUIRE(rdma_destroy_id(child) == 0, "rdma_destroy_id(child)");
    REQUIRE(rdma_destroy_id(listen) == 0, "rdma_destroy_id(listen)");
    rdma_destroy_event_channel(ch);
    return 0;
}

int main(int argc, char **argv)
{
    static const struct host_case cases[] = {
        {"resethand", 0, resethand},
        {"nodefer", 0, nodefer},
        {"mask", 0, mask},
        {"default", 0, by_default},
        {"ignore", 0, ignored},
        {"after", 1, after},
        {"after", 2, after},
    };
    return host_main(argc, argv, cases, sizeof cases / sizeof cases[0],
                     "signals resethand | nodefer | mask | default | ignore | after TOKEN [HOW]");
}
