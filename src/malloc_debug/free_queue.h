/* free_queue.h: free_track's queue of freed allocations.
 *
 * A freed block is filled with 0xef and kept here instead of going back to glibc, so its
 * address is not reused while it waits. When the queue is full, the oldest block is checked
 * (the fill must be intact: anything else is a write after free) and then really freed.
 * The whole queue is checked at exit. Double frees and realloc after free find the block
 * here and report its free backtrace. Thread-safe (one spinlock, never held while checking
 * or freeing).
 */
#ifndef HEAPSCOPE_MALLOC_DEBUG_FREE_QUEUE_H
#define HEAPSCOPE_MALLOC_DEBUG_FREE_QUEUE_H

#include "backtrace_table.h"

#include <stdbool.h>
#include <stddef.h>

/* Sets the queue up for `capacity` blocks. Returns false when memory is short. */
bool hs_md_free_queue_init(size_t capacity);

/* Queues a freed block: ptr is the program's pointer, orig what glibc must get back, usable
 * the bytes that were filled, free_bt the free backtrace (the queue takes the reference). */
void hs_md_free_queue_push(void *ptr, void *orig, size_t usable, struct hs_md_bt *free_bt);

/* True when ptr is waiting in the queue; *free_bt then gets a new reference to its free
 * backtrace (or NULL). */
bool hs_md_free_queue_find(const void *ptr, struct hs_md_bt **free_bt);

/* Checks every queued block (at exit). Blocks stay queued. */
void hs_md_free_queue_verify_all(void);

void hs_md_free_queue_lock(void);
void hs_md_free_queue_unlock(void);

#endif
