/* fuzz_options.c: libFuzzer target for the malloc debug option parser (options.c).
 *
 * The input, NUL-terminated, is parsed as LIBC_DEBUG_MALLOC_OPTIONS. Log lines go to a sink
 * that discards them after checking that each one is a bounded, NUL-terminated line. Beyond
 * the sanitizers, it traps when the parser breaks its contract: a success must log nothing
 * and leave a consistent config; a failure must log exactly the error and the two usage
 * lines.
 */
#include "log.h"
#include "options.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

static int g_lines;

static void discard_sink(const char *line, size_t len, void *ctx)
{
    (void)ctx;
    if (len == 0 || len >= HS_LOG_LINE_MAX || line[len] != '\0' || strnlen(line, len + 1) != len ||
        line[len - 1] != '\n')
        __builtin_trap();
    g_lines++;
}

static int str_bounded(const char *s, size_t cap)
{
    return memchr(s, '\0', cap) != NULL;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static int initialized;
    if (!initialized) {
        hs_log_set_sink(discard_sink, NULL);
        initialized = 1;
    }

    char *opts = malloc(size + 1);
    if (opts == NULL)
        return 0;
    memcpy(opts, data, size);
    opts[size] = '\0';

    static struct hs_md_config cfg;
    g_lines = 0;
    int ok = hs_md_config_parse(&cfg, opts);
    if (ok) {
        if (g_lines != 0)
            __builtin_trap();
        if (cfg.front_guard_bytes % 16 != 0 || cfg.front_guard_bytes > 16384 ||
            cfg.rear_guard_bytes > 16384 || cfg.backtrace_frames > 256 ||
            cfg.free_track_backtrace_num_frames > 256 || cfg.expand_alloc_bytes > 16384 ||
            cfg.free_track_allocations > 16384 || cfg.record_allocs_num_entries > 50000000)
            __builtin_trap();
        if (!str_bounded(cfg.backtrace_dump_prefix, sizeof(cfg.backtrace_dump_prefix)) ||
            !str_bounded(cfg.record_allocs_file, sizeof(cfg.record_allocs_file)))
            __builtin_trap();
        if ((cfg.options & HS_OPT_FREE_TRACK) && !(cfg.options & HS_OPT_FILL_ON_FREE))
            __builtin_trap();
    } else if (g_lines != 3) {
        __builtin_trap();
    }
    free(opts);
    return 0;
}
