/* suppress.c: see suppress.h. */
#include "suppress.h"

#include "arena.h"
#include "backtrace.h"
#include "debug_state.h"
#include "errno_text.h"
#include "format.h"
#include "frame_line.h"
#include "log.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* Rule files are small; a larger one is refused rather than half read. */
#define MAX_FILE (1024 * 1024)

static struct hs_supp_set g_set;
static bool g_have[2];

static void *arena_alloc(size_t size, void *ctx)
{
    (void)ctx;
    return hs_arena_alloc(&hs_md_arena, size ? size : 1);
}

void hs_md_suppressions_load(void)
{
    const char *path = hs_md.cfg.suppressions;
    if (!path[0])
        return;
    const char *prog = hs_log_program_name();
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    struct stat st;
    if (fd < 0 || fstat(fd, &st) != 0 || !S_ISREG(st.st_mode) || st.st_size > MAX_FILE) {
        int err = fd < 0 ? errno : EINVAL;
        if (fd >= 0)
            close(fd);
        hs_log("%s: cannot read the suppressions file %s: %s; no suppressions used", prog, path,
               fd >= 0 && st.st_size > MAX_FILE ? "larger than 1 MiB" : hs_errno_text(err));
        return;
    }
    size_t size = (size_t)st.st_size;
    char *text = hs_arena_alloc(&hs_md_arena, size + 1);
    size_t got = 0;
    while (text && got < size) {
        ssize_t r = read(fd, text + got, size - got);
        if (r < 0 && errno == EINTR)
            continue;
        if (r <= 0)
            break;
        got += (size_t)r;
    }
    close(fd);
    if (!text) {
        hs_log("%s: not enough memory for the suppressions file %s", prog, path);
        return;
    }
    char err[256];
    if (!hs_supp_parse(text, got, &g_set, arena_alloc, NULL, err, sizeof(err))) {
        hs_log("%s: suppressions file %s:%s; no suppressions used", prog, path, err);
        g_set.count = 0;
    }
    hs_arena_free(&hs_md_arena, text, size + 1);
    for (size_t i = 0; i < g_set.count; i++)
        g_have[g_set.rules[i].kind] = true;
}

bool hs_md_suppressions_have(enum hs_supp_kind kind)
{
    return g_have[kind];
}

struct match {
    enum hs_supp_kind kind;
    struct hs_supp_rule *rule;
};

/* One frame line: its function and library against the rules. */
static void match_line(const char *line, size_t len, void *ctx)
{
    struct match *m = ctx;
    struct hs_frame_line fl;
    if (m->rule || !hs_frame_line_parse(line, len, &fl))
        return;
    char path[PATH_MAX], function[512];
    size_t n = fl.path_len < sizeof(path) - 1 ? fl.path_len : sizeof(path) - 1;
    memcpy(path, fl.path, n);
    path[n] = '\0';
    n = fl.function_len < sizeof(function) - 1 ? fl.function_len : sizeof(function) - 1;
    if (fl.function)
        memcpy(function, fl.function, n);
    function[fl.function ? n : 0] = '\0';
    const char *names[2] = {function, path};
    m->rule = hs_supp_match(&g_set, m->kind, names, 2);
}

struct hs_supp_rule *hs_md_suppressed(enum hs_supp_kind kind, const uintptr_t *frames, size_t n,
                                      struct hs_backtrace_printer *printer, uint64_t bytes)
{
    if (!g_have[kind] || n == 0)
        return NULL;
    struct match m = {kind, NULL};
    if (printer)
        hs_backtrace_printer_format(printer, frames, n, match_line, &m);
    else
        hs_backtrace_format(frames, n, match_line, &m);
    if (m.rule)
        hs_supp_count(m.rule, bytes);
    return m.rule;
}

void hs_md_suppressions_summary(void)
{
    for (size_t i = 0; i < g_set.count; i++) {
        const struct hs_supp_rule *r = &g_set.rules[i];
        uint64_t hits = __atomic_load_n(&r->hits, __ATOMIC_RELAXED);
        if (!hits)
            continue;
        const char *kind = hs_supp_kind_name(r->kind);
        char bytes[48] = "";
        if (r->kind == HS_SUPP_LEAK) /* an error report has no size of its own */
            hs_format(bytes, sizeof(bytes), " (%llu bytes)",
                      (unsigned long long)__atomic_load_n(&r->bytes, __ATOMIC_RELAXED));
        hs_log("%s: suppressed %llu %s%s%s with %s:%s (%s:%u)", hs_log_program_name(),
               (unsigned long long)hits, kind, hits == 1 ? "" : "s", bytes, kind, r->pattern,
               hs_md.cfg.suppressions, r->line);
    }
}
