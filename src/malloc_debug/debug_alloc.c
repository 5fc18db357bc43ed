/* debug_alloc.c: malloc, free, realloc and friends with malloc debug on.
 *
 * Without a guard the block is glibc's own (plus expand_alloc bytes) and only the fills
 * apply. With a guard every block carries the header of header.h: its tag is checked on
 * free, realloc and malloc_usable_size, its guards on free and realloc. With a tracking
 * option (backtrace, leak_track, free_track, verify_pointers) every live block is in the
 * pointer table, with its allocation backtrace, and pointers the table does not know are
 * reported. With free_track, freed blocks wait in the free queue.
 *
 * With page_guard (every block) or sample_guard (a drawn block) the block comes from guarded
 * memory instead of glibc (guarded.h), with or without a header; every pointer is first
 * checked against guarded memory, so that nothing touches a freed block's PROT_NONE pages.
 *
 * Calls made while the shim's own code runs (hs_md_in_shim: reports, backtrace capture)
 * take the same paths but capture no backtraces, so nothing recurses.
 *
 * Out of memory (the shim's arena cannot map more): a block the pointer table cannot record
 * is given back and the allocation fails with ENOMEM, as under memory pressure; an untracked
 * block would be reported as an UNKNOWN POINTER when freed, and never freed. An entry taken
 * out of the table goes back into the slot it left (hs_md_ptr_restore: no memory needed). One
 * case cannot be undone: glibc's realloc moved the block (the old one is gone) to an address
 * the table has no room for. The block then moves once more, to a tracked allocation; failing
 * that, it stays untracked, and from then on the shim no longer reports pointers it does not
 * know (one of them may be that block): a lost check, never a false report.
 */
#include "debug_alloc.h"

#include "backtrace.h"
#include "capture.h"
#include "debug_state.h"
#include "free_queue.h"
#include "guard.h"
#include "guarded.h"
#include "header.h"
#include "heap_dump.h"
#include "libc_malloc.h"
#include "log.h"
#include "pointer_table.h"
#include "pointer_table_fast.h"
#include "proc_maps.h"
#include "report.h"
#include "requests.h"

#include <errno.h>
#include <stdbool.h>
#include <string.h>
#include <unistd.h>

static inline bool is_power_of_two(size_t v)
{
    return v != 0 && (v & (v - 1)) == 0;
}

static inline size_t min_size(size_t a, size_t b)
{
    return a < b ? a : b;
}

/* Android's fills of a block of `usable` bytes: fill_on_alloc on a new one, fill_on_free on a
 * freed one, each capped at its N (fill_on_alloc=N, fill_on_free=N). The callers test the
 * option. */
static inline void fill_new_block(void *p, size_t usable)
{
    memset(p, hs_md.cfg.fill_alloc_value, min_size(usable, hs_md.cfg.fill_on_alloc_bytes));
}

static inline void fill_freed_block(void *p, size_t usable)
{
    memset(p, hs_md.cfg.fill_free_value, min_size(usable, hs_md.cfg.fill_on_free_bytes));
}

static void *fail_enomem(void)
{
    errno = ENOMEM;
    return NULL;
}

/* Every frame of the shim is unwound on each capture, so the helpers of the allocation
 * path are forced inline: the fewer shim frames, the cheaper a backtrace. */
#define HS_INLINE static inline __attribute__((always_inline))

/* The allocation backtrace for a new block of `size` bytes, or NULL when not wanted. */
HS_INLINE struct hs_md_bt *capture_alloc_backtrace(size_t size)
{
    const struct hs_md_config *cfg = &hs_md.cfg;
    if (!(cfg->options & HS_OPT_BACKTRACE) || hs_md_in_shim ||
        !__atomic_load_n(&hs_md.backtrace_on, __ATOMIC_RELAXED) || size < cfg->backtrace_min_size ||
        size > cfg->backtrace_max_size)
        return NULL;
    uintptr_t frames[HS_BACKTRACE_MAX_FRAMES];
    hs_md_in_shim++;
    size_t n = hs_md_capture(frames, cfg->backtrace_frames);
    hs_md_in_shim--;
    struct hs_md_bt *bt = hs_md_bt_acquire(frames, n);
    if (__builtin_expect(!bt && n, 0))
        hs_md_note_out_of_memory(); /* the block is tracked without its backtrace */
    return bt;
}

/* Queues a freed block that is not guarded with its free backtrace (free_queue.h keeps the
 * frames themselves). */
HS_INLINE void queue_freed_block(void *ptr, void *orig, size_t usable)
{
    size_t max = hs_md.cfg.free_track_backtrace_num_frames;
    uintptr_t frames[HS_BACKTRACE_MAX_FRAMES];
    size_t n = 0;
    if (max != 0 && !hs_md_in_shim) {
        hs_md_in_shim++;
        n = hs_md_capture(frames, max);
        hs_md_in_shim--;
    }
    hs_md_free_queue_push(ptr, orig, usable, frames, n, NULL);
}

/* The allocation backtrace of a block of `size` bytes: guard_bt, the backtrace a guarded
 * block was given (or NULL), is shared rather than captured twice: it has the same frames. */
HS_INLINE struct hs_md_bt *alloc_backtrace(size_t size, struct hs_md_bt *guard_bt)
{
    struct hs_md_bt *bt = NULL;
    if (guard_bt && (hs_md.cfg.options & HS_OPT_BACKTRACE) &&
        __atomic_load_n(&hs_md.backtrace_on, __ATOMIC_RELAXED) &&
        size >= hs_md.cfg.backtrace_min_size && size <= hs_md.cfg.backtrace_max_size) {
        hs_md_bt_ref(guard_bt);
        bt = guard_bt;
    } else {
        bt = capture_alloc_backtrace(size);
    }
    return bt;
}

/* The bytes in front of a glibc block without a header, for its record (pointer_table.h):
 * 16, or the alignment when memalign asks for more, so that the user pointer stays aligned.
 * 0 without a tracking option. A power of two. */
HS_INLINE size_t plain_lead(size_t alignment)
{
    size_t lead = hs_md.track_lead;
    return lead && alignment > lead ? alignment : lead;
}

static inline unsigned lead_shift_of(size_t lead)
{
    return lead ? (unsigned)__builtin_ctzl(lead) : 0;
}

/* The lead of a tracked block from its entry (0 for a block with a header or a guarded one,
 * whose entries say 0). */
static inline size_t lead_of(const struct hs_md_ptr_info *info)
{
    return info->lead_shift ? (size_t)1 << info->lead_shift : 0;
}

/* Adds a new block to the pointer table (see alloc_backtrace for guard_bt; lead: see
 * plain_lead). False when the table could not record it: the caller must not hand the
 * block out. */
HS_INLINE bool track(void *p, size_t size, struct hs_md_bt *guard_bt, size_t lead)
{
    if (!hs_md.track)
        return true;
    struct hs_md_ptr_info info = {size, alloc_backtrace(size, guard_bt), lead_shift_of(lead), false, 0};
    if (__builtin_expect(hs_md_ptr_add(p, &info), 1))
        return true;
    hs_md_bt_release(info.bt);
    hs_md_note_out_of_memory();
    return false;
}

/* A guarded block (guarded.h) holding a header and user data of `size` bytes, or NULL. */
static void *guarded_header_alloc(size_t size, size_t alignment, bool zero, struct hs_md_bt *bt)
{
    size_t total;
    if (__builtin_add_overflow(size, hs_md.guarded_extra_bytes, &total))
        return NULL;
    size_t offset = hs_md_user_offset();
    void *orig = hs_md_guarded_alloc(total, alignment, offset, zero, true, bt);
    if (!orig)
        return NULL;
    uint8_t *user = (uint8_t *)orig + offset;
    size_t orig_usable = (hs_md.cfg.options & HS_OPT_REAR_GUARD) ? 0 : total;
    void *p = hs_md_header_init(hs_md_header_of(user), orig, orig_usable, size);
    hs_md_guarded_set_user(orig, p, size);
    return p;
}

/* Allocates a block with header and guards; alignment is a power of two >= 16. guarded:
 * try guarded memory first (bt: its allocation backtrace). */
HS_INLINE void *header_alloc(size_t size, size_t alignment, bool zero, bool guarded,
                             struct hs_md_bt *bt)
{
    if (guarded) {
        void *p = guarded_header_alloc(size, alignment, zero, bt);
        if (p)
            return p;
    }
    size_t slack = alignment > HS_MD_MIN_ALIGNMENT ? alignment : 0;
    size_t total;
    if (__builtin_add_overflow(size, hs_md.extra_bytes, &total) ||
        __builtin_add_overflow(total, slack, &total))
        return fail_enomem();
    void *orig = zero ? __libc_calloc(1, total) : __libc_malloc(total);
    if (!orig)
        return NULL;
    uintptr_t user = (uintptr_t)orig + hs_md_user_offset();
    user = (user + alignment - 1) & ~(uintptr_t)(alignment - 1);
    size_t orig_usable = (hs_md.cfg.options & HS_OPT_REAR_GUARD) ? 0 : hs_md_libc_usable_size(orig);
    return hs_md_header_init(hs_md_header_of((void *)user), orig, orig_usable, size);
}

/* Block without header: expand_alloc is added, and *lead bytes in front of it for its
 * record (plain_lead; a guarded block keeps its record elsewhere: *lead becomes 0).
 * guarded: try guarded memory first. */
HS_INLINE void *plain_alloc(size_t size, size_t alignment, bool zero, bool guarded,
                            struct hs_md_bt *bt, size_t *lead)
{
    size_t total;
    if (guarded && !__builtin_add_overflow(size, hs_md.guarded_extra_bytes, &total)) {
        void *p = hs_md_guarded_alloc(total, alignment, 0, zero, true, bt);
        if (p) {
            hs_md_guarded_set_user(p, p, size);
            *lead = 0;
            return p;
        }
    }
    if (__builtin_add_overflow(size, hs_md.extra_bytes, &total) ||
        __builtin_add_overflow(total, *lead, &total))
        return fail_enomem();
    char *orig;
    if (alignment > HS_MD_MIN_ALIGNMENT)
        orig = __libc_memalign(alignment, total); /* the lead is the alignment: user aligned */
    else
        orig = zero ? __libc_calloc(1, total) : __libc_malloc(total);
    return orig ? orig + *lead : NULL;
}

/* What malloc_usable_size says of a live block (lead: of a block without a header). */
HS_INLINE size_t usable_size(void *ptr, size_t lead)
{
    if (hs_md.header)
        return hs_md_header_of(ptr)->usable_size;
    return hs_md_backing_usable_size((char *)ptr - lead) - lead;
}

/* With sample_guard: whether this allocation is drawn for a guarded slot (the countdown). */
HS_INLINE bool sample_drawn(void)
{
    return hs_md.sample_guard && !hs_md_sample_skip() && hs_md_sample_due();
}

/* Gives back a new block that cannot be handed out (track failed): guarded or glibc's, with
 * or without a header (lead: see plain_alloc). */
static void discard_new_block(void *p, size_t lead)
{
    struct hs_md_gblock *g;
    if (hs_md_guarded_owns((uintptr_t)p) &&
        hs_md_guarded_check(p, "malloc", true, &g) == HS_MD_GUARDED_LIVE) {
        hs_md_guarded_release(g, NULL);
        return;
    }
    if (hs_md.header) {
        struct hs_md_header *h = hs_md_header_of(p);
        h->tag = HS_MD_TAG_FREED;
        __libc_free(h->orig_pointer);
    } else {
        __libc_free((char *)p - lead);
    }
}

/* sample: this allocation was drawn for sample_guard (page_guard guards every one). */
HS_INLINE void *debug_alloc_drawn(size_t size, size_t alignment, bool zero, bool sample)
{
    hs_md_serve_requests();
    hs_md_heap_dump_if_requested();
    if (size == 0)
        size = 1;
    bool guarded = hs_md.page_guard || sample;
    struct hs_md_bt *guard_bt = guarded ? hs_md_guarded_capture() : NULL;
    size_t lead = hs_md.header ? 0 : plain_lead(alignment);
    void *p = hs_md.header ? header_alloc(size, alignment, zero, guarded, guard_bt)
                           : plain_alloc(size, alignment, zero, guarded, guard_bt, &lead);
    if (p) {
        if (!zero && (hs_md.cfg.options & HS_OPT_FILL_ON_ALLOC))
            fill_new_block(p, usable_size(p, lead));
        if (__builtin_expect(!track(p, size, guard_bt, lead), 0)) {
            discard_new_block(p, lead);
            p = fail_enomem();
        }
    }
    if (guard_bt) /* (a NULL test here saves a call on every allocation) */
        hs_md_bt_release(guard_bt);
    return p;
}

HS_INLINE void *debug_alloc(size_t size, size_t alignment, bool zero)
{
    return debug_alloc_drawn(size, alignment, zero, sample_drawn());
}

/* True when the header in front of a pointer the table does not know is readable and says
 * "freed" (a double free after the block went back to glibc). Error path only: it reads
 * /proc/self/maps first, because a wild pointer's header may not be mapped. */
static bool header_says_freed(const void *ptr)
{
    uintptr_t h = (uintptr_t)hs_md_header_of(ptr);
    struct hs_map m;
    if (h > (uintptr_t)ptr || !hs_maps_find(0, h, &m) || !(m.perms & HS_MAP_READ) ||
        h + sizeof(struct hs_md_header) > m.end)
        return false;
    return ((const struct hs_md_header *)h)->tag == HS_MD_TAG_FREED;
}

/* Blocks handed out that the table could not record (see the top of this file); atomic. */
static size_t g_untracked;

/* Counts a block that goes out untracked; its entry's backtrace (if any) is dropped. */
static void lose_track(struct hs_md_bt *bt)
{
    hs_md_bt_release(bt);
    if (__atomic_fetch_add(&g_untracked, 1, __ATOMIC_RELAXED) == 0)
        hs_log("%s: malloc debug could not record a block glibc's realloc moved (out of memory "
               "for its own tables): pointers it does not know are no longer reported",
               hs_log_program_name());
}

/* Puts back the entry of a block that stays (its old entry, or a new one for it). */
static void keep_tracked(void *ptr, const struct hs_md_ptr_info *info)
{
    if (!hs_md_ptr_restore(ptr, info))
        lose_track(info->bt);
}

/* Reports a pointer that is not a live allocation; free_track may know it was freed. */
static void report_not_live(void *ptr, const char *function, bool known_freed)
{
    struct hs_md_bt *free_bt = NULL;
    bool queued = (hs_md.cfg.options & HS_OPT_FREE_TRACK) && hs_md_free_queue_find(ptr, &free_bt);
    if (known_freed || queued)
        hs_md_report_pointer_error(ptr, "USED AFTER FREE", function, free_bt);
    else
        hs_md_report_pointer_error(ptr, "UNKNOWN POINTER", function, NULL);
    hs_md_bt_release(free_bt);
}

/* The header and pointer-table part of verify_pointer. */
HS_INLINE bool verify_tracked(void *ptr, const char *function, bool take, struct hs_md_ptr_info *info)
{
    /* With the pointer table, ask it first: then a wild pointer is reported without reading
     * the memory in front of it, which may not be mapped. */
    if (hs_md.track) {
        bool live = take ? hs_md_ptr_remove(ptr, info) : hs_md_ptr_find(ptr, info);
        if (__builtin_expect(!live, 0)) {
            /* After a block went out untracked, an unknown pointer may be that block: it is
             * left alone, neither reported nor freed. */
            if (!__atomic_load_n(&g_untracked, __ATOMIC_RELAXED))
                report_not_live(ptr, function, hs_md.header && header_says_freed(ptr));
            return false;
        }
        /* The record in front of the block was overwritten: reported as Android reports a
         * header with a bad tag; the block stays as it is (and in the table). */
        if (__builtin_expect(info->damaged, 0)) {
            hs_md_report_invalid_tag(ptr, info->tag, function);
            info->bt = NULL;
            return false;
        }
    }
    if (hs_md.header) {
        uint32_t tag = hs_md_header_of(ptr)->tag;
        if (__builtin_expect(tag != HS_MD_TAG_LIVE, 0)) {
            if (tag == HS_MD_TAG_FREED)
                report_not_live(ptr, function, true);
            else
                hs_md_report_invalid_tag(ptr, tag, function);
            if (take && hs_md.track) /* the block stays as it was */
                keep_tracked(ptr, info);
            info->bt = NULL;
            return false;
        }
    }
    return true;
}

/* Checks that ptr is a live allocation for `function`: guarded memory, header tag, then the
 * pointer table (from which `take` removes it, handing its entry to *info; a guarded block is
 * then claimed, *g its record). Reports and returns false otherwise. */
HS_INLINE bool verify_pointer(void *ptr, const char *function, bool take,
                              struct hs_md_ptr_info *info, struct hs_md_gblock **g)
{
    *info = (struct hs_md_ptr_info){.size = 0};
    if (hs_md_guarded_check(ptr, function, take, g) == HS_MD_GUARDED_REPORTED)
        return false;
    if (!verify_tracked(ptr, function, take, info)) {
        if (take)
            hs_md_guarded_unclaim(*g);
        *g = NULL;
        return false;
    }
    return true;
}

/* Frees a verified pointer (already out of the pointer table; info is its entry; g its
 * claimed record when it is guarded). */
HS_INLINE void release(void *ptr, struct hs_md_ptr_info *info, struct hs_md_gblock *g)
{
    const uint32_t options = hs_md.cfg.options;
    void *orig = ptr;
    size_t usable = 0;
    if (hs_md.header) {
        struct hs_md_header *h = hs_md_header_of(ptr);
        h->tag = HS_MD_TAG_FREED;
        orig = h->orig_pointer;
        usable = h->usable_size;
    } else {
        size_t lead = lead_of(info);
        orig = (char *)ptr - lead;
        if (options & (HS_OPT_FILL_ON_FREE | HS_OPT_FREE_TRACK))
            usable = hs_md_backing_usable_size(orig) - lead;
    }
    if (options & HS_OPT_FILL_ON_FREE)
        fill_freed_block(ptr, usable);
    if (info->bt)
        hs_md_bt_release(info->bt);
    if (options & HS_OPT_FREE_TRACK) {
        /* A guarded block stays claimed in the queue; it is freed when it leaves it. */
        if (g)
            hs_md_free_queue_push(ptr, orig, usable, NULL, 0, hs_md_guarded_capture());
        else
            queue_freed_block(ptr, orig, usable);
    } else if (g) {
        struct hs_md_bt *free_bt = hs_md_guarded_capture();
        hs_md_guarded_release(g, free_bt);
        hs_md_bt_release(free_bt);
    } else {
        __libc_free(orig);
    }
}

/* The short paths (hs_md.lean: only the pointer table and backtraces are on). They do what
 * debug_alloc and hs_md_debug_free do for such a configuration, minus the checks that cannot
 * apply: no header, no guarded memory, no fill, no free queue. lean_malloc also serves
 * hs_md.lean_malloc (free_track, fill_on_free: options of the free path only). */

/* traced: with the allocation backtrace; zero: calloc's (constants: each caller gets its own
 * copy, the untraced ones without the capture's frame array, and with the table's add
 * inline). */
HS_INLINE void *lean_alloc(size_t size, bool traced, bool zero)
{
    hs_md_serve_requests();
    hs_md_heap_dump_if_requested();
    if (size == 0)
        size = 1;
    size_t total;
    if (__builtin_add_overflow(size, hs_md.extra_bytes + HS_MD_TRACK_RECORD, &total))
        return fail_enomem();
    char *orig = zero ? __libc_calloc(1, total) : __libc_malloc(total);
    if (!orig)
        return NULL;
    char *p = orig + HS_MD_TRACK_RECORD; /* the record in front (hs_md.track_lead) */
    struct hs_md_ptr_info untraced = {.size = size,
                                      .lead_shift = lead_shift_of(HS_MD_TRACK_RECORD)};
    bool added =
        traced ? track(p, size, NULL, HS_MD_TRACK_RECORD) : hs_md_ptr_add_inline(p, &untraced);
    if (__builtin_expect(!added, 0)) {
        __libc_free(orig); /* the table could not record it: the allocation fails (top of file) */
        if (!traced)
            hs_md_note_out_of_memory(); /* (track says it itself) */
        return fail_enomem();
    }
    return p;
}

void *hs_md_lean_malloc_untraced(size_t size)
{
    return lean_alloc(size, false, false);
}

void *hs_md_lean_malloc_traced(size_t size)
{
    return lean_alloc(size, true, false);
}

void *hs_md_lean_calloc(size_t nmemb, size_t size)
{
    size_t total;
    if (__builtin_mul_overflow(nmemb, size, &total))
        return fail_enomem();
    return (hs_md.cfg.options & HS_OPT_BACKTRACE) ? lean_alloc(total, true, true)
                                                  : lean_alloc(total, false, true);
}

/* lean_free's rare cases, out of line: a pointer the table does not know, a damaged record. */
static __attribute__((noinline)) void
lean_free_rejected(void *ptr, const struct hs_md_ptr_info *info, bool live)
{
    if (!live) {
        /* As verify_tracked: after a block went out untracked it is left alone. */
        if (!__atomic_load_n(&g_untracked, __ATOMIC_RELAXED))
            report_not_live(ptr, "free", false);
        return; /* after a bad pointer free does nothing */
    }
    hs_assert(info->damaged);
    hs_md_report_invalid_tag(ptr, info->tag, "free"); /* as verify_tracked */
}

void hs_md_lean_free(void *ptr)
{
    hs_md_serve_requests();
    hs_md_heap_dump_if_requested();
    if (!ptr)
        return;
    struct hs_md_ptr_info info;
    bool live = hs_md_ptr_remove_inline(ptr, &info);
    if (__builtin_expect(!live || info.damaged, 0)) {
        lean_free_rejected(ptr, &info, live);
        return;
    }
    if (info.bt)
        hs_md_bt_release(info.bt);
    __libc_free((char *)ptr - lead_of(&info));
}

/* The fill-only short paths (hs_md.lean_fill): the block is glibc's as it is (no lead, no
 * header, no table entry), so they do what debug_alloc and hs_md_debug_free do for such a
 * configuration with none of the checks that cannot apply. realloc and the aligned calls
 * keep the general path, which gives and takes the same blocks. */

void *hs_md_fill_malloc(size_t size)
{
    hs_md_serve_requests();
    void *p = __libc_malloc(size ? size : 1);
    if (p && (hs_md.cfg.options & HS_OPT_FILL_ON_ALLOC))
        fill_new_block(p, hs_md_libc_usable_size(p));
    return p;
}

void *hs_md_fill_calloc(size_t nmemb, size_t size)
{
    hs_md_serve_requests();
    size_t total;
    if (__builtin_mul_overflow(nmemb, size, &total))
        return fail_enomem();
    return __libc_calloc(1, total ? total : 1); /* zeroed: fill_on_alloc leaves calloc alone */
}

void hs_md_fill_free(void *ptr)
{
    hs_md_serve_requests();
    if (!ptr)
        return;
    if (hs_md.cfg.options & HS_OPT_FILL_ON_FREE)
        fill_freed_block(ptr, hs_md_libc_usable_size(ptr));
    __libc_free(ptr);
}

void *hs_md_debug_malloc(size_t size)
{
    return debug_alloc(size, HS_MD_MIN_ALIGNMENT, false);
}

void hs_md_debug_free(void *ptr)
{
    hs_md_serve_requests();
    hs_md_heap_dump_if_requested();
    if (!ptr)
        return;
    struct hs_md_ptr_info info;
    struct hs_md_gblock *g;
    if (!verify_pointer(ptr, "free", true, &info, &g))
        return; /* after a bad pointer free does nothing */
    if (hs_md.header)
        hs_md_guards_check(hs_md_header_of(ptr), info.bt);
    release(ptr, &info, g);
}

void *hs_md_debug_calloc(size_t nmemb, size_t size)
{
    size_t total;
    if (__builtin_mul_overflow(nmemb, size, &total))
        return fail_enomem();
    return debug_alloc(total, HS_MD_MIN_ALIGNMENT, true);
}

/* Moves the block to a new allocation: allocate (sample: drawn for sample_guard), copy,
 * free the old one. */
static void *move_block(void *ptr, size_t size, size_t old_usable, bool sample)
{
    void *new_ptr = debug_alloc_drawn(size, HS_MD_MIN_ALIGNMENT, false, sample);
    if (!new_ptr)
        return NULL;
    memcpy(new_ptr, ptr, min_size(old_usable, size));
    struct hs_md_gblock *g;
    if (hs_md_guarded_check(ptr, "realloc", true, &g) == HS_MD_GUARDED_REPORTED)
        return new_ptr; /* another thread freed it meanwhile (reported) */
    struct hs_md_ptr_info info = {.size = 0};
    if (hs_md.track && hs_md_ptr_remove(ptr, &info) && info.damaged)
        return new_ptr; /* reported by the caller's check already; the block stays */
    release(ptr, &info, g);
    return new_ptr;
}

/* Replaces the table entry of a block that stays in place with its new size and backtrace
 * (in the slot the old entry leaves: no memory needed). */
static void retrack(void *ptr, size_t size)
{
    if (!hs_md.track)
        return;
    struct hs_md_ptr_info old = {.size = 0};
    hs_md_ptr_remove(ptr, &old);
    hs_md_bt_release(old.bt);
    struct hs_md_ptr_info info = {.size = size, .bt = alloc_backtrace(size, NULL),
                                  .lead_shift = old.lead_shift};
    keep_tracked(ptr, &info);
}

static void *header_realloc(void *ptr, size_t size, bool sample)
{
    struct hs_md_header *h = hs_md_header_of(ptr);
    hs_md_guards_check(h, NULL);
    if (size == h->size) {
        retrack(ptr, size);
        return ptr;
    }
    /* A guarded block moves: its end must touch its guard page again. */
    if (size < h->usable_size && !hs_md_guarded_owns((uintptr_t)ptr)) {
        /* Shrinking keeps the block; the rear guard moves to the new end. */
        h->size = size;
        if (hs_md.cfg.options & HS_OPT_REAR_GUARD) {
            h->usable_size = size;
            hs_md_rear_guard_write(h);
        }
        retrack(ptr, size);
        return ptr;
    }
    return move_block(ptr, size, h->usable_size, sample);
}

/* A block without a header; lead: its lead (see plain_alloc). */
static void *plain_realloc(void *ptr, size_t size, bool sample, size_t lead)
{
    size_t prev_usable = usable_size(ptr, lead);
    /* free_track: the old block must go to the free queue; guarded memory: the new block
     * needs a guard page of its own (and a guarded block cannot go to glibc's realloc); a
     * memalign block (a lead beyond the record) must keep its alignment. */
    if ((hs_md.cfg.options & HS_OPT_FREE_TRACK) || hs_md.page_guard || sample ||
        hs_md_guarded_owns((uintptr_t)ptr) || lead > hs_md.track_lead)
        return move_block(ptr, size, prev_usable, sample);
    size_t total;
    if (__builtin_add_overflow(size, hs_md.extra_bytes + lead, &total))
        return fail_enomem();
    /* Out of the table first: once glibc has freed the old block, another thread may get
     * its address and add it. */
    struct hs_md_ptr_info old = {.size = 0};
    if (hs_md.track)
        hs_md_ptr_remove(ptr, &old);
    char *new_orig = __libc_realloc((char *)ptr - lead, total);
    if (!new_orig) {
        if (hs_md.track)
            keep_tracked(ptr, &old);
        return NULL;
    }
    void *new_ptr = new_orig + lead;
    hs_md_bt_release(old.bt);
    if (hs_md.cfg.options & HS_OPT_FILL_ON_ALLOC) {
        size_t bytes =
            min_size(hs_md_libc_usable_size(new_orig) - lead, hs_md.cfg.fill_on_alloc_bytes);
        if (bytes > prev_usable)
            memset((char *)new_ptr + prev_usable, hs_md.cfg.fill_alloc_value, bytes - prev_usable);
    }
    if (!hs_md.track)
        return new_ptr;
    if (new_ptr == ptr) { /* in place: the slot the old entry left takes the new one */
        struct hs_md_ptr_info info = {.size = size, .bt = alloc_backtrace(size, NULL),
                                      .lead_shift = lead_shift_of(lead)};
        keep_tracked(ptr, &info);
        return ptr;
    }
    if (__builtin_expect(track(new_ptr, size, NULL, lead), 1))
        return new_ptr;
    /* Moved to where the table has no room, the old block gone: move it once more, to a
     * block the table records, or let it go untracked. */
    void *tracked = debug_alloc_drawn(size, HS_MD_MIN_ALIGNMENT, false, false);
    if (tracked) {
        memcpy(tracked, new_ptr, size);
        __libc_free(new_orig);
        return tracked;
    }
    lose_track(NULL);
    return new_ptr;
}

void *hs_md_debug_realloc(void *ptr, size_t size)
{
    if (!ptr)
        return hs_md_debug_malloc(size);
    if (size == 0) {
        hs_md_debug_free(ptr);
        return NULL;
    }
    hs_md_serve_requests();
    hs_md_heap_dump_if_requested();
    struct hs_md_ptr_info info;
    struct hs_md_gblock *g;
    if (!verify_pointer(ptr, "realloc", false, &info, &g))
        return NULL;
    if (size > SIZE_MAX - hs_md.extra_bytes - HS_MD_MIN_ALIGNMENT)
        return fail_enomem();
    bool sample = sample_drawn();
    return hs_md.header ? header_realloc(ptr, size, sample)
                        : plain_realloc(ptr, size, sample, lead_of(&info));
}

void *hs_md_debug_memalign(size_t alignment, size_t size)
{
    if (alignment < HS_MD_MIN_ALIGNMENT)
        alignment = HS_MD_MIN_ALIGNMENT;
    if (!is_power_of_two(alignment)) {
        /* Round up to the next power of two, as Android does. */
        if (alignment > (SIZE_MAX >> 1))
            return fail_enomem();
        alignment = (size_t)1 << (64 - __builtin_clzl(alignment));
    }
    return debug_alloc(size, alignment, false);
}

int hs_md_debug_posix_memalign(void **memptr, size_t alignment, size_t size)
{
    if (alignment < sizeof(void *) || !is_power_of_two(alignment))
        return EINVAL;
    int saved_errno = errno;
    *memptr = hs_md_debug_memalign(alignment, size);
    errno = saved_errno;
    return *memptr ? 0 : ENOMEM;
}

void *hs_md_debug_aligned_alloc(size_t alignment, size_t size)
{
    if (!is_power_of_two(alignment)) {
        errno = EINVAL;
        return NULL;
    }
    return hs_md_debug_memalign(alignment, size);
}

void *hs_md_debug_pvalloc(size_t size)
{
    size_t page = (size_t)getpagesize();
    size_t rounded = (size + page - 1) & ~(page - 1);
    if (rounded < size)
        return fail_enomem();
    return hs_md_debug_memalign(page, rounded);
}

size_t hs_md_debug_malloc_usable_size(void *ptr)
{
    if (!ptr)
        return 0;
    struct hs_md_ptr_info info;
    struct hs_md_gblock *g;
    if (!verify_pointer(ptr, "malloc_usable_size", false, &info, &g))
        return 0;
    return usable_size(ptr, lead_of(&info));
}
