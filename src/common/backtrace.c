/* backtrace.c: malloc-free stack capture (libunwind) and Android-format printing.
 * See backtrace.h for the contracts, the measurements and the signal-safety notes.
 */
#define UNW_LOCAL_ONLY
#include "backtrace.h"

#include "capture_gate.h"
#include "elf_cache.h"
#include "elf_symbols.h"
#include "format.h"
#include "log.h"
#include "proc_maps.h"

#include <elf.h>
#include <errno.h>
#include <libunwind.h>
#include <stdarg.h>
#include <stdbool.h>
#include <string.h>

/* Skips up to this many frames through the fast path; more use the slow path. */
#define HS_BACKTRACE_MAX_SKIP 64
/* Bound on unw_step iterations of the slow path (corrupt stacks can loop). */
#define HS_BACKTRACE_MAX_STEPS 4096

/* Set while this thread is inside unw_backtrace, whose per-thread cache must not be re-entered
 * (a signal handler capturing during a capture). */
static __thread int t_in_fast_capture __attribute__((tls_model("initial-exec")));

/* The slow path: an unw_step loop, which needs no buffer and can skip any number of frames.
 * Stores frames after dropping the first `drop` (frame 0 is the return address into this
 * function). Kept out of hs_backtrace_capture so that the fast path's stack frame does not
 * carry the ~2 KiB context and cursor. */
static __attribute__((noinline)) size_t capture_slow(uintptr_t *frames, size_t max_frames,
                                                     size_t drop)
{
    unw_context_t uc;
    unw_cursor_t cursor;
    size_t n = 0;
    if (unw_getcontext(&uc) != 0 || unw_init_local(&cursor, &uc) != 0)
        return 0;
    size_t depth = 0;
    do {
        unw_word_t ip;
        if (unw_get_reg(&cursor, UNW_REG_IP, &ip) < 0 || ip == 0)
            break;
        if (depth++ >= drop) {
            frames[n++] = (uintptr_t)ip;
            if (n == max_frames)
                break;
        }
    } while (depth < HS_BACKTRACE_MAX_STEPS && unw_step(&cursor) > 0);
    return n;
}

/* noinline: frame 0 of unw_backtrace is the return address into this function, which is
 * dropped along with `skip` more (capture_slow has one more frame of its own to drop). Neither
 * call may become a tail call: work (the copy, the errno restore) follows both. */
__attribute__((noinline)) size_t hs_backtrace_capture(uintptr_t *frames, size_t max_frames,
                                                      size_t skip)
{
    if (max_frames == 0)
        return 0;
    if (max_frames > HS_BACKTRACE_MAX_FRAMES)
        max_frames = HS_BACKTRACE_MAX_FRAMES;
    /* No fork may copy the unwinder's locks while this capture can hold one. */
    if (!hs_capture_gate_enter())
        return 0;
    int saved_errno = errno;
    size_t n = 0;

    if (!t_in_fast_capture && skip <= HS_BACKTRACE_MAX_SKIP) {
        size_t want = max_frames + skip + 1;
        void *tmp[want];
        t_in_fast_capture = 1;
        __atomic_signal_fence(__ATOMIC_SEQ_CST);
        int got = unw_backtrace(tmp, (int)want);
        __atomic_signal_fence(__ATOMIC_SEQ_CST);
        t_in_fast_capture = 0;
        for (size_t i = skip + 1; i < (size_t)(got > 0 ? got : 0); i++)
            frames[n++] = (uintptr_t)tmp[i];
    } else {
        n = capture_slow(frames, max_frames, skip + 2);
    }
    hs_capture_gate_leave();
    errno = saved_errno;
    return n;
}

/* State while printing one backtrace. */
struct symbolizer {
    struct hs_map map; /* mapping of the previous frame */
    bool have_map;
    struct hs_elf_cache files;
};

static hs_backtrace_name_fn g_name_fallback;

void hs_backtrace_set_name_fallback(hs_backtrace_name_fn fn)
{
    __atomic_store_n(&g_name_fallback, fn, __ATOMIC_RELEASE);
}

/* Names the function at lookup from the file's symbol tables, else from the fallback. */
static bool name_of(const struct hs_elf *elf, uintptr_t lookup, uintptr_t bias, char *name,
                    size_t cap, uintptr_t *offset)
{
    if (elf && hs_elf_lookup(elf, lookup - bias, name, cap, offset))
        return true;
    hs_backtrace_name_fn fallback = __atomic_load_n(&g_name_fallback, __ATOMIC_ACQUIRE);
    return fallback && fallback(lookup, name, cap, offset) && name[0];
}

/* Where the lines of hs_backtrace_format / hs_backtrace_log go: emit, or hs_log when NULL. */
struct line_out {
    void (*emit)(const char *line, size_t len, void *ctx);
    void *ctx;
};

/* Kept out of put_line so that the logging path does not carry this line buffer on the stack
 * under hs_vlog's own. */
static __attribute__((noinline)) void emit_formatted(const struct line_out *o, const char *fmt,
                                                     va_list ap)
{
    char line[HS_LOG_LINE_MAX];
    size_t len = hs_vformat(line, sizeof(line), fmt, ap);
    o->emit(line, len, o->ctx);
}

static void put_line(const struct line_out *o, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

static void put_line(const struct line_out *o, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    if (o->emit)
        emit_formatted(o, fmt, ap);
    else
        hs_vlog(fmt, ap);
    va_end(ap);
}

static void put_frame(struct symbolizer *s, size_t index, uintptr_t pc, const struct line_out *o)
{
    /* Return addresses may point past the end of the calling function's code. */
    uintptr_t lookup = index > 0 && pc > 0 ? pc - 1 : pc;
    struct hs_map *m = &s->map;
    if (!(s->have_map && lookup >= m->start && lookup < m->end))
        s->have_map = pc != 0 && hs_maps_find(0, lookup, m);

    bool is_file = s->have_map && m->path[0] == '/';
    bool is_vdso = s->have_map && strcmp(m->path, "[vdso]") == 0;
    if (!is_file && !is_vdso) {
        put_line(o, "          #%02zu  pc %016lx  <unknown>", index, (unsigned long)pc);
        return;
    }

    struct hs_elf vdso;
    const struct hs_elf *elf = NULL;
    if (is_file)
        elf = hs_elf_cache_get(&s->files, m->path, m->dev, m->inode, m->deleted);
    else if (hs_elf_open_image(&vdso, (const void *)m->start, m->end - m->start))
        elf = &vdso;

    uintptr_t bias = m->load_base;
    bool exec = m->perms & HS_MAP_EXEC;
    if (elf && !hs_elf_load_bias(elf, m->start, m->offset, exec, &bias) &&
        hs_elf_type(elf) == ET_EXEC)
        bias = 0;

    char name[512];
    uintptr_t offset;
    const char *suffix = m->deleted ? " (deleted)" : "";
    if (name_of(elf, lookup, bias, name, sizeof(name), &offset)) {
        put_line(o, "          #%02zu  pc %016lx  %s%s (%s+%lu)", index, (unsigned long)(pc - bias),
                 m->path, suffix, name, (unsigned long)(offset + (pc - lookup)));
    } else {
        put_line(o, "          #%02zu  pc %016lx  %s%s", index, (unsigned long)(pc - bias), m->path,
                 suffix);
    }
}

static void put_frames(const uintptr_t *frames, size_t n, const struct line_out *o)
{
    if (n == 0) {
        put_line(o, "  Backtrace failed to get any frames.");
        return;
    }
    int saved_errno = errno;
    struct symbolizer s;
    s.have_map = false;
    hs_elf_cache_init(&s.files);
    for (size_t i = 0; i < n; i++)
        put_frame(&s, i, frames[i], o);
    hs_elf_cache_close(&s.files);
    errno = saved_errno;
}

void hs_backtrace_format(const uintptr_t *frames, size_t n,
                         void (*emit)(const char *line, size_t len, void *ctx), void *ctx)
{
    struct line_out o = {emit, ctx};
    if (emit)
        put_frames(frames, n, &o);
}

void hs_backtrace_log(const uintptr_t *frames, size_t n)
{
    struct line_out o = {NULL, NULL};
    put_frames(frames, n, &o);
}
