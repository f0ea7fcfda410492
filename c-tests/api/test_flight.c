/* The flight recorder on the real stack: a loopback connection's events (ADDR_RESOLVED,
 * ROUTE_RESOLVED, CONNECT_REQUEST, ESTABLISHED twice, DISCONNECTED twice) fetched with
 * cmsafe_get_event, then cmsafe_flight_dump to a file: one line per event, in fetch order, each
 * with the seq, type, status, cm_id, listen id and fetch time the API handed out, acked
 * at its fetch, released after (or not yet, for the one still held). Then a ring of 3 that
 * wraps (exactly the last 3 of 5 events), the recorder off, the errors, and in child processes
 * the dump at exit (CMSAFE_FLIGHT_EVENTS=2, CMSAFE_FLIGHT_DUMP) and on a misuse's abort. */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <signal.h>
#include <sys/wait.h>

#include "cm_util.h"
#include "harness.h"

enum { PORT = 7770, MAX = 64 };

/* What the test fetched, in order; what a dump line said. */
struct rec {
    uint64_t seq;
    char type[32];
    int status;
    char id[32], listen_id[32];
    uint64_t fetch_ns, ack_ns, release_ns; /* UINT64_MAX: null */
};

static struct rec fetched[MAX];
static int n_fetched;

/* librdmacm's name without RDMA_CM_EVENT_, as the dump spells types. */
static const char *type_name(int type)
{
    return rdma_event_str((enum rdma_cm_event_type)type) + strlen("RDMA_CM_EVENT_");
}

/* Fetches the next event of type `want` on `ch` and remembers what the API said of it. */
static cmsafe_event *take(struct rdma_event_channel *ch, enum rdma_cm_event_type want)
{
    cmsafe_event *ev = cm_expect_within(ch, want, 5000);
    REQUIRE(n_fetched < MAX, "too many events");
    struct rec *r = &fetched[n_fetched++];
    r->seq = cmsafe_event_seq(ev);
    snprintf(r->type, sizeof r->type, "%s", type_name(cmsafe_event_type(ev)));
    r->status = cmsafe_event_status(ev);
    snprintf(r->id, sizeof r->id, "%p", (void *)cmsafe_event_id(ev));
    if (cmsafe_event_listen_id(ev))
        snprintf(r->listen_id, sizeof r->listen_id, "%p", (void *)cmsafe_event_listen_id(ev));
    else
        snprintf(r->listen_id, sizeof r->listen_id, "null");
    r->fetch_ns = cmsafe_event_time_ns(ev);
    return ev;
}

/* A number field of a dump line; UINT64_MAX for null; REQUIREd present. */
static uint64_t num(const char *line, const char *key)
{
    char k[48];
    snprintf(k, sizeof k, "\"%s\":", key);
    const char *p = strstr(line, k);
    REQUIRE(p, "no %s in %s", key, line);
    p += strlen(k);
    if (strncmp(p, "null", 4) == 0)
        return UINT64_MAX;
    return strtoull(p, NULL, 10);
}

/* A string field (or "null"). */
static void str(const char *line, const char *key, char *out, size_t len)
{
    char k[48];
    snprintf(k, sizeof k, "\"%s\":", key);
    const char *p = strstr(line, k);
    REQUIRE(p, "no %s in %s", key, line);
    p += strlen(k);
    if (strncmp(p, "null", 4) == 0) {
        snprintf(out, len, "null");
        return;
    }
    REQUIRE(*p == '"', "%s is no string in %s", key, line);
    const char *end = strchr(p + 1, '"');
    REQUIRE(end, "unterminated %s", key);
    snprintf(out, len, "%.*s", (int)(end - p - 1), p + 1);
}

/* Dumps to a fresh file and parses it: returns the number of lines, checks it against the
 * call's return value. */
static int dump(struct rec *out, int max)
{
    FILE *f = tmpfile();
    REQUIRE(f, "tmpfile: %s", strerror(errno));
    int n = cmsafe_flight_dump(fileno(f));
    REQUIRE(n >= 0, "cmsafe_flight_dump: %s", strerror(errno));
    rewind(f);
    char line[1024];
    int lines = 0;
    while (fgets(line, sizeof line, f)) {
        REQUIRE(strncmp(line, "{\"record\":\"flight\",", 19) == 0, "not a flight record: %s", line);
        REQUIRE(lines < max, "more lines than room");
        struct rec *r = &out[lines++];
        r->seq = num(line, "seq");
        str(line, "type", r->type, sizeof r->type);
        r->status = (int)(int64_t)num(line, "status");
        str(line, "id", r->id, sizeof r->id);
        str(line, "listen_id", r->listen_id, sizeof r->listen_id);
        r->fetch_ns = num(line, "fetch_ns");
        r->ack_ns = num(line, "ack_ns");
        r->release_ns = num(line, "release_ns");
    }
    fclose(f);
    CHECK_EQ_INT(lines, n);
    return lines;
}

static void same(const struct rec *got, const struct rec *want)
{
    CHECK(got->seq == want->seq, "seq %" PRIu64 ", want %" PRIu64, got->seq, want->seq);
    CHECK(strcmp(got->type, want->type) == 0, "seq %" PRIu64 ": type %s, want %s", want->seq,
          got->type, want->type);
    CHECK_EQ_INT(got->status, want->status);
    CHECK(strcmp(got->id, want->id) == 0, "seq %" PRIu64 ": id %s, want %s", want->seq, got->id,
          want->id);
    CHECK(strcmp(got->listen_id, want->listen_id) == 0, "seq %" PRIu64 ": listen_id %s, want %s",
          want->seq, got->listen_id, want->listen_id);
    CHECK(got->fetch_ns == want->fetch_ns, "seq %" PRIu64 ": fetch_ns %" PRIu64 ", want %" PRIu64,
          want->seq, got->fetch_ns, want->fetch_ns);
    CHECK(got->ack_ns == got->fetch_ns, "seq %" PRIu64 ": acked at its fetch", want->seq);
}

/* `n` ADDR_RESOLVED events of fresh ids on `ch` (their ids destroyed after). */
static void resolve_n(struct rdma_event_channel *ch, int n)
{
    struct sockaddr_in dst = rxe_addr(PORT);
    for (int i = 0; i < n; i++) {
        struct rdma_cm_id *id = NULL;
        REQUIRE(rdma_create_id(ch, &id, NULL, RDMA_PS_TCP) == 0, "rdma_create_id");
        REQUIRE(rdma_resolve_addr(id, NULL, (struct sockaddr *)&dst, 2000) == 0,
                "rdma_resolve_addr: %s", strerror(errno));
        cmsafe_event *ev = take(ch, RDMA_CM_EVENT_ADDR_RESOLVED);
        cmsafe_event_release(ev);
        CHECK(rdma_destroy_id(id) == 0, "rdma_destroy_id");
    }
}

/* Child parts, run by main with argv[1]: "exit" fetches 3 events and exits (its environment
 * asks for a dump of 2 at exit); "abort" fetches one and releases it twice. Each prints its
 * seqs on stdout, one a line. */
static int child(const char *part)
{
    struct rdma_event_channel *ch = rdma_create_event_channel();
    if (!ch)
        return 3;
    int n = strcmp(part, "exit") == 0 ? 3 : 1;
    resolve_n(ch, n);
    for (int i = 0; i < n_fetched; i++)
        printf("%" PRIu64 "\n", fetched[i].seq);
    fflush(stdout);
    if (strcmp(part, "abort") == 0) {
        /* Fetched again, to hold a handle to release twice: the second release aborts. */
        struct rdma_cm_id *id = NULL;
        struct sockaddr_in dst = rxe_addr(PORT);
        if (rdma_create_id(ch, &id, NULL, RDMA_PS_TCP) || rdma_resolve_addr(id, NULL, (struct sockaddr *)&dst, 2000))
            return 4;
        cmsafe_event *ev = NULL;
        if (cmsafe_get_event(ch, &ev) != 0)
            return 5;
        printf("%" PRIu64 "\n", cmsafe_event_seq(ev));
        fflush(stdout);
        cmsafe_event_release(ev);
        cmsafe_event_release(ev);
        return 6; /* not reached: the second release aborts */
    }
    rdma_destroy_event_channel(ch);
    return harness_failed ? 1 : 0;
}

/* Runs this program's `part` with `env` added; returns its wait status, its stdout's seqs in
 * `seqs` (their count in *n). */
static int run_child(const char *self, const char *part, char *const env[], uint64_t *seqs, int *n)
{
    int p[2];
    REQUIRE(pipe(p) == 0, "pipe");
    pid_t pid = fork();
    REQUIRE(pid >= 0, "fork");
    if (pid == 0) {
        for (int i = 0; env[i]; i++)
            putenv(env[i]);
        dup2(p[1], 1);
        close(p[0]);
        execl(self, self, part, (char *)NULL);
        _exit(127);
    }
    close(p[1]);
    FILE *f = fdopen(p[0], "r");
    *n = 0;
    unsigned long long s;
    while (*n < 8 && fscanf(f, "%llu", &s) == 1)
        seqs[(*n)++] = s;
    fclose(f);
    int status = 0;
    waitpid(pid, &status, 0);
    return status;
}

int main(int argc, char **argv)
{
    if (argc > 1)
        return child(argv[1]);
    harness_watchdog(60);
    struct rec got[MAX];

    STEP("the default size, and the errors");
    errno = 0;
    CHECK(cmsafe_flight_dump(-1) == -1 && errno == EBADF, "dump(-1): EBADF (errno %d)", errno);
    errno = 0;
    CHECK(cmsafe_flight_set_size(CMSAFE_FLIGHT_MAX_EVENTS + 1) == -1 && errno == EINVAL,
          "set_size(max + 1): EINVAL (errno %d)", errno);
    CHECK_EQ_INT(cmsafe_flight_set_size(MAX), 0);
    CHECK_EQ_INT(dump(got, MAX), 0);

    STEP("a loopback connection and its teardown");
    struct rdma_event_channel *sch = rdma_create_event_channel();
    struct rdma_event_channel *cch = rdma_create_event_channel();
    REQUIRE(sch && cch, "rdma_create_event_channel: %s", strerror(errno));
    struct rdma_cm_id *listen_id = cm_listen(sch, PORT);
    struct rdma_cm_id *client = NULL;
    struct sockaddr_in dst = rxe_addr(PORT);
    REQUIRE(rdma_create_id(cch, &client, NULL, RDMA_PS_TCP) == 0, "rdma_create_id");
    REQUIRE(rdma_resolve_addr(client, NULL, (struct sockaddr *)&dst, 2000) == 0,
            "rdma_resolve_addr: %s", strerror(errno));
    cmsafe_event_release(take(cch, RDMA_CM_EVENT_ADDR_RESOLVED));
    REQUIRE(rdma_resolve_route(client, 2000) == 0, "rdma_resolve_route: %s", strerror(errno));
    cmsafe_event_release(take(cch, RDMA_CM_EVENT_ROUTE_RESOLVED));
    rxe_create_qp(client);
    cm_connect(client, "flight", 6);
    cmsafe_event *req = take(sch, RDMA_CM_EVENT_CONNECT_REQUEST);
    struct rdma_cm_id *child_id = cmsafe_event_id(req);
    rxe_create_qp(child_id);
    cm_accept(child_id, NULL, 0);
    cmsafe_event_release(req);
    cmsafe_event_release(take(cch, RDMA_CM_EVENT_ESTABLISHED));
    /* Held across the first dump: recorded, not released. */
    cmsafe_event *held = take(sch, RDMA_CM_EVENT_ESTABLISHED);
    int held_at = n_fetched - 1;
    /* The client's DREQ reaches the server first; the server's own rdma_disconnect answers it
     * with the DREP that completes the client's disconnect. */
    REQUIRE(rdma_disconnect(client) == 0, "rdma_disconnect: %s", strerror(errno));
    cmsafe_event_release(take(sch, RDMA_CM_EVENT_DISCONNECTED));
    REQUIRE(rdma_disconnect(child_id) == 0, "rdma_disconnect(child): %s", strerror(errno));
    cmsafe_event_release(take(cch, RDMA_CM_EVENT_DISCONNECTED));
    uint64_t before_dump = cm_now_ns();

    STEP("the dump: every event in fetch order, as the API handed it out");
    int n = dump(got, MAX);
    CHECK_EQ_INT(n, n_fetched);
    CHECK_EQ_INT(n_fetched, 7);
    for (int i = 0; i < n && i < n_fetched; i++) {
        same(&got[i], &fetched[i]);
        if (i == held_at) {
            CHECK(got[i].release_ns == UINT64_MAX, "the held ESTABLISHED has no release time");
        } else {
            CHECK(got[i].release_ns != UINT64_MAX && got[i].release_ns >= got[i].ack_ns &&
                      got[i].release_ns <= before_dump,
                  "seq %" PRIu64 ": release_ns %" PRIu64 " between its ack %" PRIu64
                  " and the dump %" PRIu64,
                  got[i].seq, got[i].release_ns, got[i].ack_ns, before_dump);
        }
        if (i > 0)
            CHECK(got[i].seq > got[i - 1].seq, "seqs increase");
    }
    /* The CONNECT_REQUEST names its listen id, the new id is the ESTABLISHED's. */
    CHECK(strcmp(got[2].type, "CONNECT_REQUEST") == 0, "third: CONNECT_REQUEST");
    char lid[32];
    snprintf(lid, sizeof lid, "%p", (void *)listen_id);
    CHECK(strcmp(got[2].listen_id, lid) == 0, "listen id %s, want %s", got[2].listen_id, lid);
    CHECK(strcmp(got[4].id, got[2].id) == 0, "the server's ESTABLISHED is the new id's");
    cmsafe_event_release(held);
    n = dump(got, MAX);
    CHECK(n == 7 && got[held_at].release_ns != UINT64_MAX &&
              got[held_at].release_ns >= before_dump,
          "released since: stamped after the first dump");
    rdma_destroy_qp(client);
    rdma_destroy_qp(child_id);
    CHECK(rdma_destroy_id(client) == 0, "rdma_destroy_id(client)");
    CHECK(rdma_destroy_id(child_id) == 0, "rdma_destroy_id(child)");
    CHECK(rdma_destroy_id(listen_id) == 0, "rdma_destroy_id(listen)");

    STEP("a ring of 3 wraps: a new size starts empty, keeps the last 3 of 5");
    CHECK_EQ_INT(cmsafe_flight_set_size(3), 0);
    CHECK_EQ_INT(dump(got, MAX), 0);
    int first = n_fetched;
    resolve_n(cch, 5);
    n = dump(got, MAX);
    CHECK_EQ_INT(n, 3);
    for (int i = 0; i < n && i < 3; i++)
        same(&got[i], &fetched[first + 2 + i]);

    STEP("off: nothing recorded, nothing dumped");
    CHECK_EQ_INT(cmsafe_flight_set_size(0), 0);
    resolve_n(cch, 1);
    CHECK_EQ_INT(cmsafe_flight_dump(1), 0);

    STEP("a dump to a pipe whose reader is gone: EPIPE");
    CHECK_EQ_INT(cmsafe_flight_set_size(8), 0);
    resolve_n(cch, 1);
    int p[2];
    REQUIRE(pipe(p) == 0, "pipe");
    close(p[0]);
    signal(SIGPIPE, SIG_IGN);
    errno = 0;
    CHECK(cmsafe_flight_dump(p[1]) == -1 && errno == EPIPE, "EPIPE (errno %d)", errno);
    close(p[1]);

    STEP("at exit: CMSAFE_FLIGHT_EVENTS=2, CMSAFE_FLIGHT_DUMP");
    /* Names that do not exist yet, in a directory of the test's own: the dump is always a new
     * file (at a name that exists it goes beside it, as NAME.pid). */
    char dir[] = "/tmp/cmsafe-flight-XXXXXX";
    REQUIRE(mkdtemp(dir), "mkdtemp: %s", strerror(errno));
    char path[64], abort_path[64];
    snprintf(path, sizeof path, "%s/exit.json", dir);
    snprintf(abort_path, sizeof abort_path, "%s/abort.json", dir);
    char dump_env[96], abort_env[96];
    snprintf(dump_env, sizeof dump_env, "CMSAFE_FLIGHT_DUMP=%s", path);
    snprintf(abort_env, sizeof abort_env, "CMSAFE_FLIGHT_DUMP=%s", abort_path);
    char *env[] = {"CMSAFE_FLIGHT_EVENTS=2", dump_env, NULL};
    char *env_abort[] = {"CMSAFE_FLIGHT_EVENTS=2", abort_env, NULL};
    uint64_t seqs[8];
    int ns = 0;
    int status = run_child(argv[0], "exit", env, seqs, &ns);
    CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0, "child exit status %#x", status);
    CHECK_EQ_INT(ns, 3);
    FILE *f = fopen(path, "r");
    REQUIRE(f, "the dump at exit: %s", strerror(errno));
    char line[1024];
    int lines = 0;
    while (fgets(line, sizeof line, f)) {
        if (lines < 2 && ns == 3) {
            CHECK(num(line, "seq") == seqs[1 + lines], "line %d: seq %" PRIu64 ", want %" PRIu64,
                  lines, num(line, "seq"), seqs[1 + lines]);
            CHECK(strstr(line, "\"type\":\"ADDR_RESOLVED\""), "ADDR_RESOLVED: %s", line);
            CHECK(num(line, "release_ns") != UINT64_MAX, "released before exit");
        }
        lines++;
    }
    fclose(f);
    CHECK_EQ_INT(lines, 2);

    STEP("on a misuse's abort: the released event last");
    status = run_child(argv[0], "abort", env_abort, seqs, &ns);
    CHECK(WIFSIGNALED(status) && WTERMSIG(status) == SIGABRT, "child aborted (status %#x)", status);
    CHECK_EQ_INT(ns, 2);
    f = fopen(abort_path, "r");
    REQUIRE(f, "the dump on abort: %s", strerror(errno));
    lines = 0;
    while (fgets(line, sizeof line, f)) {
        if (lines < 2 && ns == 2)
            CHECK(num(line, "seq") == seqs[lines], "line %d: seq %" PRIu64 ", want %" PRIu64, lines,
                  num(line, "seq"), seqs[lines]);
        lines++;
    }
    fclose(f);
    CHECK_EQ_INT(lines, 2);
    unlink(path);
    unlink(abort_path);
    rmdir(dir);

    rdma_destroy_event_channel(sch);
    rdma_destroy_event_channel(cch);
    return harness_exit();
}
