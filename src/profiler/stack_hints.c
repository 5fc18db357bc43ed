/* stack_hints.c: the daemon's notes on how much stack a thread's samples need (see
 * stack_hints.h). */
#include "stack_hints.h"

static struct hs_stack_hint *slot_of(struct hs_stack_hints *h, uint32_t tid)
{
    return &h->slot[tid % HS_STACK_HINT_SLOTS];
}

uint64_t hs_stack_hint_lookup(const struct hs_stack_hints *h, uint32_t tid)
{
    const struct hs_stack_hint *s = &h->slot[tid % HS_STACK_HINT_SLOTS];
    uint32_t seq = __atomic_load_n(&s->seq, __ATOMIC_ACQUIRE);
    if (tid == 0 || (seq & 1) != 0)
        return 0;
    uint32_t noted = __atomic_load_n(&s->tid, __ATOMIC_RELAXED);
    uint64_t end = __atomic_load_n(&s->end, __ATOMIC_RELAXED);
    __atomic_thread_fence(__ATOMIC_ACQUIRE);
    if (__atomic_load_n(&s->seq, __ATOMIC_RELAXED) != seq || noted != tid ||
        end == HS_STACK_HINT_NONE)
        return 0;
    return end;
}

/* The only writer of a slot: the reader of the buffer (one thread). */
static void write_slot(struct hs_stack_hint *s, uint32_t tid, uint64_t end)
{
    uint32_t seq = __atomic_load_n(&s->seq, __ATOMIC_RELAXED) | 1u;
    __atomic_store_n(&s->seq, seq, __ATOMIC_RELAXED);
    __atomic_thread_fence(__ATOMIC_RELEASE);
    __atomic_store_n(&s->tid, tid, __ATOMIC_RELAXED);
    __atomic_store_n(&s->end, end, __ATOMIC_RELAXED);
    __atomic_store_n(&s->seq, seq + 1, __ATOMIC_RELEASE);
}

void hs_stack_hint_learn(struct hs_stack_hints *h, uint32_t tid, uint64_t end)
{
    struct hs_stack_hint *s = slot_of(h, tid);
    if (tid == 0 || end <= HS_STACK_HINT_NONE)
        return;
    if (__atomic_load_n(&s->tid, __ATOMIC_RELAXED) == tid) {
        uint64_t cur = __atomic_load_n(&s->end, __ATOMIC_RELAXED);
        if (cur == end || cur == HS_STACK_HINT_NONE)
            return; /* nothing new: the shared line is not written */
    }
    write_slot(s, tid, end);
}

bool hs_stack_hint_refuse(struct hs_stack_hints *h, uint32_t tid, uint64_t copy_end)
{
    struct hs_stack_hint *s = slot_of(h, tid);
    if (tid == 0 || __atomic_load_n(&s->tid, __ATOMIC_RELAXED) != tid ||
        __atomic_load_n(&s->end, __ATOMIC_RELAXED) != copy_end)
        return false;
    write_slot(s, tid, HS_STACK_HINT_NONE);
    return true;
}
