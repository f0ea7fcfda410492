/* seal_cost: what one of audit mode's seals costs on this machine. At the program's ack, audit
 * mode makes the page holding the event's copy inaccessible (one mprotect(PROT_NONE) of one
 * page, preload/src/audit/pages.rs), so a later read faults; that call is audit's one system
 * call per event (bench/results/syscalls.md). Its time is the kernel's page-table change and TLB flush,
 * and, when another thread of the process is running on another CPU, the flush there too
 * (an inter-processor interrupt): the part that an emulated or virtual CPU makes expensive.
 *
 * Each run seals PAGES distinct pages that were made writable in runs of 64 and written first,
 * as audit's are, and times the seals alone (CLOCK_MONOTONIC around the loop):
 *   alone     the process's only thread
 *   spinning  with a second thread spinning on sched_yield(2), as cmtime's main thread does
 *             while it waits for its event thread
 *   sleeping  with a second thread asleep (a CPU that last ran the process but is idle)
 * Prints "seal MODE NS" (nanoseconds per seal, the median of ROUNDS runs) for each.
 *
 *   seal_cost [ROUNDS] [PAGES]     (defaults 9 and 1024)
 */
#define _GNU_SOURCE
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

enum { OPEN_RUN = 64, MAX_ROUNDS = 101 };

static atomic_int stop;

static void *spin(void *arg)
{
    (void)arg;
    while (!atomic_load(&stop))
        sched_yield();
    return NULL;
}

static void *sleep_until_stopped(void *arg)
{
    (void)arg;
    while (!atomic_load(&stop))
        usleep(1000);
    return NULL;
}

static double now_ns(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec * 1e9 + t.tv_nsec;
}

static void die(const char *what)
{
    perror(what);
    exit(1);
}

/* Nanoseconds per seal over `pages` pages of `area`, opened in runs and written first. */
static double seal_run(char *area, long page, int pages)
{
    for (int i = 0; i < pages; i += OPEN_RUN) {
        int n = pages - i < OPEN_RUN ? pages - i : OPEN_RUN;
        if (mprotect(area + i * page, n * page, PROT_READ | PROT_WRITE) != 0)
            die("mprotect open");
        for (int j = 0; j < n; j++)
            area[(i + j) * page] = (char)j;
    }
    double t0 = now_ns();
    for (int i = 0; i < pages; i++)
        if (mprotect(area + i * page, page, PROT_NONE) != 0)
            die("mprotect seal");
    return (now_ns() - t0) / pages;
}

static int by_value(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static double median_of_runs(char *area, long page, int pages, int rounds)
{
    double ns[MAX_ROUNDS];
    seal_run(area, page, pages); /* warm-up: the page tables exist, the code is translated */
    for (int r = 0; r < rounds; r++)
        ns[r] = seal_run(area, page, pages);
    qsort(ns, rounds, sizeof ns[0], by_value);
    return ns[rounds / 2];
}

int main(int argc, char **argv)
{
    int rounds = argc > 1 ? atoi(argv[1]) : 9;
    int pages = argc > 2 ? atoi(argv[2]) : 1024;
    if (rounds < 1 || rounds > MAX_ROUNDS || pages < 1) {
        fprintf(stderr, "usage: seal_cost [ROUNDS 1-%d] [PAGES]\n", MAX_ROUNDS);
        return 2;
    }
    long page = sysconf(_SC_PAGESIZE);
    char *area = mmap(NULL, (size_t)pages * page, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (area == MAP_FAILED)
        die("mmap");

    printf("seal alone %.0f\n", median_of_runs(area, page, pages, rounds));
    void *(*second[])(void *) = {spin, sleep_until_stopped};
    const char *name[] = {"spinning", "sleeping"};
    for (int k = 0; k < 2; k++) {
        pthread_t t;
        atomic_store(&stop, 0);
        if (pthread_create(&t, NULL, second[k], NULL) != 0)
            die("pthread_create");
        usleep(50000); /* the second thread has run, on the other CPU if there is one */
        printf("seal %s %.0f\n", name[k], median_of_runs(area, page, pages, rounds));
        atomic_store(&stop, 1);
        pthread_join(t, NULL);
    }
    return 0;
}
