/* A small test harness for the c-tests: CHECK macros that count, a watchdog, and the
 * "N passed, N failed" closing line the runners read. */
#ifndef CMSAFE_HARNESS_H
#define CMSAFE_HARNESS_H

#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* strerrorname_np is glibc 2.32's; Debian 11 (bullseye) has 2.31. There, the names the tests
 * print, from errno.h, and "E?" (with the number) for any other. */
#if defined(__GLIBC__) && !__GLIBC_PREREQ(2, 32)
#include <errno.h>
static inline const char *harness_errname(int e)
{
    switch (e) {
#define HARNESS_ERRNAME(n) \
    case n:                \
        return #n;
        HARNESS_ERRNAME(EPERM) HARNESS_ERRNAME(ENOENT) HARNESS_ERRNAME(ESRCH)
        HARNESS_ERRNAME(EINTR) HARNESS_ERRNAME(EIO) HARNESS_ERRNAME(ENXIO)
        HARNESS_ERRNAME(EBADF) HARNESS_ERRNAME(EAGAIN) HARNESS_ERRNAME(ENOMEM)
        HARNESS_ERRNAME(EFAULT) HARNESS_ERRNAME(EBUSY) HARNESS_ERRNAME(EEXIST)
        HARNESS_ERRNAME(ENODEV) HARNESS_ERRNAME(EINVAL) HARNESS_ERRNAME(ENOSYS)
        HARNESS_ERRNAME(EPROTO) HARNESS_ERRNAME(EOPNOTSUPP) HARNESS_ERRNAME(EADDRINUSE)
        HARNESS_ERRNAME(EADDRNOTAVAIL) HARNESS_ERRNAME(ENETUNREACH) HARNESS_ERRNAME(ECONNABORTED)
        HARNESS_ERRNAME(ECONNRESET) HARNESS_ERRNAME(EISCONN) HARNESS_ERRNAME(ENOTCONN)
        HARNESS_ERRNAME(ETIMEDOUT) HARNESS_ERRNAME(ECONNREFUSED) HARNESS_ERRNAME(EHOSTUNREACH)
        HARNESS_ERRNAME(EALREADY) HARNESS_ERRNAME(EINPROGRESS)
#undef HARNESS_ERRNAME
    default:
        return "E?";
    }
}
#define strerrorname_np harness_errname
#endif

/* Shared by every translation unit of a test program; defined in cm_util.c. */
extern int harness_passed, harness_failed;
/* Steps the transport cannot run (cm_skip), each printed with its reason: counted apart. */
extern int harness_skipped;

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
    if (harness_skipped)
        printf("%s: %d passed, %d failed, %d skipped\n", program_invocation_short_name,
               harness_passed, harness_failed, harness_skipped);
    else
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

/* How many times longer than in the x86_64 guest a test may take where it runs: RXE_TIME_SCALE,
 * which scripts/rxe-vm sets for a guest whose emulation is slower (the arm64 guest: its --help
 * says why); 1 when unset, or not a whole number from 1 to 100. */
static inline unsigned harness_time_scale(void)
{
    const char *s = getenv("RXE_TIME_SCALE");
    char *end = NULL;
    unsigned long v = s && *s ? strtoul(s, &end, 10) : 1;
    return (!end || *end == '\0') && v >= 1 && v <= 100 ? (unsigned)v : 1;
}

/* Fails the whole test, instead of hanging, if it runs longer than `seconds` (stretched by
 * harness_time_scale(): a slower guest gets more time, a hang is still caught). */
static inline void harness_watchdog(unsigned seconds)
{
    signal(SIGALRM, harness_watchdog_fired);
    alarm(seconds * harness_time_scale());
}

#endif
