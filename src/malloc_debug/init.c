/* init.c: deciding, once per process, whether malloc debug is on and with what options.
 *
 * Runs inside the first allocation call of the process (possibly before libc has finished
 * its own start-up) or in the library constructor, whichever comes first. It reads
 * LIBC_DEBUG_MALLOC_OPTIONS and LIBC_DEBUG_MALLOC_PROGRAM without allocating (or, when the
 * environment sets no options, the system setting: system_setting.h), parses the options,
 * and publishes the mode. Any problem leaves the shim a pass-through.
 */
#define _GNU_SOURCE
#include "backtrace_table.h"
#include "debug_state.h"
#include "pointer_table.h"
#include "suppress.h"
#include "embedding.h"
#include "free_queue.h"
#include "guarded.h"
#include "header.h"
#include "heap_dump.h"
#include "hs_assert.h"
#include "requests.h"
#include "unreachable_trigger.h"
#include "libc_malloc.h"
#include "record_allocs.h"
#include "system_setting.h"

#include "backtrace.h"
#include "capture_gate.h"
#include "env.h"
#include "log.h"
#include "proc_maps.h"

#include <dlfcn.h>
#include <pthread.h>
#include <sched.h>
#include <string.h>

struct hs_md_state hs_md;
struct hs_arena hs_md_arena;
__thread int hs_md_in_shim __attribute__((tls_model("initial-exec")));

static size_t (*g_libc_usable_size)(void *);

/* glibc's chunk layout, used only if dlsym cannot find malloc_usable_size: the size word
 * sits just before the pointer; mmapped chunks (bit 1) have one word less of payload. */
static size_t chunk_usable_size(void *ptr)
{
    size_t word = ((size_t *)ptr)[-1];
    size_t chunk = word & ~(size_t)7;
    return chunk - ((word & 2) ? 2 : 1) * sizeof(size_t);
}

size_t hs_md_libc_usable_size(void *ptr)
{
    return g_libc_usable_size(ptr);
}

struct self_range {
    const char *path;
    uintptr_t start, end;
};

static int widen_self_range(const struct hs_map *m, void *arg)
{
    struct self_range *r = arg;
    if (strcmp(m->path, r->path) == 0) {
        if (r->start == 0 || m->start < r->start)
            r->start = m->start;
        if (m->end > r->end)
            r->end = m->end;
    }
    return 0;
}

/* Finds the address range of this library, whose frames are dropped from backtraces. */
static void find_self_range(void)
{
    struct hs_map self;
    if (!hs_maps_find(0, (uintptr_t)&find_self_range, &self))
        return;
    size_t len = strnlen(self.path, sizeof(hs_md.self_path) - 1);
    memcpy(hs_md.self_path, self.path, len);
    hs_md.self_path[len] = '\0';
    struct self_range r = {self.path, 0, 0};
    hs_maps_foreach(0, widen_self_range, &r);
    hs_md.self_start = r.start;
    hs_md.self_end = r.end;
}

static bool only_whitespace(const char *s)
{
    for (; *s; s++)
        if (*s != ' ' && *s != '\t' && *s != '\n' && *s != '\r' && *s != '\f' && *s != '\v')
            return false;
    return true;
}

/* The system setting (system_setting.h), read when the environment sets no options; NULL
 * when there is none, or after saying (once: configure runs once per process) why it is
 * unusable. */
static const struct hs_md_setting *read_system_setting(void)
{
    static struct hs_md_setting setting; /* static: 8 KiB, and the first malloc's stack */
    char why[512];
    switch (hs_md_setting_read(hs_md_setting_path, &setting, why, sizeof(why))) {
    case HS_MD_SETTING_OK:
        return &setting;
    case HS_MD_SETTING_BAD:
        hs_log("%s: %s; malloc debug stays off", hs_log_program_name(), why);
        return NULL;
    default:
        return NULL;
    }
}

static int configure(void)
{
    hs_log_init("malloc_debug");
    g_libc_usable_size = (size_t(*)(void *))dlsym(RTLD_NEXT, "malloc_usable_size");
    if (!g_libc_usable_size)
        g_libc_usable_size = chunk_usable_size;

    static char options[8192];
    ssize_t len = hs_env_get("LIBC_DEBUG_MALLOC_OPTIONS", options, sizeof(options));
    const struct hs_md_setting *setting = NULL;
    if (len < 0 && hs_md_embedding.default_options) {
        len = (ssize_t)strnlen(hs_md_embedding.default_options, sizeof(options) - 1);
        memcpy(options, hs_md_embedding.default_options, (size_t)len);
        options[len] = '\0';
    } else if (len < 0 && !hs_md_embedding.embedded) {
        setting = read_system_setting();
        if (setting && setting->options) {
            len = (ssize_t)strnlen(setting->options, sizeof(options) - 1);
            memcpy(options, setting->options, (size_t)len);
            options[len] = '\0';
        }
    }
    if (len < 0 || only_whitespace(options)) {
        if (len < (ssize_t)sizeof(options))
            return HS_MD_PASSTHROUGH;
        hs_log("%s: LIBC_DEBUG_MALLOC_OPTIONS is longer than %zu bytes; malloc debug stays off",
               hs_log_program_name(), sizeof(options) - 1);
        return HS_MD_PASSTHROUGH;
    }

    char program[256];
    len = hs_env_get("LIBC_DEBUG_MALLOC_PROGRAM", program, sizeof(program));
    if (len < 0 && setting && setting->program) {
        len = (ssize_t)strnlen(setting->program, sizeof(program) - 1);
        memcpy(program, setting->program, (size_t)len);
        program[len] = '\0';
    }
    if (len > 0 && (len >= (ssize_t)sizeof(program) || strcmp(program, hs_log_program_name()) != 0))
        return HS_MD_PASSTHROUGH;
    /* This process runs under the setting: its reports (and an error in its options) go to
     * the setting's log file, unless the environment names one. */
    if (setting && setting->log_file)
        hs_log_set_file_pattern(setting->log_file);

    if (!hs_md_config_parse(&hs_md.cfg, options))
        return HS_MD_PASSTHROUGH;
    const struct hs_md_config *cfg = &hs_md.cfg;
    if ((cfg->options & ~(uint32_t)HS_OPT_SAMPLE_GUARD_RECOVER) == 0)
        return HS_MD_PASSTHROUGH; /* nothing on (sample_guard_recover alone only tunes) */

    hs_md_suppressions_load();
    hs_md.header = (cfg->options & HS_OPT_HEADER_OPTIONS) != 0;
    hs_md.track = (cfg->options & HS_OPT_TRACK_OPTIONS) != 0;
    hs_md.backtrace_on = cfg->backtrace_enabled;
    if (cfg->options & HS_OPT_FREE_TRACK)
        hs_md_free_queue_init(cfg->free_track_allocations, cfg->free_track_backtrace_num_frames);
    hs_md_bt_cache_enable();
    hs_md.extra_bytes = (cfg->options & HS_OPT_EXPAND_ALLOC) ? cfg->expand_alloc_bytes : 0;
    if (hs_md.header)
        hs_md.extra_bytes += hs_md_user_offset() + cfg->rear_guard_bytes;
    hs_md.guarded_extra_bytes = hs_md.extra_bytes;
    /* glibc's pointer to the chunk after a block (the top of the heap, a free chunk) points
     * at that chunk's header, which overlaps the last 8 bytes of the block's usable space.
     * With the tables scanned conservatively (the unreachable-memory detector), that pointer
     * must not fall inside the requested bytes: 8 bytes of slack keep it past them. */
    if (hs_md.track)
        hs_md.extra_bytes += 8;
    /* The pointer table's record of a block: in the link area (no glibc link is there while
     * the block is live), or in 16 bytes in front of a block without a header. */
    if (hs_md.track) {
        hs_md.track_offset = hs_md.header ? hs_md_user_offset() : HS_MD_TRACK_RECORD;
        hs_md.track_lead = hs_md.header ? 0 : HS_MD_TRACK_RECORD;
    }
    find_self_range();
    /* Warm libunwind up now: its first capture on a thread sets up caches, and doing that
     * here rather than inside a report keeps reports free of surprises. */
    uintptr_t frame;
    hs_backtrace_capture(&frame, 1, 0);

    hs_md_guarded_init(cfg);

    if (cfg->options & HS_OPT_VERBOSE)
        hs_log("%s: malloc debug enabled", hs_log_program_name());
    hs_md_requests_init();
    hs_md_heap_dump_init();
    /* A child forked while other threads allocate must find every lock free. Prepare
     * handlers run in reverse order of registration: first record_allocs' (frees holding a
     * place in its table finish, and may capture a stack meanwhile), then the capture gate's
     * (captures in flight finish, so the unwinder's locks are free; a capture needs none of
     * the shim's locks), then the shim's own locks. */
    pthread_atfork(hs_md_lock_everything, hs_md_unlock_everything,
                   hs_md_unlock_everything_in_child);
    pthread_atfork(hs_capture_gate_fork_prepare, hs_capture_gate_fork_parent,
                   hs_capture_gate_fork_child);
    if (cfg->options & HS_OPT_RECORD_ALLOCS) {
        if (!hs_md_record_init(cfg))
            return HS_MD_PASSTHROUGH;
        /* Registered last so that its prepare handler runs first: frees holding a place in
         * the table finish before the other locks are taken. */
        pthread_atfork(hs_md_record_lock, hs_md_record_unlock, hs_md_record_unlock);
    }
    /* sample_guard alone (what production runs): glibc straight from the entry points but
     * for the drawn calls, with glibc's semantics. Any other option (or a pool that could not
     * be reserved) is the debug mode, with Android's. */
    const uint32_t sampling_only =
        HS_OPT_SAMPLE_GUARD | HS_OPT_SAMPLE_GUARD_RECOVER | HS_OPT_VERBOSE | HS_OPT_ABORT_ON_ERROR;
    if (hs_md.sample_guard && (cfg->options & ~sampling_only) == 0)
        return HS_MD_SAMPLING;
    const uint32_t not_lean = HS_OPT_HEADER_OPTIONS | HS_OPT_FILL_ON_ALLOC | HS_OPT_FILL_ON_FREE |
                              HS_OPT_FREE_TRACK | HS_OPT_RECORD_ALLOCS;
    hs_md.lean = hs_md.track && !(cfg->options & not_lean) && !hs_md.page_guard &&
                 !hs_md.sample_guard;
    const uint32_t free_only = HS_OPT_FILL_ON_FREE | HS_OPT_FREE_TRACK;
    hs_md.lean_malloc = hs_md.track && !(cfg->options & (not_lean & ~free_only)) &&
                        !hs_md.page_guard && !hs_md.sample_guard;
    const uint32_t fills = HS_OPT_FILL_ON_ALLOC | HS_OPT_FILL_ON_FREE;
    const uint32_t not_per_block =
        HS_OPT_VERBOSE | HS_OPT_ABORT_ON_ERROR | HS_OPT_CHECK_UNREACHABLE_ON_SIGNAL |
        HS_OPT_LOG_ALLOCATOR_STATS_ON_SIGNAL | HS_OPT_LOG_ALLOCATOR_STATS_ON_EXIT;
    hs_md.lean_fill = (cfg->options & fills) && !(cfg->options & ~(fills | not_per_block)) &&
                      !hs_md.page_guard && !hs_md.sample_guard;
    /* The short paths hand out glibc's blocks as they are: nothing may be added to them. */
    hs_assert(!hs_md.lean_fill || (hs_md.extra_bytes == 0 && !hs_md.header && !hs_md.track));
    return HS_MD_DEBUG;
}

int hs_md_init(void)
{
    int expected = HS_MD_UNINIT;
    if (__atomic_compare_exchange_n(&hs_md.mode, &expected, HS_MD_INITIALIZING, false,
                                    __ATOMIC_ACQUIRE, __ATOMIC_ACQUIRE)) {
        hs_md_in_shim++;
        /* The arena lists its mappings: the unreachable-memory check leaves the shim's own
         * memory out of its roots (heapscope_malloc_debug_own_memory). */
        hs_arena_track_mappings(&hs_md_arena);
        int mode = configure();
        __atomic_store_n(&hs_md.mode, mode, __ATOMIC_RELEASE);
        hs_md_in_shim--;
        return mode;
    }
    int mode;
    while ((mode = hs_md_mode_now()) == HS_MD_INITIALIZING)
        sched_yield();
    return mode;
}

/* True when this library's malloc is the one the program's calls reach. A copy embedded in
 * libmemunreachable.so is not when libmalloc_debug.so is preloaded (the preload comes first
 * in symbol lookup): it then stays off and the preloaded copy serves both. */
static bool is_the_programs_malloc(void)
{
    return dlsym(RTLD_DEFAULT, "malloc") == (void *)hs_md_self_malloc;
}

/* Initialise at load time too, so "malloc debug enabled" appears even in a program that
 * never allocates, and start what needs threads (libc is fully up here). */
__attribute__((constructor)) static void hs_md_constructor(void)
{
    if (hs_md_mode_now() == HS_MD_UNINIT) {
        int expected = HS_MD_UNINIT;
        if (hs_md_embedding.embedded && !is_the_programs_malloc() &&
            __atomic_compare_exchange_n(&hs_md.mode, &expected, HS_MD_PASSTHROUGH, false,
                                        __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE))
            return;
        hs_md_init();
    }
    if (hs_md_mode_now() == HS_MD_DEBUG)
        hs_md_unreachable_trigger_start();
}
