/* free_queue.h: free_track's queue of freed allocations.
 *
 * A freed block is filled with 0xef and kept here instead of going back to glibc, so its
 * address is not reused while it waits. When the queue is full, the oldest block is checked
 * (the fill must be intact: anything else is a write after free) and then really freed.
 * The whole queue is checked at exit. Double frees and realloc after free find the block
 * here and report its free backtrace, whichever thread freed it.
 *
 * The queue is one ring per freeing thread (free_queue.c), sharing free_track's N blocks
 * between them: about the last N freed blocks of the process are kept. Thread-safe; a free
 * takes only its own thread's ring lock, never held while checking or freeing.
 *
 * A free backtrace is read only if the block is reported, so it is copied into the ring
 * beside the block (up to HS_MD_FREE_QUEUE_INLINE_FRAMES frames), not looked up in the
 * backtrace table on every free; deeper ones (free_track_backtrace_num_frames above that)
 * are kept as table records, so that the rings stay small whatever the depth.
 */
#ifndef HEAPSCOPE_MALLOC_DEBUG_FREE_QUEUE_H
#define HEAPSCOPE_MALLOC_DEBUG_FREE_QUEUE_H

#include "backtrace_table.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Most frames of a free backtrace kept in the ring itself: free_track's default depth. */
#define HS_MD_FREE_QUEUE_INLINE_FRAMES 16

/* Sets the queue up for `capacity` blocks in all, with free backtraces of up to `frames`
 * frames (free_track_backtrace_num_frames; called once, at start-up). */
void hs_md_free_queue_init(size_t capacity, size_t frames);

/* Queues a freed block: ptr is the program's pointer, orig what glibc must get back, usable
 * the bytes that were filled. Its free backtrace is either frames[0..num_frames) (copied)
 * or, for a guarded block, guarded_bt (the queue takes the reference and hands it to
 * hs_md_backing_free with the block; frames is then NULL). The block goes into the calling
 * thread's ring; blocks that leave it are checked and freed by this call. */
void hs_md_free_queue_push(void *ptr, void *orig, size_t usable, const uintptr_t *frames,
                           size_t num_frames, struct hs_md_bt *guarded_bt);

/* True when ptr is waiting in any thread's ring; *free_bt then gets a new reference to its
 * free backtrace (or NULL). */
bool hs_md_free_queue_find(const void *ptr, struct hs_md_bt **free_bt);

/* Checks every queued block (at exit). Blocks stay queued. */
void hs_md_free_queue_verify_all(void);

/* Blocks queued now, in all rings (statistics and tests). */
size_t hs_md_free_queue_count(void);

/* Take / release every ring's lock (fork handlers, malloc_disable). In a forked child,
 * hs_md_free_queue_unlock_in_child releases them and leaves only the calling thread's ring
 * attached: the other threads are gone, and their rings go to the child's new threads. */
void hs_md_free_queue_lock(void);
void hs_md_free_queue_unlock(void);
void hs_md_free_queue_unlock_in_child(void);

#endif
