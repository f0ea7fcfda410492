/* exit() from a signal handler that interrupted a CM call: the program's exit must not wait for
 * anything the interrupted call holds.
 *   exit blocked  fd 2 becomes a pipe nobody reads, filled to the brim; an ESTABLISHED is got and
 *                 acked (under the preload with CMSAFE_LATE_ACK_MS=0 the ack says a late-ack
 *                 finding on stderr, so it blocks in that write), then the program waits; 300 ms
 *                 in, SIGALRM's handler empties the pipe (so that what exit writes has room) and
 *                 calls exit(0)
 *   exit loop     gets and acks events in a loop until SIGALRM, 2 to 22 ms in (by the process
 *                 id, so that runs land at different points of the loop), calls exit(0) from its
 *                 handler
 *   exit loop fork  the same, but the handler forks (the child _exits 0), waits for the child
 *                 and then calls exit(0): the fork's handlers run in the interrupted thread
 *   exit both N   two threads call exit(3) while the preload writes its summary: N ESTABLISHED are
 *                 got and never acked (under the preload, exit writes a never-acked finding for
 *                 each before the summary); main calls exit(0), and a second thread, once fd 2
 *                 (a regular file) has grown past what it held when main called exit, calls
 *                 exit(3). Exits 0 or 3, whichever of the two ends the process.
 * All exit 0 (5: the child did not); a step that fails is exit 2, said on stdout. */
#define _GNU_SOURCE
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/time.h>
#include <sys/wait.h>

#include "host.h"

static int reader = -1;

static void empty_and_exit(int sig)
{
    (void)sig;
    char buf[4096];
    while (read(reader, buf, sizeof buf) > 0)
        ;
    static const char line[] = "alarm: exit(0)\n";
    (void)!write(1, line, sizeof line - 1);
    exit(0);
}

static void exit_now(int sig)
{
    (void)sig;
    exit(0);
}

/* fork(2) from the handler (a service that spawns a helper on a signal): the child exits at
 * once, the parent waits for it and exits. */
static void fork_and_exit(int sig)
{
    (void)sig;
    pid_t child = fork();
    if (child == 0)
        _exit(0);
    int status = -1;
    if (child < 0 || waitpid(child, &status, 0) != child || status != 0)
        _exit(5);
    exit(0);
}

static void on_alarm(void (*handler)(int), long usec)
{
    struct sigaction sa = {.sa_handler = handler};
    sigemptyset(&sa.sa_mask);
    REQUIRE(sigaction(SIGALRM, &sa, NULL) == 0, "sigaction");
    struct itimerval t = {.it_value = {.tv_sec = usec / 1000000, .tv_usec = usec % 1000000}};
    REQUIRE(setitimer(ITIMER_REAL, &t, NULL) == 0, "setitimer");
}

/* Makes fd 2 a pipe that holds as much as it can; keeps its read end, non-blocking. */
static void full_stderr(void)
{
    int p[2];
    REQUIRE(pipe(p) == 0, "pipe");
    REQUIRE(dup2(p[1], 2) == 2, "dup2");
    close(p[1]);
    reader = p[0];
    REQUIRE(fcntl(reader, F_SETFL, O_NONBLOCK) == 0, "fcntl");
    REQUIRE(fcntl(2, F_SETFL, O_NONBLOCK) == 0, "fcntl");
    static char page[4096];
    while (write(2, page, sizeof page) > 0)
        ;
    while (write(2, page, 1) > 0)
        ;
    REQUIRE(errno == EAGAIN, "filling the pipe");
    REQUIRE(fcntl(2, F_SETFL, 0) == 0, "fcntl");
}

static int blocked(char **args)
{
    (void)args;
    full_stderr();
    struct rdma_event_channel *ch = host_channel();
    struct rdma_cm_id *id = host_id(ch);
    host_queue(id, RDMA_CM_EVENT_ESTABLISHED, NULL);
    struct rdma_cm_event *ev = host_get(ch, RDMA_CM_EVENT_ESTABLISHED);
    on_alarm(empty_and_exit, 300 * 1000);
    printf("acking\n");
    host_ack(ev);
    printf("acked; waiting for the alarm\n");
    pause();
    printf("pause returned: the alarm's handler did not exit\n");
    return 4;
}

static int loop(char **args)
{
    struct rdma_cm_id *id = host_id(host_channel());
    int by_fork = args[0] && strcmp(args[0], "fork") == 0;
    on_alarm(by_fork ? fork_and_exit : exit_now, 2000 + (long)getpid() * 7919 % 20000);
    for (long i = 0; i < 100 * 1000 * 1000; i++)
        host_round(id, RDMA_CM_EVENT_ESTABLISHED);
    printf("the timer did not come\n");
    return 4;
}

static off_t stderr_size(void)
{
    struct stat st;
    REQUIRE(fstat(2, &st) == 0, "fstat");
    return st.st_size;
}

static off_t size_at_exit = -1;
static pthread_mutex_t exiting_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t exiting = PTHREAD_COND_INITIALIZER;

/* The second thread: waits for main's exit to be under way and to have written to fd 2, then
 * exits too. */
static void *second_exit(void *arg)
{
    (void)arg;
    pthread_mutex_lock(&exiting_lock);
    while (size_at_exit < 0)
        pthread_cond_wait(&exiting, &exiting_lock);
    off_t before = size_at_exit;
    pthread_mutex_unlock(&exiting_lock);
    while (stderr_size() <= before)
        ;
    exit(3);
}

static int both(char **args)
{
    long n = strtol(args[0], NULL, 10);
    struct rdma_event_channel *ch = host_channel();
    struct rdma_cm_id *id = host_id(ch);
    for (long i = 0; i < n; i++) {
        host_queue(id, RDMA_CM_EVENT_ESTABLISHED, NULL);
        host_get(ch, RDMA_CM_EVENT_ESTABLISHED);
    }
    pthread_t t;
    REQUIRE(pthread_create(&t, NULL, second_exit, NULL) == 0, "pthread_create");
    printf("holding %ld events; exit(0)\n", n);
    pthread_mutex_lock(&exiting_lock);
    size_at_exit = stderr_size();
    pthread_cond_signal(&exiting);
    pthread_mutex_unlock(&exiting_lock);
    exit(0);
}

int main(int argc, char **argv)
{
    static const struct host_case cases[] = {
        {"blocked", 0, blocked},
        {"loop", 0, loop},
        {"loop", 1, loop},
        {"both", 1, both},
    };
    return host_main(argc, argv, cases, sizeof cases / sizeof cases[0],
                     "exit blocked | loop [fork] | both N");
}
