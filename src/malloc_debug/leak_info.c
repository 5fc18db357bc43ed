/* leak_info.c: get_malloc_leak_info and free_malloc_leak_info, exported by the shim (see
 * include/heapscope/malloc_debug.h for the contract and the buffer layout).
 *
 * The entries are those of a heap snapshot (heap_snapshot.h) restricted to allocations that
 * have a backtrace, so they are sorted and merged exactly like the lines of a heap dump. The
 * buffer comes from glibc (__libc_calloc: zero-filled, so the frames are zero-padded) and is
 * given back with __libc_free: the caller's program owns it, and it never enters the shim's
 * tables.
 *
 * Threading: thread-safe (the snapshot locks the table while it copies it). Runs with the
 * re-entry guard set, so nothing it calls is tracked. Not async-signal-safe.
 */
#include "../../include/heapscope/malloc_debug.h"

#include "debug_state.h"
#include "heap_snapshot.h"
#include "libc_malloc.h"
#include "log.h"
#include "options.h"

#include <string.h>

#define HS_EXPORT __attribute__((visibility("default")))

HS_EXPORT void get_malloc_leak_info(uint8_t **info, size_t *overall_size, size_t *info_size,
                                    size_t *total_memory, size_t *backtrace_size)
{
    if (!info || !overall_size || !info_size || !total_memory || !backtrace_size) {
        hs_log("get_malloc_leak_info: At least one invalid parameter.");
        return;
    }
    *info = NULL;
    *overall_size = 0;
    *info_size = 0;
    *total_memory = 0;
    *backtrace_size = 0;

    int mode = hs_md_mode_now();
    if (mode < HS_MD_PASSTHROUGH)
        mode = hs_md_init();
    if (mode != HS_MD_DEBUG || !(hs_md.cfg.options & HS_OPT_BACKTRACE)) {
        hs_log("get_malloc_leak_info: Allocations not being tracked, to enable set the option "
               "'backtrace'.");
        return;
    }

    hs_md_in_shim++;
    struct hs_md_snapshot snap;
    if (!hs_md_snapshot_take(&snap, HS_MD_SNAPSHOT_ONLY_WITH_BACKTRACE)) {
        hs_log("get_malloc_leak_info: Out of memory.");
        hs_md_in_shim--;
        return;
    }
    size_t frames = hs_md.cfg.backtrace_frames;
    size_t entry_size = 2 * sizeof(size_t) + frames * sizeof(uintptr_t);
    uint8_t *buf = snap.count ? __libc_calloc(snap.count, entry_size) : NULL;
    if (snap.count && !buf)
        hs_log("get_malloc_leak_info: Out of memory.");
    if (buf) {
        for (size_t i = 0; i < snap.count; i++) {
            const struct hs_md_snapshot_entry *e = &snap.entries[i];
            uint8_t *p = buf + i * entry_size;
            size_t header[2] = {e->size, e->num};
            memcpy(p, header, sizeof(header));
            size_t n = e->bt->num_frames < frames ? e->bt->num_frames : frames;
            memcpy(p + sizeof(header), e->bt->frames, n * sizeof(uintptr_t));
        }
        *info = buf;
        *overall_size = entry_size * snap.count;
        *info_size = entry_size;
        *total_memory = snap.total_memory;
        *backtrace_size = frames;
    }
    hs_md_snapshot_release(&snap);
    hs_md_in_shim--;
}

HS_EXPORT void free_malloc_leak_info(uint8_t *info)
{
    __libc_free(info);
}
