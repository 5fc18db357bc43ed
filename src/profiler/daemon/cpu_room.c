/* cpu_room.c: the room the CPUs had for a thread over a stretch of time (see cpu_room.h). */
#define _GNU_SOURCE
#include "cpu_room.h"

#include "clock.h"
#include "hs_assert.h"

#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

/* A "cpuN" line is at most 11 numbers of 20 digits: this much per CPU leaves room, and the
 * lines come first in the file (a truncated read loses only the later lines). */
#define LINE_MAX_BYTES 256

bool hs_cpu_room_parse(const char *text, const cpu_set_t *cpus, uint64_t *idle_ticks)
{
    uint64_t sum = 0;
    bool found = false;
    for (const char *line = text; *line != '\0';) {
        const char *eol = strchr(line, '\n');
        if (eol == NULL)
            break; /* an incomplete last line (the read was cut short): not counted */
        if (strncmp(line, "cpu", 3) == 0 && line[3] >= '0' && line[3] <= '9') {
            char *end;
            unsigned long cpu = strtoul(line + 3, &end, 10);
            uint64_t v[5];
            int n = 0;
            for (const char *p = end; n < 5 && p < eol; n++) {
                v[n] = strtoull(p, &end, 10);
                if (end == p || end > eol)
                    break;
                p = end;
            }
            if (n == 5 && cpu < CPU_SETSIZE && CPU_ISSET((int)cpu, cpus)) {
                sum += v[3] + v[4]; /* idle, iowait */
                found = true;
            }
        }
        line = eol + 1;
    }
    *idle_ticks = sum;
    return found;
}

/* The counted CPUs' idle ticks now; false when /proc/stat could not be read or parsed. */
static bool read_idle(struct hs_cpu_room *r, uint64_t *idle)
{
    size_t len = 0;
    while (len + 1 < r->text_cap) {
        ssize_t n = pread(r->fd, r->text + len, r->text_cap - 1 - len, (off_t)len);
        if (n <= 0)
            break;
        len += (size_t)n;
    }
    r->text[len] = '\0';
    return hs_cpu_room_parse(r->text, &r->cpus, idle);
}

bool hs_cpu_room_open(struct hs_cpu_room *r)
{
    memset(r, 0, sizeof(*r));
    r->fd = -1;
    if (sched_getaffinity(0, sizeof(r->cpus), &r->cpus) != 0)
        CPU_ZERO(&r->cpus);
    if (CPU_COUNT(&r->cpus) == 0)
        for (int i = 0; i < CPU_SETSIZE; i++)
            CPU_SET(i, &r->cpus);
    long ticks = sysconf(_SC_CLK_TCK);
    long cpus = sysconf(_SC_NPROCESSORS_CONF);
    r->tick_ns = 1e9 / (double)(ticks > 0 ? ticks : 100);
    r->text_cap =
        (size_t)(cpus > 0 && cpus < CPU_SETSIZE ? cpus + 1 : CPU_SETSIZE) * LINE_MAX_BYTES;
    r->text = malloc(r->text_cap);
    r->fd = r->text ? open("/proc/stat", O_RDONLY | O_CLOEXEC) : -1;
    uint64_t idle;
    if (r->fd < 0 || !read_idle(r, &idle)) {
        hs_cpu_room_close(r);
        return false;
    }
    return true;
}

void hs_cpu_room_close(struct hs_cpu_room *r)
{
    if (r->fd >= 0)
        close(r->fd);
    free(r->text);
    r->fd = -1;
    r->text = NULL;
    r->text_cap = 0;
}

void hs_cpu_room_restart(struct hs_cpu_room *r)
{
    r->start_ns = hs_monotonic_ns();
    r->start_own_ns = hs_clock_ns(CLOCK_THREAD_CPUTIME_ID);
    if (r->fd >= 0 && !read_idle(r, &r->start_idle))
        r->start_idle = 0;
}

uint64_t hs_cpu_room_elapsed_ns(const struct hs_cpu_room *r)
{
    return r->start_ns == 0 ? UINT64_MAX : hs_monotonic_ns() - r->start_ns;
}

double hs_cpu_room_take(struct hs_cpu_room *r)
{
    uint64_t start_ns = r->start_ns, start_idle = r->start_idle, start_own = r->start_own_ns;
    hs_cpu_room_restart(r);
    if (r->fd < 0)
        return HS_CPU_ROOM_UNKNOWN;
    hs_assert(start_ns != 0); /* a stretch was started */
    uint64_t elapsed = r->start_ns - start_ns;
    if (elapsed == 0 || r->start_idle < start_idle)
        return HS_CPU_ROOM_UNKNOWN; /* no time passed, or a CPU went offline */
    double idle_ns = (double)(r->start_idle - start_idle) * r->tick_ns;
    double own_ns = (double)(r->start_own_ns - start_own);
    return (idle_ns + own_ns) / (double)elapsed;
}
