/* session_options.c: the profiling session's option table (see session_options.h). */
#include "session_options.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

/* clang-format off */
const struct hs_sopt hs_sopts[HS_SOPT_COUNT] = {
    [HS_SOPT_INTERVAL] = {"--interval", 'i', "BYTES", 1, 1ull << 40, false, true,
        "average bytes between samples (default 4096; 1 records\n"
        "every allocation: exact totals)",
        "a number of bytes from 1 to 2^40"},
    [HS_SOPT_CONTINUOUS] = {"--continuous", 0, "MS", 10, 86400000, false, true,
        "also write a numbered profile every MS milliseconds",
        "milliseconds from 10 to 86400000"},
    [HS_SOPT_DUMP_AT_MAX] = {"--dump-at-max", 0, NULL, 0, 0, false, true,
        "also write PROGRAM.PID.max.pb.gz: what was in use when the\n"
        "sampled in-use bytes peaked", NULL},
    [HS_SOPT_ANDROID_DUMP] = {"--android-dump", 0, NULL, 0, 0, false, true,
        "also write Android native heap dump text (.txt)", NULL},
    [HS_SOPT_NO_BLOCK] = {"--no-block", 0, NULL, 0, 0, false, true,
        "drop samples rather than slow the program down when the\n"
        "daemon falls behind (the default waits, and raises the\n"
        "interval while the buffer is over half full)", NULL},
    [HS_SOPT_BLOCK_TIMEOUT] = {"--block-timeout", 0, "MS", 1, 3600000, false, false,
        "longest wait for room before a client gives up\n"
        "(default 30000)",
        "milliseconds from 1 to 3600000"},
    [HS_SOPT_NO_ADAPTIVE] = {"--no-adaptive", 0, NULL, 0, 0, false, false,
        "keep the interval fixed when the buffer fills", NULL},
    [HS_SOPT_MAX_INTERVAL] = {"--max-interval", 0, "BYTES", 1, 1ull << 40, false, false,
        "ceiling of the adaptive interval (default 1048576)",
        "a number of bytes from 1 to 2^40"},
    /* The ring buffer's sizes (ring_buffer.h): powers of two from a page to 256 MiB. */
    [HS_SOPT_BUFFER_SIZE] = {"--buffer-size", 0, "BYTES", 4096, 256u << 20, true, true,
        "shared buffer per process, a power of two\n"
        "(default 8388608)",
        "a power of two from 4096 to 268435456"},
    [HS_SOPT_MAX_STACK] = {"--max-stack", 0, "BYTES", 256, 8u << 20, false, true,
        "most bytes of stack copied per sample (default 65536)",
        "a number of bytes from 256 to 8388608"},
    [HS_SOPT_MAX_MEMORY] = {"--max-memory", 0, "MIB", 1, 1u << 30, false, false,
        "stop when the daemon's memory passes MIB", "MiB from 1"},
    [HS_SOPT_MAX_CPU] = {"--max-cpu", 0, "SECONDS", 1, 1u << 30, false, false,
        "stop when the daemon's CPU time passes SECONDS", "seconds from 1"},
    [HS_SOPT_MAX_RATE] = {"--max-rate", 0, "BYTES", 1024, 1ull << 40, false, false,
        "bound the data all processes send together, per second,\n"
        "by asking them for larger sampling intervals",
        "bytes per second, at least 1024"},
};
/* clang-format on */

static bool wanted(int id, bool for_profile)
{
    return !for_profile || hs_sopts[id].in_profile;
}

int hs_sopt_longopts(struct option *out, bool for_profile)
{
    int n = 0;
    for (int id = 0; id < HS_SOPT_COUNT; id++) {
        if (!wanted(id, for_profile))
            continue;
        const struct hs_sopt *o = &hs_sopts[id];
        out[n++] = (struct option){o->name + 2, o->arg ? required_argument : no_argument, NULL,
                                   o->short_name ? o->short_name : HS_SOPT_VAL + id};
    }
    return n;
}

const char *hs_sopt_shortopts(bool for_profile)
{
    static char spec[2][2 * HS_SOPT_COUNT + 1];
    char *s = spec[for_profile];
    if (s[0] == '\0') {
        size_t n = 0;
        for (int id = 0; id < HS_SOPT_COUNT; id++) {
            if (!wanted(id, for_profile) || !hs_sopts[id].short_name)
                continue;
            s[n++] = hs_sopts[id].short_name;
            if (hs_sopts[id].arg)
                s[n++] = ':';
        }
        s[n] = '\0';
    }
    return s;
}

int hs_sopt_of(int opt, bool for_profile)
{
    for (int id = 0; id < HS_SOPT_COUNT; id++)
        if (wanted(id, for_profile) &&
            (opt == HS_SOPT_VAL + id ||
             (hs_sopts[id].short_name && opt == hs_sopts[id].short_name)))
            return id;
    return -1;
}

bool hs_sopt_parse(int id, const char *value, uint64_t *out)
{
    const struct hs_sopt *o = &hs_sopts[id];
    char *end;
    errno = 0;
    unsigned long long v = strtoull(value, &end, 10);
    if (errno != 0 || end == value || *end != '\0' || value[0] == '-' || v < o->min || v > o->max ||
        (o->power_of_two && (v & (v - 1)) != 0))
        return false;
    *out = v;
    return true;
}

void hs_sopt_help(FILE *out, bool for_profile, int column)
{
    for (int id = 0; id < HS_SOPT_COUNT; id++) {
        if (!wanted(id, for_profile))
            continue;
        const struct hs_sopt *o = &hs_sopts[id];
        char head[64];
        int n = o->short_name ? snprintf(head, sizeof(head), "  -%c, %s", o->short_name, o->name)
                              : snprintf(head, sizeof(head), "      %s", o->name);
        if (o->arg)
            n += snprintf(head + n, sizeof(head) - (size_t)n, " %s", o->arg);
        /* The text on the same line when the head leaves a space before the column. */
        fputs(head, out);
        int at = n;
        if (at + 1 > column) {
            fputc('\n', out);
            at = 0;
        }
        for (const char *line = o->help; *line;) {
            const char *nl = strchr(line, '\n');
            size_t len = nl ? (size_t)(nl - line) : strlen(line);
            fprintf(out, "%*s%.*s\n", column - at, "", (int)len, line);
            at = 0;
            line += len + (nl != NULL);
        }
    }
}
