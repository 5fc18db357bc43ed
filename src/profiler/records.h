/* records.h: what the profiler's client writes into the shared ring buffer, and how the
 * daemon reads it back.
 *
 * Every ring-buffer record's payload starts with a type and a heap number. Three types:
 *   MALLOC  a sampled allocation: sequence number, address, true size, sampled size (the
 *           bytes it stands for: interval * samples, or the exact size), the interval in
 *           force, the client's timestamp and thread id, the gaps its copy of the stack
 *           left out (stack_gap.h), the registers at the capture point, then stack_len
 *           bytes of the thread's stack copied from regs.rsp upwards (the span from
 *           regs.rsp up, stack_len bytes plus the gaps', without the gaps);
 *   FREE    a free of a block that may have been sampled: sequence number and address;
 *   HEAP    a custom heap declared by the program (its number, name and interval), written
 *           before any sample of that heap.
 * Mallocs and frees of a process share one sequence counter (see heap_tracker.h for how the
 * daemon uses it). All fields are the client's claims: hs_record_decode checks that a record
 * is well formed, never that it is true.
 */
#ifndef HEAPSCOPE_PROFILER_RECORDS_H
#define HEAPSCOPE_PROFILER_RECORDS_H

#include "stack_gap.h"
#include "unwind_regs.h"

#include <stddef.h>
#include <stdint.h>

enum hs_record_type {
    HS_RECORD_MALLOC = 1,
    HS_RECORD_FREE = 2,
    HS_RECORD_HEAP = 3,
};

#define HS_RECORD_HEAP_NAME_MAX 64 /* bytes, NUL included */
#define HS_RECORD_MAX_HEAPS 256

struct hs_record_malloc {
    uint32_t type, heap;
    uint64_t seq;
    uint64_t addr;
    uint64_t size;
    uint64_t sampled;
    uint64_t interval;
    uint64_t ts_ns;
    uint32_t tid;
    uint32_t stack_len;
    uint32_t ngaps; /* gaps used, at most HS_STACK_GAPS */
    uint32_t pad;
    struct hs_stack_gap gaps[HS_STACK_GAPS];
    struct hs_unwind_regs regs;
    /* stack_len bytes of stack follow */
};

struct hs_record_free {
    uint32_t type, heap;
    uint64_t seq;
    uint64_t addr;
};

struct hs_record_heap {
    uint32_t type, heap;
    uint64_t interval;
    char name[HS_RECORD_HEAP_NAME_MAX];
};

/* A decoded record; pointers point into the buffer given to hs_record_decode. */
struct hs_record_view {
    enum hs_record_type type;
    union {
        const struct hs_record_malloc *malloc;
        const struct hs_record_free *free;
        const struct hs_record_heap *heap;
    };
    const uint8_t *stack; /* MALLOC: the stack copy, stack_len bytes */
};

/* Checks the record of len bytes at data (a private copy, 8-byte aligned) and fills *out.
 * Returns 0, or -1 when it is not a well-formed record: unknown type, wrong length, a heap
 * number out of range, a stack length that does not match, gaps out of order or outside the
 * span (hs_stack_gaps_valid), a heap name without its NUL. */
int hs_record_decode(const void *data, size_t len, struct hs_record_view *out);

#endif
