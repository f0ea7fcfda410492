/* A stand-in for libcmsafe_preload.so in cmsafe-audit's tests (tests/audit): preloaded as the
 * real one is, it writes, as each process exits normally, the one event record the preload
 * would write for a process that got one event, into CMSAFE_REPORT (%p: the pid), created as
 * the preload creates it: new, or NAME.<pid> when NAME exists. Its cm_id and thread are the
 * pid, so a test can tell whose report a record came from. It touches no signal: what the program's signal state is, the launcher
 * made it. */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

__attribute__((destructor)) static void write_report(void)
{
    const char *template = getenv("CMSAFE_REPORT");
    char path[4096];
    size_t n = 0;
    int fd;

    if (template == NULL)
        return;
    for (const char *p = template; *p != '\0' && n + 24 < sizeof path; p++) {
        if (p[0] == '%' && p[1] == 'p') {
            n += (size_t)snprintf(path + n, sizeof path - n, "%ld", (long)getpid());
            p++;
        } else {
            path[n++] = *p;
        }
    }
    path[n] = '\0';
    fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
    if (fd < 0 && errno == EEXIST && n + 24 < sizeof path) {
        snprintf(path + n, sizeof path - n, ".%ld", (long)getpid());
        fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
    }
    if (fd < 0)
        return;
    dprintf(fd,
            "{\"record\":\"event\",\"seq\":1,\"type\":\"ESTABLISHED\",\"status\":0,"
            "\"id\":\"0x%lx\",\"listen_id\":null,\"thread\":%ld,\"get_ns\":1000,"
            "\"ack_ns\":2000,\"private_data_len\":0,\"internal\":false}\n",
            (unsigned long)getpid(), (long)getpid());
    close(fd);
}
