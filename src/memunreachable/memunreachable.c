/* memunreachable.c: libmemunreachable's public API (include/heapscope/memunreachable.h),
 * the check that check_unreachable_on_signal runs, and the check at exit that
 * `heapscope leaks -- PROGRAM` asks for.
 *
 * A check: find the allocator's introspection (the preloaded malloc debug shim's, the copy
 * embedded in this library, or a walk of glibc's heap when the library was injected into a
 * process started without heapscope: injected.h), open a pipe, let the collector stop the threads and fork
 * the sweeper (collector.c), read the sweeper's result from the pipe (result_codec.c). One
 * check at a time per process. Runs in ordinary program context: it may allocate.
 */
#define _GNU_SOURCE
#include "clock.h"
#include "heapscope/memunreachable.h"

#include "capture.h"
#include "collector.h"
#include "env.h"
#include "errno_text.h"
#include "format.h"
#include "glibc_heap.h"
#include "injected.h"
#include "log.h"
#include "report_text.h"
#include "result_codec.h"
#include "debug_state.h"
#include "suppress.h"

#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define HS_EXPORT __attribute__((visibility("default")))
#define CAPTURE_TIMEOUT_MS 5000  /* threads stopped, maps read, sweeper forked */
#define RESULT_TIMEOUT_MS 300000 /* the sweeper's walk of the whole heap */

static pthread_mutex_t g_check_lock = PTHREAD_MUTEX_INITIALIZER;
static struct UnreachableMemoryStats g_last_stats; /* guarded by g_check_lock */

static void mu_log(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static void mu_log(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    hs_vlog_tag("memunreachable", fmt, ap);
    va_end(ap);
}

static void ignore_block(uintptr_t ptr, size_t size, void *arg)
{
    (void)ptr, (void)size, (void)arg;
}

/* Set while the checks walk glibc's heap under a malloc debug shim that does not track the
 * allocations (check_unreachable_on_signal alone): their reports say so. */
static int g_untracked_shim;

/* How the malloc debug shim says its blocks are found (introspection.c): 0 malloc_iterate,
 * 1 a walk of glibc's heap, 2 untracked under page_guard, 3 another allocator; -1 when there
 * is no shim. */
static int shim_heap_source(void)
{
    int (*source)(void) = (int (*)(void))dlsym(RTLD_DEFAULT, "heapscope_malloc_debug_heap_source");
    return source ? source() : -1;
}

/* The allocator introspection of whichever malloc debug copy serves the program, or, in a
 * process started without heapscope (injected.h) or under malloc debug without tracking, a
 * walk of glibc's own heap. */
static bool find_heap_source(struct hs_mu_heap_source *heap)
{
    if (hs_mu_injected()) {
        hs_mu_glibc_heap_source(heap);
        return true;
    }
    int source = shim_heap_source();
    if (source == 2 || source == 3) {
        mu_log("cannot check for unreachable memory: %s",
               source == 2 ? "allocations are not tracked and page_guard keeps them off "
                             "glibc's heap; add verify_pointers or backtrace to "
                             "LIBC_DEBUG_MALLOC_OPTIONS"
                           : "the program's malloc is another allocator's, neither glibc's nor "
                             "heapscope's");
        return false;
    }
    if (source == 1) {
        if (!hs_mu_glibc_walkable()) {
            mu_log("cannot check for unreachable memory: allocations are not tracked and this "
                   "glibc (before 2.32) cannot be walked; add verify_pointers or backtrace to "
                   "LIBC_DEBUG_MALLOC_OPTIONS");
            return false;
        }
        __atomic_store_n(&g_untracked_shim, 1, __ATOMIC_RELAXED);
        hs_mu_glibc_heap_source(heap);
        return true;
    }
    memset(heap, 0, sizeof(*heap));
    heap->iterate = (__typeof(heap->iterate))dlsym(RTLD_DEFAULT, "malloc_iterate");
    heap->list = (__typeof(heap->list))dlsym(RTLD_DEFAULT, "heapscope_malloc_debug_list");
    heap->backtrace = (__typeof(heap->backtrace))dlsym(RTLD_DEFAULT, "malloc_backtrace");
    heap->disable = (__typeof(heap->disable))dlsym(RTLD_DEFAULT, "malloc_disable");
    heap->enable = (__typeof(heap->enable))dlsym(RTLD_DEFAULT, "malloc_enable");
    heap->own_memory = (__typeof(heap->own_memory))dlsym(RTLD_DEFAULT, "heapscope_malloc_debug_own_memory");
    if (!heap->iterate || !heap->disable || !heap->enable) {
        mu_log("cannot check for unreachable memory: no allocator introspection "
               "(malloc_iterate) in this process");
        return false;
    }
    /* Whether the shim tracks the blocks: heapscope's shim counts them at once (SIZE_MAX
     * without tracking) without locking its table; malloc_iterate over an empty range reads
     * no block (it once read every block's record: 150 ms at 10^7 blocks, before the threads
     * were even stopped) but still takes every lock of the table. */
    if (heap->list ? heap->list(NULL, 0) == SIZE_MAX
                   : heap->iterate(0, 0, ignore_block, NULL) != 0) {
        mu_log("cannot check for unreachable memory: allocations are not tracked; add "
               "verify_pointers or backtrace to LIBC_DEBUG_MALLOC_OPTIONS");
        return false;
    }
    return true;
}

/* The check's lines go where malloc debug's go: the preloaded shim may have taken its log
 * file from the system setting (src/malloc_debug/system_setting.h), which this library's copy
 * of the log, reading only the environment, would not see. Not in injected mode, whose lines
 * are kept for the command. */
static void adopt_shim_log(void)
{
    const char *(*log_file)(void) =
        (const char *(*)(void))dlsym(RTLD_DEFAULT, "heapscope_malloc_debug_log_file");
    const char *pattern = log_file ? log_file() : NULL;
    if (pattern && *pattern)
        hs_log_set_file_pattern(pattern); /* HEAPSCOPE_LOG_FILE, when set, still wins */
}

static void follow_the_shims_log(void)
{
    static pthread_once_t once = PTHREAD_ONCE_INIT;
    if (!hs_mu_injected())
        pthread_once(&once, adopt_shim_log);
}

/* Zeroes the stack below the caller's frame. The check's own frames are then laid over
 * zeros instead of over what earlier calls left there: a conservative scan of the calling
 * thread's stack must not find a stale copy of a pointer the program has dropped. */
static __attribute__((noinline)) void scrub_stack(void)
{
    volatile char area[32768];
    memset((char *)area, 0, sizeof(area));
    __asm__ volatile("" : : "r"(area) : "memory");
}

static bool get_unreachable_memory(struct UnreachableMemoryInfo *info, size_t limit);

HS_EXPORT bool GetUnreachableMemory(struct UnreachableMemoryInfo *info, size_t limit)
{
    scrub_stack();
    return get_unreachable_memory(info, limit);
}

static __attribute__((noinline)) bool get_unreachable_memory(struct UnreachableMemoryInfo *info,
                                                             size_t limit)
{
    if (!info)
        return false;
    if (info->version != 0) {
        mu_log("unsupported UnreachableMemoryInfo.version %zu in GetUnreachableMemory",
               info->version);
        return false;
    }
    hs_log_init_program();
    follow_the_shims_log();
    memset(info, 0, sizeof(*info));
    struct hs_mu_heap_source heap;
    if (!find_heap_source(&heap))
        return false;

    int saved_errno = errno;
    pthread_mutex_lock(&g_check_lock);
    uint64_t start = hs_monotonic_ns();
    int fds[2];
    int rc = pipe2(fds, O_CLOEXEC) == 0 ? 0 : -errno;
    struct hs_mu_collect_stats stats;
    memset(&stats, 0, sizeof(stats));
    if (rc == 0) {
        rc = hs_mu_collect(&heap, limit, fds[1], &stats, CAPTURE_TIMEOUT_MS);
        close(fds[1]); /* the sweeper has its own copy */
        size_t skipped_pages = 0;
        if (rc == 0)
            rc = hs_mu_result_read_limited(fds[0], info, limit, RESULT_TIMEOUT_MS, &skipped_pages);
        close(fds[0]);
        if (rc == 0)
            hs_mu_collect_release(&stats); /* complete: no need to wait for the sweeper's exit */
        else
            hs_mu_collect_finish(&stats);
    } else {
        mu_log("cannot check for unreachable memory: pipe: %s", hs_errno_text(-rc));
    }
    g_last_stats.pause_ns = stats.pause_ns;
    g_last_stats.total_ns = hs_monotonic_ns() - start;
    g_last_stats.num_threads = stats.num_threads;
    pthread_mutex_unlock(&g_check_lock);
    errno = saved_errno;
    if (rc != 0)
        FreeUnreachableMemory(info);
    return rc == 0;
}

HS_EXPORT void FreeUnreachableMemory(struct UnreachableMemoryInfo *info)
{
    if (!info)
        return;
    free(info->leaks);
    info->leaks = NULL;
    info->num_reported_leaks = 0;
}

HS_EXPORT void GetLastUnreachableMemoryStats(struct UnreachableMemoryStats *stats)
{
    pthread_mutex_lock(&g_check_lock);
    *stats = g_last_stats;
    pthread_mutex_unlock(&g_check_lock);
}

/* A growing string for the text report. */
struct text {
    char *data;
    size_t len, cap;
    bool failed;
};

static void append_line(const char *line, size_t len, void *ctx)
{
    struct text *t = ctx;
    if (t->failed)
        return;
    if (t->len + len + 2 > t->cap) {
        size_t cap = (t->cap ? t->cap * 2 : 4096) + len;
        char *data = realloc(t->data, cap);
        if (!data) {
            t->failed = true;
            return;
        }
        t->data = data;
        t->cap = cap;
    }
    memcpy(t->data + t->len, line, len);
    t->len += len;
    t->data[t->len++] = '\n';
    t->data[t->len] = '\0';
}

/* The extra line of the text report, if any: no backtraces without tracking. */
static const char *report_note(void)
{
    if (hs_mu_injected())
        return HS_MU_UNTRACKED_NOTE;
    return __atomic_load_n(&g_untracked_shim, __ATOMIC_RELAXED) ? HS_MU_UNTRACKED_SHIM_NOTE : NULL;
}

HS_EXPORT char *GetUnreachableMemoryString(bool log_contents, size_t limit)
{
    struct UnreachableMemoryInfo info = {0};
    if (!GetUnreachableMemory(&info, limit))
        return NULL;
    struct text t = {0};
    hs_mu_report_text_note(&info, log_contents, report_note(), append_line, &t);
    FreeUnreachableMemory(&info);
    if (t.failed) {
        free(t.data);
        return NULL;
    }
    return t.data ? t.data : strdup("");
}

HS_EXPORT void FreeUnreachableMemoryString(char *text)
{
    free(text);
}

static void log_line(const char *line, size_t len, void *ctx)
{
    (void)ctx;
    mu_log("%.*s", (int)len, line);
}

/* What malloc debug's option suppressions=FILE (suppress.h) took out of one check. */
#define MAX_USED_RULES 32
struct suppressed {
    size_t count;
    struct {
        const struct hs_supp_rule *rule;
        size_t leaks, bytes;
    } used[MAX_USED_RULES];
};

/* Takes the leaks the leak: rules match out of info (and out of its totals: a leak with the
 * allocations folded into it). */
static void drop_suppressed(struct UnreachableMemoryInfo *info, struct suppressed *out)
{
    out->count = 0;
    if (!hs_md_suppressions_have(HS_SUPP_LEAK) || !info->leaks)
        return;
    size_t kept = 0;
    for (size_t i = 0; i < info->num_reported_leaks; i++) {
        struct UnreachableLeak *l = &info->leaks[i];
        size_t n = l->num_backtrace_frames < UNREACHABLE_BACKTRACE_FRAMES
                       ? l->num_backtrace_frames
                       : UNREACHABLE_BACKTRACE_FRAMES;
        size_t allocations = 1 + l->referenced_count + l->similar_count +
                             l->similar_referenced_count;
        const struct hs_supp_rule *rule =
            hs_md_suppressed(HS_SUPP_LEAK, l->backtrace_frames, n, NULL, l->total_size);
        if (!rule) {
            if (kept != i)
                info->leaks[kept] = *l;
            kept++;
            continue;
        }
        info->num_leaks -= allocations <= info->num_leaks ? allocations : info->num_leaks;
        info->leak_bytes -= l->total_size <= info->leak_bytes ? l->total_size : info->leak_bytes;
        size_t u = 0;
        while (u < out->count && out->used[u].rule != rule)
            u++;
        if (u == MAX_USED_RULES)
            continue;
        if (u == out->count) {
            out->used[u].rule = rule;
            out->used[u].leaks = out->used[u].bytes = 0;
            out->count++;
        }
        out->used[u].leaks += allocations;
        out->used[u].bytes += l->total_size;
    }
    info->num_reported_leaks = kept;
}

/* "suppressed N leaks (B bytes) with leak:PATTERN (FILE:LINE)" for the rules used. */
static void suppressed_lines(const struct suppressed *s, const char *indent,
                             void (*emit)(const char *line, size_t len, void *ctx), void *ctx)
{
    for (size_t i = 0; i < s->count; i++) {
        char line[HS_LOG_LINE_MAX];
        size_t n = hs_format(line, sizeof(line), "%ssuppressed %zu leak%s (%zu bytes) with "
                             "leak:%s (%s:%u)", indent, s->used[i].leaks,
                             s->used[i].leaks == 1 ? "" : "s", s->used[i].bytes,
                             s->used[i].rule->pattern, hs_md.cfg.suppressions,
                             s->used[i].rule->line);
        emit(line, n, ctx);
    }
}

/* The summary line, then each reported leak (the text report without its header). */
static void log_report(const struct UnreachableMemoryInfo *info, bool log_contents)
{
    char line[256];
    hs_mu_summary_line(info, line, sizeof(line));
    mu_log("%s", line);
    if (report_note())
        mu_log("%s", report_note());
    for (size_t i = 0; i < info->num_reported_leaks; i++)
        hs_mu_report_leak(&info->leaks[i], log_contents, log_line, NULL);
}

/* The suppressions and the log of a check that ran. Out of line, like report_checked: the
 * callers' frames, live during the check (their stack is a root, scanned conservatively),
 * stay as small as they were, so that no stale word of an earlier call lands in them. */
static __attribute__((noinline)) void log_checked(struct UnreachableMemoryInfo *info,
                                                  bool log_contents)
{
    struct suppressed supp;
    drop_suppressed(info, &supp);
    log_report(info, log_contents);
    suppressed_lines(&supp, "", log_line, NULL);
}

HS_EXPORT bool LogUnreachableMemory(bool log_contents, size_t limit)
{
    struct UnreachableMemoryInfo info = {0};
    if (!GetUnreachableMemory(&info, limit))
        return false;
    log_checked(&info, log_contents);
    FreeUnreachableMemory(&info);
    return true;
}

HS_EXPORT bool NoLeaks(void)
{
    struct UnreachableMemoryInfo info = {0};
    if (!GetUnreachableMemory(&info, 0))
        return false;
    bool none = info.num_leaks == 0;
    FreeUnreachableMemory(&info);
    return none;
}

/* ---- checks asked for from outside ---------------------------------------------------- */

static size_t env_number(const char *name, size_t fallback)
{
    char value[32];
    if (hs_env_get(name, value, sizeof(value)) <= 0)
        return fallback;
    char *end;
    unsigned long long v = strtoull(value, &end, 10);
    return *end ? fallback : (size_t)v;
}

/* Writes text to path through a temporary file and a rename, so a reader never sees half a
 * report. */
static void write_report_file(const char *path, const char *text, size_t len)
{
    char tmp[128];
    hs_format(tmp, sizeof(tmp), "%s.%d.tmp", path, (int)getpid());
    int fd = open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
    if (fd < 0) {
        mu_log("cannot write %s: %s", tmp, hs_errno_text(errno));
        return;
    }
    bool ok = true;
    for (size_t done = 0; done < len && ok;) {
        ssize_t w = write(fd, text + done, len - done);
        if (w < 0 && errno == EINTR)
            continue;
        ok = w > 0;
        done += ok ? (size_t)w : 0;
    }
    ok = close(fd) == 0 && ok;
    if (!ok || rename(tmp, path) != 0) {
        mu_log("cannot write %s: %s", path, hs_errno_text(errno));
        unlink(tmp);
    }
}

/* Called by the malloc debug shim's check_unreachable_on_signal thread (SIGRTMAX-16): logs the
 * report and leaves it in /tmp/heapscope_unreachable.<pid>.txt for `heapscope leaks -p`. */
/* Appends the log lines kept in injected mode, each after indent. */
static void append_kept(struct text *t, const char *indent)
{
    size_t kept = 0;
    const char *lines = hs_mu_injected() ? hs_mu_injected_log(&kept) : NULL;
    for (size_t i = 0; i < kept;) {
        const char *nl = memchr(lines + i, '\n', kept - i);
        size_t n = (size_t)(nl - (lines + i));
        char line[HS_LOG_LINE_MAX + 8];
        size_t len = hs_format(line, sizeof(line), "%s%.*s", indent, (int)n, lines + i);
        append_line(line, len, t);
        i += n + 1;
    }
}

static bool have_kept(void)
{
    size_t kept = 0;
    if (hs_mu_injected())
        hs_mu_injected_log(&kept);
    return kept > 0;
}

/* The report of a check that failed: why, from the log lines kept in injected mode (the
 * process's log has them otherwise). */
static void write_failure(const char *path)
{
    static const char failed[] = "error: the unreachable-memory check failed";
    static const char see_log[] = "error: the unreachable-memory check failed; the process's "
                                  "log says why\n";
    if (!have_kept()) {
        write_report_file(path, see_log, sizeof(see_log) - 1);
        return;
    }
    struct text t = {0};
    append_line(failed, sizeof(failed) - 1, &t);
    append_kept(&t, "  ");
    if (!t.failed)
        write_report_file(path, t.data, t.len);
    else
        write_report_file(path, see_log, sizeof(see_log) - 1);
    free(t.data);
}

/* The report of a check that ran: suppressions, the log, the file for `leaks -p`. */
static __attribute__((noinline)) void report_checked(struct UnreachableMemoryInfo *info,
                                                     bool contents, const char *path)
{
    struct suppressed supp;
    drop_suppressed(info, &supp);
    /* Attached from outside (injected), the report goes to the command only, with what the
     * check noted on the way (a heap walk cut short ...), which the process's log has
     * otherwise. */
    if (!hs_mu_injected()) {
        log_report(info, contents);
        suppressed_lines(&supp, "", log_line, NULL);
    }
    struct text t = {0};
    hs_mu_report_text_note(info, contents, report_note(), append_line, &t);
    suppressed_lines(&supp, "  ", append_line, &t);
    if (have_kept()) {
        static const char noted[] = "  Noted during the check:";
        append_line(noted, sizeof(noted) - 1, &t);
        append_kept(&t, "    ");
    }
    if (!t.failed && t.data)
        write_report_file(path, t.data, t.len);
    free(t.data);
}

HS_EXPORT void heapscope_unreachable_check(void)
{
    bool contents = env_number("HEAPSCOPE_UNREACHABLE_CONTENTS", 0) != 0;
    size_t limit = env_number("HEAPSCOPE_UNREACHABLE_LIMIT", 100);
    char path[64];
    hs_format(path, sizeof(path), "/tmp/heapscope_unreachable.%d.txt", (int)getpid());
    struct UnreachableMemoryInfo info = {0};
    hs_mu_injected_log_reset();
    if (!GetUnreachableMemory(&info, limit)) {
        write_failure(path);
        return;
    }
    report_checked(&info, contents, path);
    FreeUnreachableMemory(&info);
}

/* `heapscope leaks -- PROGRAM`: the check at exit. */
__attribute__((destructor)) static void check_at_exit(void)
{
    if (env_number("HEAPSCOPE_UNREACHABLE_AT_EXIT", 0) == 0)
        return;
    LogUnreachableMemory(env_number("HEAPSCOPE_UNREACHABLE_CONTENTS", 0) != 0,
                         env_number("HEAPSCOPE_UNREACHABLE_LIMIT", 100));
}
