/* backtrace.c: malloc-free stack capture (libunwind) and Android-format printing.
 * See backtrace.h for the contracts, the measurements and the signal-safety notes.
 */
#define UNW_LOCAL_ONLY
#include "backtrace.h"

#include "capture_gate.h"
#include "cfi_unwind.h"
#include "elf_cache.h"
#include "elf_symbols.h"
#include "format.h"
#include "hash_table.h"
#include "log.h"
#include "maps_snapshot.h"
#include "proc_maps.h"
#include "signal_trampoline.h"

#include <elf.h>
#include <errno.h>
#include <libunwind.h>
#include <stdarg.h>
#include <stdbool.h>
#include <string.h>

/* Skips up to this many frames through the fast path; more use the slow path. */
#define HS_BACKTRACE_MAX_SKIP 64
/* Leading frames in a drop range (hs_backtrace_capture_from) that libunwind's fast path
 * unwinds beyond max_frames to make up for them; past this, fewer frames are returned. */
#define HS_BACKTRACE_DROP_SLACK 8
/* Bound on unw_step iterations of the slow path (corrupt stacks can loop). */
#define HS_BACKTRACE_MAX_STEPS 4096

/* Set while this thread is inside unw_backtrace, whose per-thread cache must not be re-entered
 * (a signal handler capturing during a capture). */
static __thread int t_in_fast_capture __attribute__((tls_model("initial-exec")));

/* Frames are stored as call sites (hs_call_site): every frame unw_backtrace or unw_step
 * reports is a return address, except the one after a signal trampoline (the interrupted pc).
 * Both paths apply the same rule, so they store the same frames. */

/* The slow path: an unw_step loop, which needs no buffer and can skip any number of frames.
 * Stores frames after dropping the first `drop` (frame 0 is the return address into this
 * function). Kept out of hs_backtrace_capture so that the fast path's stack frame does not
 * carry the ~2 KiB context and cursor. */
static __attribute__((noinline)) size_t capture_slow(uintptr_t *frames, size_t max_frames,
                                                     size_t drop, uintptr_t drop_start,
                                                     uintptr_t drop_end)
{
    unw_context_t uc;
    unw_cursor_t cursor;
    size_t n = 0;
    if (unw_getcontext(&uc) != 0 || unw_init_local(&cursor, &uc) != 0)
        return 0;
    size_t depth = 0;
    unw_word_t prev_ip = 0;
    do {
        unw_word_t ip;
        if (unw_get_reg(&cursor, UNW_REG_IP, &ip) < 0 || ip == 0)
            break;
        if (depth++ >= drop) {
            uintptr_t site = hs_call_site((uintptr_t)ip, hs_is_signal_trampoline(prev_ip));
            if (n > 0 || site - drop_start >= drop_end - drop_start) {
                frames[n++] = site;
                if (n == max_frames)
                    break;
            }
        }
        prev_ip = ip;
    } while (depth < HS_BACKTRACE_MAX_STEPS && unw_step(&cursor) > 0);
    return n;
}

/* The body of both capture functions, inlined into each, so that frame 0 of unw_backtrace
 * (and of hs_cfi_capture) is the return address into that function, dropped along with
 * `skip` more (capture_slow has one more frame of its own to drop). Neither call may become a
 * tail call: work (the copy, the errno restore) follows both. cfi: try the walker with cached
 * CFA rules first (cfi_unwind.h), whose frames are libunwind's or who hands over; ctx: the
 * walker starts there (hs_backtrace_capture_from), where libunwind's frames after `skip`
 * start as well. */
static inline __attribute__((always_inline)) size_t capture(uintptr_t *frames, size_t max_frames,
                                                           size_t skip, bool cfi,
                                                           const struct hs_cfi_context *ctx,
                                                           uintptr_t drop_start, uintptr_t drop_end)
{
    if (max_frames == 0)
        return 0;
    if (max_frames > HS_BACKTRACE_MAX_FRAMES)
        max_frames = HS_BACKTRACE_MAX_FRAMES;
    /* A stack whose every rule is cached is walked without the gate: that walk holds no
     * lock a fork could copy (cfi_unwind.h). The gate's state is still obeyed: a child whose
     * fork could not wait captures nothing. */
    if (cfi && __atomic_load_n(&hs_capture_gate.state, __ATOMIC_RELAXED) == HS_CAPTURE_GATE_OPEN) {
        size_t got = ctx ? hs_cfi_capture_from(ctx, frames, max_frames, 0, drop_start, drop_end,
                                                   false)
                         : hs_cfi_capture(frames, max_frames, skip + 1, false);
        if (got != HS_CFI_FALLBACK)
            return got; /* call sites already */
    }
    int saved_errno = errno;
    /* No fork may copy the unwinder's locks while this capture can hold one. */
    if (!hs_capture_gate_enter()) {
        errno = saved_errno;
        return 0;
    }
    size_t n = 0;

    if (!t_in_fast_capture && skip <= HS_BACKTRACE_MAX_SKIP) {
        t_in_fast_capture = 1;
        __atomic_signal_fence(__ATOMIC_SEQ_CST);
        size_t got = !cfi  ? HS_CFI_FALLBACK
                     : ctx ? hs_cfi_capture_from(ctx, frames, max_frames, 0, drop_start,
                                                   drop_end, true)
                           : hs_cfi_capture(frames, max_frames, skip + 1, true);
        if (got != HS_CFI_FALLBACK) {
            n = got; /* call sites already (no signal trampoline on the way) */
        } else {
            size_t slack = drop_end > drop_start ? HS_BACKTRACE_DROP_SLACK : 0;
            size_t want = max_frames + skip + 1 + slack;
            void *tmp[want];
            int unw = unw_backtrace(tmp, (int)want);
            for (size_t i = skip + 1; i < (size_t)(unw > 0 ? unw : 0) && n < max_frames; i++) {
                uintptr_t site = hs_call_site((uintptr_t)tmp[i],
                                              hs_is_signal_trampoline((uintptr_t)tmp[i - 1]));
                if (n > 0 || site - drop_start >= drop_end - drop_start)
                    frames[n++] = site;
            }
        }
        __atomic_signal_fence(__ATOMIC_SEQ_CST);
        t_in_fast_capture = 0;
    } else {
        n = capture_slow(frames, max_frames, skip + 2, drop_start, drop_end);
    }
    hs_capture_gate_leave();
    errno = saved_errno;
    return n;
}

__attribute__((noinline)) size_t hs_backtrace_capture(uintptr_t *frames, size_t max_frames,
                                                      size_t skip)
{
    return capture(frames, max_frames, skip, true, NULL, 0, 0);
}

__attribute__((noinline)) size_t hs_backtrace_capture_from(const struct hs_cfi_context *ctx,
                                                           uintptr_t drop_start,
                                                           uintptr_t drop_end, uintptr_t *frames,
                                                           size_t max_frames)
{
    /* libunwind starts here: its frame 0 is the call site in ctx's function (skip 1). */
    return capture(frames, max_frames, 1, true, ctx, drop_start, drop_end);
}

__attribute__((noinline)) size_t hs_backtrace_capture_unwinder(uintptr_t *frames,
                                                               size_t max_frames, size_t skip)
{
    return capture(frames, max_frames, skip, false, NULL, 0, 0);
}

/* State while printing: the mapping of the previous frame and a few ELF files kept open. A
 * printer (below) adds a snapshot of the maps and the text of every frame already printed. */
struct symbolizer {
    struct hs_map map; /* mapping of the previous frame */
    bool have_map;
    struct hs_elf_cache files;
    struct hs_backtrace_printer *printer; /* NULL for a one-off backtrace */
};

static hs_backtrace_name_fn g_name_fallback;

void hs_backtrace_set_name_fallback(hs_backtrace_name_fn fn)
{
    __atomic_store_n(&g_name_fallback, fn, __ATOMIC_RELEASE);
}

/* Names the function at lookup from the file's symbol tables, else from the fallback. */
static bool name_of(struct hs_elf_cache *files, const struct hs_elf *elf, uintptr_t lookup,
                    uintptr_t bias, char *name, size_t cap, uintptr_t *offset)
{
    if (elf && hs_elf_cache_lookup(files, elf, lookup - bias, name, cap, offset))
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

static bool find_map(struct symbolizer *s, uintptr_t pc);

/* What a frame line says after "pc ". */
struct frame_desc {
    enum { FRAME_UNKNOWN, FRAME_NAMED, FRAME_FILE } kind;
    unsigned long rel_pc; /* absolute for FRAME_UNKNOWN */
    const char *path;     /* s->map.path */
    const char *suffix;   /* " (deleted)" or "" */
    unsigned long offset; /* from the start of name */
    char name[512];
};

/* Resolves the frame at pc (see hs_backtrace_log for what is printed). */
static void describe_frame(struct symbolizer *s, uintptr_t pc, struct frame_desc *d)
{
    /* Frames are call sites or exact pcs (hs_backtrace_capture): inside their function. */
    uintptr_t lookup = pc;
    struct hs_map *m = &s->map;
    if (!(s->have_map && lookup >= m->start && lookup < m->end))
        s->have_map = pc != 0 && find_map(s, lookup);

    bool is_file = s->have_map && m->path[0] == '/';
    bool is_vdso = s->have_map && strcmp(m->path, "[vdso]") == 0;
    if (!is_file && !is_vdso) {
        d->kind = FRAME_UNKNOWN;
        d->rel_pc = (unsigned long)pc;
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

    uintptr_t offset;
    d->rel_pc = (unsigned long)(pc - bias);
    d->path = m->path;
    d->suffix = m->deleted ? " (deleted)" : "";
    d->kind = FRAME_FILE;
    if (name_of(&s->files, elf, lookup, bias, d->name, sizeof(d->name), &offset)) {
        d->kind = FRAME_NAMED;
        d->offset = (unsigned long)offset;
    }
}

/* The frame line's text after "pc " (cut at cap - 1); returns its length. */
static size_t frame_text(const struct frame_desc *d, char *out, size_t cap)
{
    switch (d->kind) {
    case FRAME_UNKNOWN:
        return hs_format(out, cap, "%016lx  <unknown>", d->rel_pc);
    case FRAME_NAMED:
        return hs_format(out, cap, "%016lx  %s%s (%s+%lu)", d->rel_pc, d->path, d->suffix,
                         d->name, d->offset);
    default:
        return hs_format(out, cap, "%016lx  %s%s", d->rel_pc, d->path, d->suffix);
    }
}

/* ---- printers: many backtraces of this process, each distinct frame resolved once ---- */

/* A frame's text, keyed by its pc (a call site or an exact pc: the text does not depend on
 * the frame's place in the stack). */
struct memo_entry {
    uintptr_t key; /* the pc; 0 = empty (pc 0 is never memoised) */
    const char *text;
    uint32_t len;
};

static inline uint64_t memo_key_hash(const uintptr_t *pc, const void *ctx)
{
    (void)ctx;
    return *pc;
}
static inline uint64_t memo_entry_hash(const struct memo_entry *e, const void *ctx)
{
    (void)ctx;
    return e->key;
}
static inline bool memo_matches(const struct memo_entry *e, const uintptr_t *pc, const void *ctx)
{
    (void)ctx;
    return e->key == *pc;
}
static inline bool memo_is_empty(const struct memo_entry *e)
{
    return e->key == 0;
}
static inline void memo_clear(struct memo_entry *e)
{
    e->key = 0;
}

/* pc -> its frame line's text (hash_table.h, in the printer's arena). */
HS_HASH_TABLE_DEFINE(memo_table, struct memo_entry, uintptr_t, memo_key_hash, memo_entry_hash,
                     memo_matches, memo_is_empty, memo_clear)

/* Text blocks are carved from chunks of this size, all freed together. */
#define MEMO_CHUNK (64 * 1024)
/* A pc outside every mapping re-reads the maps, at most this many times per printer. */
#define MAX_MAPS_REREADS 16

struct hs_backtrace_printer {
    struct hs_arena *arena;
    struct hs_maps_snapshot maps;
    bool maps_read;
    unsigned rereads;
    struct symbolizer sym;
    struct memo_table memo;
    char *chunk; /* current text chunk; its first word links to the previous one */
    size_t chunk_used;
};

struct hs_backtrace_printer *hs_backtrace_printer_new(struct hs_arena *arena)
{
    struct hs_backtrace_printer *p = hs_arena_calloc(arena, sizeof(*p));
    if (!p)
        return NULL;
    p->arena = arena;
    const struct hs_table_alloc in_arena = {hs_arena_table_alloc, hs_arena_table_free, arena};
    memo_table_init(&p->memo, &in_arena, NULL, 50);
    hs_maps_snapshot_init(&p->maps, arena);
    p->sym.have_map = false;
    hs_elf_cache_init(&p->sym.files);
    hs_elf_cache_use_arena(&p->sym.files, arena);
    p->sym.printer = p;
    return p;
}

void hs_backtrace_printer_free(struct hs_backtrace_printer *p)
{
    if (!p)
        return;
    hs_elf_cache_close(&p->sym.files);
    hs_maps_snapshot_free(&p->maps);
    memo_table_destroy(&p->memo);
    while (p->chunk) {
        char *prev;
        memcpy(&prev, p->chunk, sizeof(prev));
        hs_arena_free(p->arena, p->chunk, MEMO_CHUNK);
        p->chunk = prev;
    }
    hs_arena_free(p->arena, p, sizeof(*p));
}

/* The mapping of the code at pc, into s->map. Only an executable mapping holds code: where a
 * library the program has unloaded was, the printer's own read-only mappings of the ELF files
 * it reads symbols from may lie now (the kernel reuses the hole), and a frame of the unloaded
 * library was named as one of such a file (the program's own, at the unloaded library's
 * offset). Such a frame is unknown. */
static bool find_map(struct symbolizer *s, uintptr_t pc)
{
    struct hs_backtrace_printer *p = s->printer;
    if (!p)
        return hs_maps_find(0, pc, &s->map) && (s->map.perms & HS_MAP_EXEC);
    if (!p->maps_read) {
        p->maps_read = true;
        hs_maps_snapshot_read(&p->maps, 0);
    }
    if (hs_maps_snapshot_find(&p->maps, pc, &s->map))
        return (s->map.perms & HS_MAP_EXEC) != 0;
    /* Mapped after the snapshot (a dlopen'ed library)? */
    if (p->rereads >= MAX_MAPS_REREADS)
        return false;
    p->rereads++;
    hs_maps_snapshot_read(&p->maps, 0);
    return hs_maps_snapshot_find(&p->maps, pc, &s->map) && (s->map.perms & HS_MAP_EXEC);
}

/* A copy of text[0, len) in the printer's chunks, or NULL. */
static const char *memo_store_text(struct hs_backtrace_printer *p, const char *text, size_t len)
{
    size_t need = (len + 7) & ~(size_t)7;
    if (need > MEMO_CHUNK - sizeof(char *))
        return NULL;
    if (!p->chunk || p->chunk_used + need > MEMO_CHUNK) {
        char *chunk = hs_arena_alloc(p->arena, MEMO_CHUNK);
        if (!chunk)
            return NULL;
        memcpy(chunk, &p->chunk, sizeof(p->chunk));
        p->chunk = chunk;
        p->chunk_used = sizeof(char *);
    }
    char *copy = p->chunk + p->chunk_used;
    memcpy(copy, text, len);
    p->chunk_used += need;
    return copy;
}

/* One frame line. A one-off backtrace formats it straight into the log line (no second line
 * buffer on the stack inside malloc); a printer keeps its text for the next time. */
static void put_frame(struct symbolizer *s, size_t index, uintptr_t pc, const struct line_out *o)
{
    struct hs_backtrace_printer *p = s->printer;
    struct frame_desc d;
    if (!p || pc == 0) {
        describe_frame(s, pc, &d);
        if (d.kind == FRAME_UNKNOWN)
            put_line(o, "          #%02zu  pc %016lx  <unknown>", index, d.rel_pc);
        else if (d.kind == FRAME_NAMED)
            put_line(o, "          #%02zu  pc %016lx  %s%s (%s+%lu)", index, d.rel_pc, d.path,
                     d.suffix, d.name, d.offset);
        else
            put_line(o, "          #%02zu  pc %016lx  %s%s", index, d.rel_pc, d.path, d.suffix);
        return;
    }
    uintptr_t key = pc;
    const struct memo_entry *e = memo_table_find(&p->memo, &key);
    if (e) {
        put_line(o, "          #%02zu  pc %.*s", index, (int)e->len, e->text);
        return;
    }
    char text[HS_LOG_LINE_MAX];
    describe_frame(s, pc, &d);
    size_t len = frame_text(&d, text, sizeof(text));
    put_line(o, "          #%02zu  pc %.*s", index, (int)len, text);
    if (memo_table_reserve(&p->memo, 1)) {
        const char *copy = memo_store_text(p, text, len);
        if (copy)
            memo_table_put(&p->memo, &(struct memo_entry){key, copy, (uint32_t)len});
    }
}

static void put_frames(struct hs_backtrace_printer *p, const uintptr_t *frames, size_t n,
                       const struct line_out *o)
{
    if (n == 0) {
        put_line(o, "  Backtrace failed to get any frames.");
        return;
    }
    int saved_errno = errno;
    if (p) {
        for (size_t i = 0; i < n; i++)
            put_frame(&p->sym, i, frames[i], o);
    } else {
        struct symbolizer s;
        s.have_map = false;
        s.printer = NULL;
        hs_elf_cache_init(&s.files);
        for (size_t i = 0; i < n; i++)
            put_frame(&s, i, frames[i], o);
        hs_elf_cache_close(&s.files);
    }
    errno = saved_errno;
}

void hs_backtrace_format(const uintptr_t *frames, size_t n,
                         void (*emit)(const char *line, size_t len, void *ctx), void *ctx)
{
    struct line_out o = {emit, ctx};
    if (emit)
        put_frames(NULL, frames, n, &o);
}

void hs_backtrace_log(const uintptr_t *frames, size_t n)
{
    struct line_out o = {NULL, NULL};
    put_frames(NULL, frames, n, &o);
}

void hs_backtrace_printer_log(struct hs_backtrace_printer *p, const uintptr_t *frames, size_t n)
{
    struct line_out o = {NULL, NULL};
    put_frames(p, frames, n, &o);
}

void hs_backtrace_printer_format(struct hs_backtrace_printer *p, const uintptr_t *frames,
                                 size_t n, void (*emit)(const char *line, size_t len, void *ctx),
                                 void *ctx)
{
    struct line_out o = {emit, ctx};
    if (emit)
        put_frames(p, frames, n, &o);
}
