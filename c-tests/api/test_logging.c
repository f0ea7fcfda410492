/* Logging: where cmsafe's messages go and which get through.
 *   By default (no callback) the ENOMEM warning goes to stderr.
 *   cmsafe_set_log_callback: the warning reaches the callback instead (level 2, the message says
 *     "memory", user_data passed through) and nothing goes to stderr; NULL restores stderr.
 *   cmsafe_set_log_level: 0 silences it, 1 (errors only) filters it, 2 lets it through; any
 *     other number than 0..5 fails with -1/EINVAL and changes nothing.
 *   A misuse abort is reported through the callback too (level 1, naming the handle).
 *   CMSAFE_LOG (read at the first cmsafe call; re-run of this program with it set): off and
 *     error silence the warning, warn lets it through, and cmsafe_set_log_level overrides it.
 * The warning is provoked with cmsafe_debug_fail_alloc at an ADDR_RESOLVED's event allocation. */
#define _GNU_SOURCE
#include <errno.h>
#include <limits.h>
#include <sys/wait.h>

#include "cm_util.h"
#include "harness.h"

enum { PORT = 7755 };

struct record {
    int level;
    char msg[512];
    void *user_data;
};
static struct record recs[64];
static int n_recs;

static void on_log(void *user_data, int level, const char *message)
{
    if (n_recs < 64) {
        recs[n_recs].level = level;
        snprintf(recs[n_recs].msg, sizeof recs[n_recs].msg, "%s", message);
        recs[n_recs].user_data = user_data;
    }
    n_recs++;
}

static struct rdma_event_channel *ch;

/* One ENOMEM at an event's allocation; then that event, fetched and released. */
static void provoke(void)
{
    struct rdma_cm_id *id = NULL;
    struct sockaddr_in dst = rxe_addr(PORT);
    REQUIRE(rdma_create_id(ch, &id, NULL, RDMA_PS_TCP) == 0, "rdma_create_id");
    REQUIRE(rdma_resolve_addr(id, NULL, (struct sockaddr *)&dst, 2000) == 0, "rdma_resolve_addr");
    REQUIRE(cm_wait_readable(ch, 3000), "no ADDR_RESOLVED queued");
    cmsafe_event *ev = NULL;
    cmsafe_debug_fail_alloc(0);
    errno = 0;
    int rc = cmsafe_get_event(ch, &ev);
    int e = errno;
    cmsafe_debug_fail_alloc(-1);
    CHECK(rc == -1 && e == ENOMEM, "the armed fetch returned %d (%s), want -1/ENOMEM", rc,
          strerror(e));
    if (rc == 0)
        cmsafe_event_release(ev);
    else
        cmsafe_event_release(cm_expect_within(ch, RDMA_CM_EVENT_ADDR_RESOLVED, 5000));
    CHECK(rdma_destroy_id(id) == 0, "rdma_destroy_id");
}

/* provoke() with stderr captured into `out`. */
static void provoke_capturing_stderr(char *out, size_t len)
{
    int p[2];
    REQUIRE(pipe(p) == 0, "pipe");
    fflush(stderr);
    int saved = dup(2);
    dup2(p[1], 2);
    close(p[1]);
    provoke();
    fflush(stderr);
    dup2(saved, 2);
    close(saved);
    size_t n = 0;
    ssize_t r;
    while (n + 1 < len && (r = read(p[0], out + n, len - 1 - n)) > 0)
        n += (size_t)r;
    out[n] = '\0';
    close(p[0]);
}

/* Exactly `want` new records since `before`; each a level-2 message mentioning memory. */
static void check_records(int before, int want, void *user_data, const char *what)
{
    CHECK(n_recs - before == want, "%s: %d messages, want %d", what, n_recs - before, want);
    for (int i = before; i < n_recs && i < 64; i++) {
        CHECK(recs[i].level == 2, "%s: level %d, want 2 (warning): %s", what, recs[i].level,
              recs[i].msg);
        CHECK(strstr(recs[i].msg, "memory") != NULL, "%s: message does not mention memory: %s",
              what, recs[i].msg);
        CHECK(recs[i].user_data == user_data, "%s: user_data %p, want %p", what,
              recs[i].user_data, user_data);
    }
}

/* ---- a misuse, reported through the callback, in a child ---- */
static cmsafe_event *victim;
static void write_log(void *user_data, int level, const char *message)
{
    (void)user_data;
    char line[600];
    int n = snprintf(line, sizeof line, "L%d: %s\n", level, message);
    if (n > 0 && write(2, line, (size_t)n) < 0) {
        /* nothing to do */
    }
}

static void misuse_logged(void)
{
    STEP("a misuse abort is logged through the callback");
    struct rdma_cm_id *id = NULL;
    struct sockaddr_in dst = rxe_addr(PORT);
    REQUIRE(rdma_create_id(ch, &id, NULL, RDMA_PS_TCP) == 0, "rdma_create_id");
    REQUIRE(rdma_resolve_addr(id, NULL, (struct sockaddr *)&dst, 2000) == 0, "rdma_resolve_addr");
    victim = cm_expect_within(ch, RDMA_CM_EVENT_ADDR_RESOLVED, 5000);
    int p[2];
    REQUIRE(pipe(p) == 0, "pipe");
    fflush(stdout);
    fflush(stderr);
    pid_t pid = fork();
    REQUIRE(pid >= 0, "fork");
    if (pid == 0) {
        close(p[0]);
        dup2(p[1], 2);
        cmsafe_set_log_callback(write_log, NULL);
        cmsafe_event_release(victim);
        cmsafe_event_release(victim);
        _exit(0);
    }
    close(p[1]);
    char out[4096];
    size_t n = 0;
    ssize_t r;
    while (n + 1 < sizeof out && (r = read(p[0], out + n, sizeof out - 1 - n)) > 0)
        n += (size_t)r;
    out[n] = '\0';
    close(p[0]);
    int status = 0;
    waitpid(pid, &status, 0);
    CHECK(WIFSIGNALED(status) && WTERMSIG(status) == SIGABRT, "status %#x, want SIGABRT", status);
    char needle[128];
    snprintf(needle, sizeof needle, "L1: cmsafe: cmsafe_event_release(%p): this cmsafe_event was "
             "already released", (void *)victim);
    CHECK(strstr(out, needle) != NULL, "the callback did not get \"%s\"; stderr: %s", needle, out);
    cmsafe_event_release(victim);
    CHECK(rdma_destroy_id(id) == 0, "rdma_destroy_id");
}

/* ---- CMSAFE_LOG: this program re-run with it set ---- */
static int env_child(int override)
{
    if (override)
        CHECK_EQ_INT(cmsafe_set_log_level(2), 0);
    cmsafe_set_log_callback(on_log, NULL);
    ch = rdma_create_event_channel();
    REQUIRE(ch, "rdma_create_event_channel");
    cmsafe_event *ev;
    cmsafe_get_event_timeout(ch, &ev, 0); /* the channel's state */
    int before = n_recs;
    provoke();
    printf("warnings=%d\n", n_recs - before);
    rdma_destroy_event_channel(ch);
    return harness_exit();
}

/* Runs this program with CMSAFE_LOG=`value`; returns the warnings its callback got, or -1. */
static int run_with_env(const char *value, int override)
{
    int p[2];
    REQUIRE(pipe(p) == 0, "pipe");
    fflush(stdout);
    fflush(stderr);
    pid_t pid = fork();
    REQUIRE(pid >= 0, "fork");
    if (pid == 0) {
        close(p[0]);
        dup2(p[1], 1);
        setenv("CMSAFE_LOG", value, 1);
        execl("/proc/self/exe", "test_logging", "env", override ? "override" : "plain",
              (char *)NULL);
        _exit(127);
    }
    close(p[1]);
    char out[1024];
    size_t n = 0;
    ssize_t r;
    while (n + 1 < sizeof out && (r = read(p[0], out + n, sizeof out - 1 - n)) > 0)
        n += (size_t)r;
    out[n] = '\0';
    close(p[0]);
    int status = 0;
    waitpid(pid, &status, 0);
    int warnings = -1;
    const char *at = strstr(out, "warnings=");
    if (!(WIFEXITED(status) && WEXITSTATUS(status) == 0) || !at ||
        sscanf(at, "warnings=%d", &warnings) != 1) {
        CHECK(0, "CMSAFE_LOG=%s child: status %#x, output: %s", value, status, out);
        return -1;
    }
    return warnings;
}

int main(int argc, char **argv)
{
    if (argc > 2 && strcmp(argv[1], "env") == 0)
        return env_child(strcmp(argv[2], "override") == 0);
    harness_watchdog(50);
    ch = rdma_create_event_channel();
    REQUIRE(ch, "rdma_create_event_channel: %s", strerror(errno));
    cmsafe_event *ev;
    /* The channel's state, so that every failure below hits an event allocation. */
    CHECK(cmsafe_get_event_timeout(ch, &ev, 0) == -1 && errno == ETIMEDOUT, "idle channel");

    STEP("no callback: the warning goes to stderr");
    char err[2048];
    provoke_capturing_stderr(err, sizeof err);
    CHECK(strstr(err, "memory") != NULL, "stderr lacks the warning: \"%s\"", err);

    STEP("a callback gets it instead");
    int marker;
    cmsafe_set_log_callback(on_log, &marker);
    int before = n_recs;
    provoke_capturing_stderr(err, sizeof err);
    check_records(before, 1, &marker, "callback");
    CHECK(strstr(err, "memory") == NULL, "the warning still went to stderr: %s", err);

    STEP("level 0 silences it, 1 filters it, 2 lets it through");
    CHECK_EQ_INT(cmsafe_set_log_level(0), 0);
    before = n_recs;
    provoke();
    check_records(before, 0, &marker, "level 0");
    CHECK_EQ_INT(cmsafe_set_log_level(1), 0);
    provoke();
    check_records(before, 0, &marker, "level 1");
    CHECK_EQ_INT(cmsafe_set_log_level(2), 0);
    provoke();
    check_records(before, 1, &marker, "level 2");

    STEP("invalid levels: -1/EINVAL, the level unchanged");
    static const int invalid[] = {6, -1, 100, INT_MIN, INT_MAX};
    for (size_t i = 0; i < sizeof invalid / sizeof invalid[0]; i++) {
        errno = 0;
        CHECK(cmsafe_set_log_level(invalid[i]) == -1 && errno == EINVAL,
              "cmsafe_set_log_level(%d): want -1/EINVAL", invalid[i]);
    }
    before = n_recs;
    provoke();
    check_records(before, 1, &marker, "level 2 after invalid levels");
    CHECK_EQ_INT(cmsafe_set_log_level(0), 0);
    for (size_t i = 0; i < sizeof invalid / sizeof invalid[0]; i++)
        cmsafe_set_log_level(invalid[i]);
    before = n_recs;
    provoke();
    check_records(before, 0, &marker, "level 0 after invalid levels");

    STEP("levels 3..5 are valid and still carry the warning");
    for (int level = 3; level <= 5; level++) {
        CHECK_EQ_INT(cmsafe_set_log_level(level), 0);
        before = n_recs;
        provoke();
        int warnings = 0;
        for (int i = before; i < n_recs && i < 64; i++) {
            CHECK(recs[i].level >= 1 && recs[i].level <= level, "level %d: a message of level %d",
                  level, recs[i].level);
            warnings += recs[i].level == 2 && strstr(recs[i].msg, "memory") != NULL;
        }
        CHECK(warnings == 1, "level %d: %d warnings, want 1", level, warnings);
    }
    CHECK_EQ_INT(cmsafe_set_log_level(2), 0);

    STEP("NULL restores stderr");
    cmsafe_set_log_callback(NULL, NULL);
    before = n_recs;
    provoke_capturing_stderr(err, sizeof err);
    CHECK(strstr(err, "memory") != NULL, "stderr lacks the warning after NULL: \"%s\"", err);
    CHECK_EQ_INT(n_recs, before);

    misuse_logged();

    STEP("CMSAFE_LOG");
    CHECK_EQ_INT(run_with_env("off", 0), 0);
    CHECK_EQ_INT(run_with_env("error", 0), 0);
    CHECK_EQ_INT(run_with_env("warn", 0), 1);
    CHECK_EQ_INT(run_with_env("off", 1), 1); /* cmsafe_set_log_level(2) overrides it */

    cmsafe_stats s = cm_stats();
    CHECK_EQ_INT(s.fetched, s.acked);
    CHECK_EQ_INT(s.live_events, 0);
    CHECK_EQ_INT(s.live_buffers, 0);
    CHECK_EQ_INT(s.pending, 0);
    rdma_destroy_event_channel(ch);
    return harness_exit();
}
