/* A small test harness for the c-tests: CHECK macros that count, a watchdog, and the
 * "N passed, N failed" closing line the runners read. */
#ifndef CMSAFE_HARNESS_H
#define CMSAFE_HARNESS_H

#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* Shared by every translation unit of a test program; defined in cm_util.c. */
extern int harness_passed, harness_failed;

#define CHECK(cond, ...)                                                         \
    do {                                                                         \
        if (cond) {                                                              \
            harness_passed++;                                                    \
        } else {                                                                 \
            harness_failed++;                                                    \
            fprintf(stderr, "FAIL %s:%d: %s: ", __FILE__, __LINE__, #cond);      \
            fprintf(stderr, __VA_ARGS__);                                        \
            fputc('\n', stderr);                                                 \
        }                                                                        \
    } while (0)

#define CHECK_EQ_INT(got, want)                                                  \
    CHECK((long long)(got) == (long long)(want), "got %lld, want %lld",          \
          (long long)(got), (long long)(want))

/* A progress line on stderr, so a hang or crash shows where it happened. */
#define STEP(...)                                                                \
    do {                                                                         \
        fprintf(stderr, "step: " __VA_ARGS__);                                   \
        fputc('\n', stderr);                                                     \
    } while (0)

/* A fatal check: the test cannot go on without it. `cond` is evaluated once. */
#define REQUIRE(cond, ...)                                                       \
    do {                                                                         \
        int harness_before_ = harness_failed;                                    \
        CHECK(cond, __VA_ARGS__);                                                \
        if (harness_failed != harness_before_)                                   \
            harness_exit();                                                      \
    } while (0)

static inline int harness_exit(void)
{
    printf("%s: %d passed, %d failed\n", program_invocation_short_name, harness_passed,
           harness_failed);
    fflush(stdout);
    exit(harness_failed ? 1 : 0);
}

static void harness_watchdog_fired(int sig)
{
    (void)sig;
    static const char msg[] = "FAIL watchdog: the test did not finish in time (a hang)\n";
    if (write(2, msg, sizeof msg - 1) < 0) {
        /* nothing more to do */
    }
    _exit(3);
}

/* Fails the whole test, instead of hanging, if it runs longer than `seconds`. */
static inline void harness_watchdog(unsigned seconds)
{
    signal(SIGALRM, harness_watchdog_fired);
    alarm(seconds);
}

#endif
