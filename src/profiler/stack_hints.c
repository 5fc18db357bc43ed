/* stack_hints.c: the daemon's notes on how much stack a thread's samples need (see
 * stack_hints.h). */
#include "stack_hints.h"

static struct hs_stack_hint *slot_of(struct hs_stack_hints *h, uint32_t tid)
{
    return &h->slot[tid % HS_STACK_HINT_SLOTS];
}

/* A slot's gaps, as the writer stores them. */
struct slot_gaps {
    uint32_t below[HS_STACK_GAPS], len[HS_STACK_GAPS];
};

static void read_gaps(const struct hs_stack_hint *s, struct slot_gaps *g)
{
    for (unsigned i = 0; i < HS_STACK_GAPS; i++) {
        g->below[i] = __atomic_load_n(&s->gap[i].below, __ATOMIC_RELAXED);
        g->len[i] = __atomic_load_n(&s->gap[i].len, __ATOMIC_RELAXED);
    }
}

/* The gaps of a slot as ranges below end, lowest first; 0 unless every used one lies below end,
 * in order and apart (a note is the daemon's, but the page is shared with the program). */
static unsigned gaps_as_ranges(const struct slot_gaps *g, uint64_t end,
                               struct hs_stack_range out[HS_STACK_GAPS])
{
    unsigned n = 0;
    uint64_t floor = 0;
    for (unsigned i = 0; i < HS_STACK_GAPS && g->len[i] != 0; i++) {
        if (g->below[i] == HS_STACK_HINT_NO_GAPS || g->below[i] <= g->len[i] || g->below[i] > end ||
            end - g->below[i] < floor + 8)
            return 0;
        out[n].lo = end - g->below[i];
        out[n].hi = out[n].lo + g->len[i];
        floor = out[n].hi;
        n++;
    }
    return n;
}

uint64_t hs_stack_hint_lookup_gaps(const struct hs_stack_hints *h, uint32_t tid,
                                   struct hs_stack_range gaps[HS_STACK_GAPS], unsigned *ngaps)
{
    *ngaps = 0;
    const struct hs_stack_hint *s = &h->slot[tid % HS_STACK_HINT_SLOTS];
    uint32_t seq = __atomic_load_n(&s->seq, __ATOMIC_ACQUIRE);
    if (tid == 0 || (seq & 1) != 0)
        return 0;
    uint32_t noted = __atomic_load_n(&s->tid, __ATOMIC_RELAXED);
    uint64_t end = __atomic_load_n(&s->end, __ATOMIC_RELAXED);
    struct slot_gaps g;
    read_gaps(s, &g);
    __atomic_thread_fence(__ATOMIC_ACQUIRE);
    if (__atomic_load_n(&s->seq, __ATOMIC_RELAXED) != seq || noted != tid ||
        end == HS_STACK_HINT_NONE)
        return 0;
    *ngaps = gaps_as_ranges(&g, end, gaps);
    return end;
}

uint64_t hs_stack_hint_lookup(const struct hs_stack_hints *h, uint32_t tid)
{
    struct hs_stack_range gaps[HS_STACK_GAPS];
    unsigned n;
    return hs_stack_hint_lookup_gaps(h, tid, gaps, &n);
}

/* The only writer of a slot: the reader of the buffer (one thread). */
static void write_slot(struct hs_stack_hint *s, uint32_t tid, uint64_t end,
                       const struct slot_gaps *g)
{
    uint32_t seq = __atomic_load_n(&s->seq, __ATOMIC_RELAXED) | 1u;
    __atomic_store_n(&s->seq, seq, __ATOMIC_RELAXED);
    __atomic_thread_fence(__ATOMIC_RELEASE);
    __atomic_store_n(&s->tid, tid, __ATOMIC_RELAXED);
    __atomic_store_n(&s->end, end, __ATOMIC_RELAXED);
    for (unsigned i = 0; i < HS_STACK_GAPS; i++) {
        __atomic_store_n(&s->gap[i].below, g->below[i], __ATOMIC_RELAXED);
        __atomic_store_n(&s->gap[i].len, g->len[i], __ATOMIC_RELAXED);
    }
    __atomic_store_n(&s->seq, seq + 1, __ATOMIC_RELEASE);
}

static bool gaps_equal(const struct slot_gaps *a, const struct slot_gaps *b)
{
    for (unsigned i = 0; i < HS_STACK_GAPS; i++)
        if (a->below[i] != b->below[i] || a->len[i] != b->len[i])
            return false;
    return true;
}

void hs_stack_hint_learn_gaps(struct hs_stack_hints *h, uint32_t tid, uint64_t end,
                              const struct hs_stack_range *gaps, unsigned n)
{
    struct hs_stack_hint *s = slot_of(h, tid);
    if (tid == 0 || end <= HS_STACK_HINT_NONE)
        return;
    struct slot_gaps want = {{0}, {0}};
    unsigned k = 0;
    uint64_t floor = 0;
    for (unsigned i = 0; i < n && k < HS_STACK_GAPS; i++) {
        const struct hs_stack_range *r = &gaps[i];
        /* In order, apart, below end, and within the slot's 32-bit offsets. */
        if (r->lo < floor + 8 || r->hi <= r->lo || r->hi >= end || end - r->lo >= UINT32_MAX)
            continue;
        want.below[k] = (uint32_t)(end - r->lo);
        want.len[k] = (uint32_t)(r->hi - r->lo);
        floor = r->hi;
        k++;
    }
    if (__atomic_load_n(&s->tid, __ATOMIC_RELAXED) == tid) {
        uint64_t cur = __atomic_load_n(&s->end, __ATOMIC_RELAXED);
        if (cur == HS_STACK_HINT_NONE)
            return;
        struct slot_gaps have;
        read_gaps(s, &have);
        if (have.below[0] == HS_STACK_HINT_NO_GAPS) /* refused for good: the end alone */
            want = have;
        if (cur == end && gaps_equal(&have, &want))
            return; /* nothing new: the shared line is not written */
    }
    write_slot(s, tid, end, &want);
}

void hs_stack_hint_learn(struct hs_stack_hints *h, uint32_t tid, uint64_t end)
{
    hs_stack_hint_learn_gaps(h, tid, end, NULL, 0);
}

bool hs_stack_hint_refuse(struct hs_stack_hints *h, uint32_t tid, uint64_t copy_end)
{
    struct hs_stack_hint *s = slot_of(h, tid);
    if (tid == 0 || __atomic_load_n(&s->tid, __ATOMIC_RELAXED) != tid ||
        __atomic_load_n(&s->end, __ATOMIC_RELAXED) != copy_end)
        return false;
    const struct slot_gaps none = {{0}, {0}};
    write_slot(s, tid, HS_STACK_HINT_NONE, &none);
    return true;
}

bool hs_stack_hint_refuse_gaps(struct hs_stack_hints *h, uint32_t tid)
{
    struct hs_stack_hint *s = slot_of(h, tid);
    if (tid == 0 || __atomic_load_n(&s->tid, __ATOMIC_RELAXED) != tid)
        return false;
    struct slot_gaps have;
    read_gaps(s, &have);
    if (have.len[0] == 0 || have.below[0] == HS_STACK_HINT_NO_GAPS)
        return false;
    const struct slot_gaps refused = {{HS_STACK_HINT_NO_GAPS}, {0}};
    write_slot(s, tid, __atomic_load_n(&s->end, __ATOMIC_RELAXED), &refused);
    return true;
}

unsigned hs_stack_ranges_common(const struct hs_stack_range *a, unsigned na,
                                const struct hs_stack_range *b, unsigned nb,
                                struct hs_stack_range *out, unsigned cap)
{
    unsigned n = 0;
    for (unsigned i = 0; i < na; i++) {
        for (unsigned j = 0; j < nb; j++) {
            struct hs_stack_range r = {a[i].lo > b[j].lo ? a[i].lo : b[j].lo,
                                       a[i].hi < b[j].hi ? a[i].hi : b[j].hi};
            if (r.hi <= r.lo || r.hi - r.lo < HS_STACK_GAP_MIN)
                continue;
            /* Among the cap longest so far, longest first (an insertion). */
            unsigned k = n < cap ? n++ : cap;
            while (k > 0 && out[k - 1].hi - out[k - 1].lo < r.hi - r.lo) {
                if (k < cap)
                    out[k] = out[k - 1];
                k--;
            }
            if (k < cap)
                out[k] = r;
        }
    }
    for (unsigned i = 1; i < n; i++) /* lowest first */
        for (unsigned k = i; k > 0 && out[k - 1].lo > out[k].lo; k--) {
            struct hs_stack_range t = out[k - 1];
            out[k - 1] = out[k];
            out[k] = t;
        }
    return n;
}
