/* A program that never touches librdmacm (it is linked with it, as the test helpers are, but
 * calls none of it): under the preload it must behave exactly as without it and the preload must
 * print nothing and write no report. Runs a thread and some heap work, prints one fixed line on
 * stdout, exit 0, nothing on stderr. */
#define _GNU_SOURCE
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void *work(void *arg)
{
    size_t n = *(size_t *)arg;
    char *buf = malloc(n);
    if (!buf)
        return NULL;
    memset(buf, 'x', n);
    size_t sum = 0;
    for (size_t i = 0; i < n; i++)
        sum += (unsigned char)buf[i];
    free(buf);
    *(size_t *)arg = sum;
    return NULL;
}

int main(void)
{
    size_t n = 4096;
    pthread_t t;
    if (pthread_create(&t, NULL, work, &n) != 0 || pthread_join(t, NULL) != 0)
        return 1;
    printf("preload_no_rdma: a plain program, %zu\n", n);
    return n == 4096u * 'x' ? 0 : 1;
}
