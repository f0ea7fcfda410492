/* Cost per event and per id life as live cm_ids grow, on the stand-in librdmacm: N ids are held
 * live beside a loop of M id lives and M plain events (scripts/scale-host counts the loop's
 * instructions under callgrind, tests/host/test_scale.py holds them flat). Linked against
 * libcmsafe too, for its API.
 *
 *   scale FETCH N M WARM HOLD CHANNELS
 *
 * FETCH: "raw" (rdma_get_cm_event + rdma_ack_cm_event; the preload's modes run it under
 * LD_PRELOAD) or "api" (cmsafe_get_event + cmsafe_event_release).
 * N: ids held live, each with one ADDR_RESOLVED got, as a resolved id has: acked when HOLD is
 * "acked", held unacked to the end when it is "held".
 * CHANNELS: the held ids are spread over this many event channels, round robin; the loop runs on
 * the first.
 * First WARM iterations of the loop (the preload's quarantine, safe mode's kept copies and every
 * table filled to its steady state), then the N ids, then the loop's M iterations, measured:
 * - measure_lives: M id lives, each rdma_create_id, an ADDR_RESOLVED queued, got and acked,
 *   rdma_destroy_id (scale_life);
 * - measure_events: M ROUTE_RESOLVED events of one id that lives throughout, got and acked
 *   (scale_event).
 * callgrind counts inside each measure_ function only (--toggle-collect, and --dump-before of
 * measure_events to tell the two apart). Then every held event is acked and every id and
 * channel destroyed.
 *
 * Prints, on stdout:
 *   rss before=KB ids=KB end=KB
 *   anon before=KB ids=KB end=KB
 *   done N M
 * VmRSS and RssAnon (/proc/self/status) after the warm-up, after the N ids were made, and after
 * the loop: the memory the N ids hold is ids - before. */
#include <cmsafe.h>

#include "host.h"

struct held {
    struct rdma_cm_id *id;
    struct rdma_cm_event *event; /* FETCH raw, HOLD held */
    cmsafe_event *copy; /* FETCH api, HOLD held */
};

static int api;

/* One event got (it must be of TYPE): a cmsafe_event for the API, else the raw event. */
static void get(struct rdma_event_channel *ch, enum rdma_cm_event_type type,
                struct rdma_cm_event **event, cmsafe_event **copy)
{
    if (api) {
        REQUIRE(cmsafe_get_event(ch, copy) == 0, "cmsafe_get_event");
        REQUIRE(cmsafe_event_type(*copy) == (int)type, "want %s", rdma_event_str(type));
    } else {
        *event = host_get(ch, type);
    }
}

static void release(struct rdma_cm_event *event, cmsafe_event *copy)
{
    if (api)
        cmsafe_event_release(copy);
    else
        host_ack(event);
}

static void round_trip(struct rdma_cm_id *id, enum rdma_cm_event_type type)
{
    struct rdma_cm_event *event = NULL;
    cmsafe_event *copy = NULL;
    host_queue(id, type, NULL);
    get(id->channel, type, &event, &copy);
    release(event, copy);
}

/* Neither inlined nor cloned under another name: callgrind finds each by its name. */
__attribute__((noinline, noclone)) static void scale_life(struct rdma_event_channel *ch)
{
    struct rdma_cm_id *id = host_id(ch);
    round_trip(id, RDMA_CM_EVENT_ADDR_RESOLVED);
    REQUIRE(rdma_destroy_id(id) == 0, "rdma_destroy_id");
}

__attribute__((noinline, noclone)) static void scale_event(struct rdma_cm_id *id)
{
    round_trip(id, RDMA_CM_EVENT_ROUTE_RESOLVED);
}

__attribute__((noinline, noclone)) static void measure_lives(struct rdma_event_channel *ch, long m)
{
    for (long i = 0; i < m; i++)
        scale_life(ch);
}

__attribute__((noinline, noclone)) static void measure_events(struct rdma_cm_id *id, long m)
{
    for (long i = 0; i < m; i++)
        scale_event(id);
}

/* The loop measured: callgrind collects inside this call only (--toggle-collect=measure), and
 * its profile gives each of the two calls' instructions. */
__attribute__((noinline, noclone)) static void measure(struct rdma_event_channel *ch,
                                                       struct rdma_cm_id *steady, long m)
{
    measure_lives(ch, m);
    measure_events(steady, m);
}

/* The value of LINE ("VmRSS:", "RssAnon:") in /proc/self/status, in kB. */
static long status_kb(const char *line)
{
    FILE *f = fopen("/proc/self/status", "r");
    REQUIRE(f, "fopen /proc/self/status");
    char buf[256];
    long kb = -1;
    size_t n = strlen(line);
    while (fgets(buf, sizeof buf, f)) {
        if (strncmp(buf, line, n) == 0) {
            kb = strtol(buf + n, NULL, 10);
            break;
        }
    }
    fclose(f);
    REQUIRE(kb >= 0, "%s in /proc/self/status", line);
    return kb;
}

static long number(const char *s, long min)
{
    char *end;
    errno = 0;
    long v = strtol(s, &end, 10);
    REQUIRE(!errno && *s && !*end && v >= min, "%s is not a whole number of at least %ld", s, min);
    return v;
}

int main(int argc, char **argv)
{
    host_start();
    if (argc != 7 || (strcmp(argv[1], "raw") && strcmp(argv[1], "api")) ||
        (strcmp(argv[5], "acked") && strcmp(argv[5], "held"))) {
        printf("usage: scale raw|api N M WARM acked|held CHANNELS\n");
        return 2;
    }
    api = strcmp(argv[1], "api") == 0;
    long n = number(argv[2], 0), m = number(argv[3], 0), warm = number(argv[4], 0);
    long channels = number(argv[6], 1);
    int hold = strcmp(argv[5], "held") == 0;

    struct rdma_event_channel **ch = calloc((size_t)channels, sizeof *ch);
    struct held *held = calloc((size_t)n + 1, sizeof *held);
    REQUIRE(ch && held, "calloc");
    for (long c = 0; c < channels; c++)
        ch[c] = host_channel();
    struct rdma_cm_id *steady = host_id(ch[0]);
    for (long i = 0; i < warm; i++) {
        scale_life(ch[0]);
        scale_event(steady);
    }

    long rss0 = status_kb("VmRSS:"), anon0 = status_kb("RssAnon:");
    for (long i = 0; i < n; i++) {
        struct held *h = &held[i];
        h->id = host_id(ch[i % channels]);
        host_queue(h->id, RDMA_CM_EVENT_ADDR_RESOLVED, NULL);
        get(h->id->channel, RDMA_CM_EVENT_ADDR_RESOLVED, &h->event, &h->copy);
        if (!hold) {
            release(h->event, h->copy);
            h->event = NULL, h->copy = NULL;
        }
    }
    long rss1 = status_kb("VmRSS:"), anon1 = status_kb("RssAnon:");

    measure(ch[0], steady, m);
    long rss2 = status_kb("VmRSS:"), anon2 = status_kb("RssAnon:");

    for (long i = 0; i < n; i++) {
        if (held[i].event || held[i].copy)
            release(held[i].event, held[i].copy);
        REQUIRE(rdma_destroy_id(held[i].id) == 0, "rdma_destroy_id");
    }
    REQUIRE(rdma_destroy_id(steady) == 0, "rdma_destroy_id");
    for (long c = 0; c < channels; c++)
        rdma_destroy_event_channel(ch[c]);
    printf("rss before=%ld ids=%ld end=%ld\n", rss0, rss1, rss2);
    printf("anon before=%ld ids=%ld end=%ld\n", anon0, anon1, anon2);
    printf("done %ld %ld\n", n, m);
    free(held);
    free(ch);
    return 0;
}
