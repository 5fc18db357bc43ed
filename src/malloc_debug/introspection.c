/* introspection.c: the allocator introspection API the shim exports (malloc_iterate,
 * malloc_disable, malloc_enable, malloc_backtrace), as bionic's, for the unreachable-memory
 * detector and for programs (declared in include/heapscope/malloc_debug.h).
 *
 * They need pointer tracking (any of backtrace, leak_track, free_track, verify_pointers):
 * glibc cannot list its own blocks. malloc_disable holds every lock of the shim, in the same
 * order as the fork handlers, so no tracked allocation or free can complete until
 * malloc_enable; malloc_iterate may then be called by the disabling thread.
 */
#include "backtrace_table.h"
#include "debug_state.h"
#include "free_queue.h"
#include "guarded.h"
#include "header.h"
#include "pointer_table.h"

#include "hs_assert.h"
#include "log.h"

#include <dlfcn.h>
#include <errno.h>
#include <stdint.h>
#include <string.h>
#include <sys/syscall.h>
#include <sys/types.h>
#include <unistd.h>

#define HS_EXPORT __attribute__((visibility("default")))

/* Thread id of the thread inside malloc_disable, 0 when enabled. */
static int g_disabled_by;

static int self_tid(void)
{
    return (int)syscall(SYS_gettid);
}

/* Lock order, everywhere: free queue, pointer table shards, backtrace table, arena, then the
 * guarded pools' locks (taken alone everywhere else). */
void hs_md_lock_everything(void)
{
    hs_md_free_queue_lock();
    hs_md_ptr_lock_all();
    hs_md_bt_lock();
    hs_arena_lock_all(&hs_md_arena);
    hs_md_guarded_lock();
}

static void unlock_all_but_free_queue(void)
{
    hs_md_guarded_unlock();
    hs_arena_unlock_all(&hs_md_arena);
    hs_md_bt_unlock();
    hs_md_ptr_unlock_all();
}

void hs_md_unlock_everything(void)
{
    unlock_all_but_free_queue();
    hs_md_free_queue_unlock();
}

void hs_md_unlock_everything_in_child(void)
{
    unlock_all_but_free_queue();
    hs_md_free_queue_unlock_in_child();
}

HS_EXPORT void malloc_disable(void)
{
    if (hs_md_mode_now() != HS_MD_DEBUG || !hs_md.track)
        return;
    hs_md_lock_everything();
    __atomic_store_n(&g_disabled_by, self_tid(), __ATOMIC_RELEASE);
}

HS_EXPORT void malloc_enable(void)
{
    if (hs_md_mode_now() != HS_MD_DEBUG || !hs_md.track)
        return;
    if (__atomic_load_n(&g_disabled_by, __ATOMIC_ACQUIRE) == 0)
        return;
    __atomic_store_n(&g_disabled_by, 0, __ATOMIC_RELEASE);
    hs_md_unlock_everything();
}

struct iterate_args {
    uintptr_t base, end;
    void (*callback)(uintptr_t ptr, size_t size, void *arg);
    void *arg;
};

static void iterate_one(uintptr_t ptr, const struct hs_md_ptr_info *info, void *arg)
{
    const struct iterate_args *a = arg;
    hs_assert(ptr >= a->base && ptr < a->end);
    size_t usable = hs_md.header ? hs_md_header_of((void *)ptr)->usable_size : info->size;
    a->callback(ptr, usable, a->arg);
}

HS_EXPORT int malloc_iterate(uintptr_t base, size_t size,
                             void (*callback)(uintptr_t ptr, size_t size, void *arg), void *arg)
{
    if (hs_md_mode_now() != HS_MD_DEBUG || !hs_md.track || !callback) {
        errno = ENOTSUP;
        return -1;
    }
    struct iterate_args a = {base, base + size < base ? UINTPTR_MAX : base + size, callback, arg};
    bool locked_here = __atomic_load_n(&g_disabled_by, __ATOMIC_ACQUIRE) != self_tid();
    if (locked_here)
        hs_md_ptr_lock_all();
    hs_md_ptr_foreach_in_locked(a.base, a.end, iterate_one, &a);
    if (locked_here)
        hs_md_ptr_unlock_all();
    return 0;
}

/* heapscope's own, for libmemunreachable (not in the public header): how an unreachable-
 * memory check finds the program's blocks.
 *   0  this shim tracks them: malloc_iterate;
 *   1  they are glibc's chunks, served by this shim, which does not track them (a
 *      pass-through, or malloc debug without backtrace, leak_track, free_track and
 *      verify_pointers: check_unreachable_on_signal alone): walk glibc's heap (sample_guard's
 *      few blocks are missed by that walk: a leak among them goes unreported, none is
 *      invented);
 *   2  untracked, and page_guard puts every block on pages of its own, which a walk of
 *      glibc's heap would not see: no check;
 *   3  this copy is not the malloc the program calls (an embedded copy under another
 *      allocator): it sees no block, and neither would a walk of glibc's heap. */
HS_EXPORT int heapscope_malloc_debug_heap_source(void)
{
    if (dlsym(RTLD_DEFAULT, "malloc") != (void *)hs_md_self_malloc)
        return 3;
    if (hs_md_init() != HS_MD_DEBUG)
        return 1;
    if (hs_md.track)
        return 0;
    return hs_md.page_guard ? 2 : 1;
}

/* heapscope's own, for libmemunreachable (which has its own copy of the log): the log file
 * pattern this shim writes to, "" for stderr; it may come from the system setting, which the
 * environment does not show. */
HS_EXPORT const char *heapscope_malloc_debug_log_file(void)
{
    hs_md_init();
    return hs_log_file_pattern();
}

/* heapscope's own, for libmemunreachable: every tracked block at once, as malloc_iterate would
 * give them but in no address order: out[i] = {pointer, usable size} for the first cap blocks.
 * Returns how many blocks are live (when more than cap, out holds only cap), or SIZE_MAX
 * without pointer tracking; with out NULL it only counts them. One pass over the table and no
 * call per block: the check's sweeper lists 10^7 blocks this way, where malloc_iterate's calls
 * per block and its caller's growing array cost more than reading the table. Locking as in
 * malloc_iterate. */
HS_EXPORT size_t heapscope_malloc_debug_list(uintptr_t (*out)[2], size_t cap)
{
    if (hs_md_mode_now() != HS_MD_DEBUG || !hs_md.track)
        return SIZE_MAX;
    if (!out)
        return hs_md_ptr_count();
    bool locked_here = __atomic_load_n(&g_disabled_by, __ATOMIC_ACQUIRE) != self_tid();
    if (locked_here)
        hs_md_ptr_lock_all();
    size_t n = hs_md_ptr_list_locked(out, cap);
    if (hs_md.header) /* under the locks: no block can be freed meanwhile */
        for (size_t i = 0; i < n && i < cap; i++)
            out[i][1] = hs_md_header_of((void *)out[i][0])->usable_size;
    if (locked_here)
        hs_md_ptr_unlock_all();
    return n;
}

/* heapscope's own: the memory of the shim's bookkeeping (its arena: the pointer table, the
 * backtraces, the free queue), which never holds the program's references. Fills up to cap
 * ranges and returns how many there are (0 without pointer tracking). The unreachable-memory
 * check calls it between malloc_disable and malloc_enable, and leaves these ranges out of its
 * roots: at 10^7 live blocks the pointer table alone is some 800 MB. */
HS_EXPORT size_t heapscope_malloc_debug_own_memory(struct hs_arena_mapping *out, size_t cap)
{
    if (hs_md_mode_now() != HS_MD_DEBUG || !hs_md.track)
        return 0;
    return hs_arena_mappings(&hs_md_arena, out, cap);
}

HS_EXPORT ssize_t malloc_backtrace(void *pointer, uintptr_t *frames, size_t frame_count)
{
    if (hs_md_mode_now() != HS_MD_DEBUG || !hs_md.track || !frames)
        return 0;
    struct hs_md_ptr_info info;
    if (!hs_md_ptr_find_ref(pointer, &info))
        return 0;
    if (!info.bt)
        return 0;
    size_t n = info.bt->num_frames < frame_count ? info.bt->num_frames : frame_count;
    memcpy(frames, info.bt->frames, n * sizeof(uintptr_t));
    hs_md_bt_release(info.bt);
    return (ssize_t)n;
}
