/* test_stack_hints.c: the daemon's notes on how much stack a thread's samples need
 * (src/profiler/stack_hints.c): a note is the tid's only, is written only when it changes,
 * is dropped for good once it cut a copy short, its gaps are dropped for good once a copy
 * lacked a word of one, a slot's gaps are checked before a client uses them, and a reader
 * racing the writer never takes another thread's note (end or gaps) for its own. */
#include "check.h"
#include "stack_hints.h"

#include <pthread.h>
#include <stdint.h>
#include <string.h>

static struct hs_rb_meta g_meta; /* zeroed, like a new buffer's metadata page */

static void test_learn_and_lookup(void)
{
    check_context("learn and lookup");
    struct hs_stack_hints *h = hs_stack_hints_of(&g_meta);
    memset(h, 0, sizeof(*h));
    CHECK_EQ(hs_stack_hint_lookup(h, 1234), 0);
    hs_stack_hint_learn(h, 1234, 0x7f0000001000);
    CHECK_EQ(hs_stack_hint_lookup(h, 1234), 0x7f0000001000);
    /* Another thread of the same slot (tid + 128) is not given that note. */
    CHECK_EQ(hs_stack_hint_lookup(h, 1234 + HS_STACK_HINT_SLOTS), 0);
    /* A complete unwind that ended elsewhere (a reused thread id): the note follows it. */
    hs_stack_hint_learn(h, 1234, 0x7f0000000800);
    CHECK_EQ(hs_stack_hint_lookup(h, 1234), 0x7f0000000800);
    /* The slot's other thread takes it over. */
    hs_stack_hint_learn(h, 1234 + HS_STACK_HINT_SLOTS, 0x7e0000002000);
    CHECK_EQ(hs_stack_hint_lookup(h, 1234), 0);
    CHECK_EQ(hs_stack_hint_lookup(h, 1234 + HS_STACK_HINT_SLOTS), 0x7e0000002000);
    /* Thread id 0 and ends that are no address are never noted. */
    hs_stack_hint_learn(h, 0, 0x1000);
    CHECK_EQ(hs_stack_hint_lookup(h, 0), 0);
    hs_stack_hint_learn(h, 77, HS_STACK_HINT_NONE);
    hs_stack_hint_learn(h, 78, 0);
    CHECK_EQ(hs_stack_hint_lookup(h, 77), 0);
    CHECK_EQ(hs_stack_hint_lookup(h, 78), 0);
}

static void test_refuse(void)
{
    check_context("refuse");
    struct hs_stack_hints *h = hs_stack_hints_of(&g_meta);
    memset(h, 0, sizeof(*h));
    hs_stack_hint_learn(h, 42, 0x7f0000003000);
    /* A truncated copy that did not stop at the note (the client's own bound, its cap): the
     * note stays. */
    CHECK(!hs_stack_hint_refuse(h, 42, 0x7f0000002ff8));
    CHECK(!hs_stack_hint_refuse(h, 43, 0x7f0000003000));
    CHECK_EQ(hs_stack_hint_lookup(h, 42), 0x7f0000003000);
    /* One that stopped at the note: the thread copies its whole stack from now on, whatever
     * its later complete unwinds say. */
    CHECK(hs_stack_hint_refuse(h, 42, 0x7f0000003000));
    CHECK_EQ(hs_stack_hint_lookup(h, 42), 0);
    CHECK_EQ(h->slot[42].tid, 42);
    CHECK_EQ(h->slot[42].end, HS_STACK_HINT_NONE);
    hs_stack_hint_learn(h, 42, 0x7f0000003000);
    CHECK_EQ(hs_stack_hint_lookup(h, 42), 0);
    CHECK(!hs_stack_hint_refuse(h, 42, 0x7f0000003000));
    /* Another thread of that slot starts afresh. */
    hs_stack_hint_learn(h, 42 + HS_STACK_HINT_SLOTS, 0x7f0000005000);
    CHECK_EQ(hs_stack_hint_lookup(h, 42 + HS_STACK_HINT_SLOTS), 0x7f0000005000);
}

static void test_gaps(void)
{
    check_context("gaps");
    struct hs_stack_hints *h = hs_stack_hints_of(&g_meta);
    memset(h, 0, sizeof(*h));
    const uint64_t end = 0x7f0000010000;
    const struct hs_stack_range g[3] = {
        {end - 0x4000, end - 0x3000}, {end - 0x2000, end - 0x1800}, {end - 0x1000, end - 0x800}};
    struct hs_stack_range got[HS_STACK_GAPS];
    unsigned n = 99;
    hs_stack_hint_learn_gaps(h, 42, end, g, 3);
    CHECK_EQ(hs_stack_hint_lookup_gaps(h, 42, got, &n), end);
    CHECK_EQ(n, 3);
    CHECK(memcmp(got, g, sizeof g) == 0);
    CHECK_EQ(hs_stack_hint_lookup(h, 42), end);
    /* Another thread gets neither the end nor the gaps. */
    CHECK_EQ(hs_stack_hint_lookup_gaps(h, 42 + HS_STACK_HINT_SLOTS, got, &n), 0);
    CHECK_EQ(n, 0);
    /* Gaps out of order, touching, or reaching the end are left out of the note. */
    const struct hs_stack_range unordered[2] = {g[1], g[0]};
    hs_stack_hint_learn_gaps(h, 42, end, unordered, 2);
    hs_stack_hint_lookup_gaps(h, 42, got, &n);
    CHECK(n == 1 && got[0].lo == g[1].lo && got[0].hi == g[1].hi);
    const struct hs_stack_range touching[2] = {{end - 0x3000, end - 0x2000},
                                               {end - 0x2000, end - 0x1000}};
    hs_stack_hint_learn_gaps(h, 42, end, touching, 2);
    hs_stack_hint_lookup_gaps(h, 42, got, &n);
    CHECK_EQ(n, 1);
    const struct hs_stack_range to_end = {end - 0x100, end};
    hs_stack_hint_learn_gaps(h, 42, end, &to_end, 1);
    hs_stack_hint_lookup_gaps(h, 42, got, &n);
    CHECK_EQ(n, 0);
    /* A copy that lacked a word of a gap: the end stays, the gaps go for good. */
    hs_stack_hint_learn_gaps(h, 42, end, g, 2);
    CHECK(!hs_stack_hint_refuse_gaps(h, 43));
    CHECK(hs_stack_hint_refuse_gaps(h, 42));
    CHECK(!hs_stack_hint_refuse_gaps(h, 42));
    CHECK_EQ(hs_stack_hint_lookup_gaps(h, 42, got, &n), end);
    CHECK_EQ(n, 0);
    hs_stack_hint_learn_gaps(h, 42, end - 8, g, 2);
    CHECK_EQ(hs_stack_hint_lookup_gaps(h, 42, got, &n), end - 8);
    CHECK_EQ(n, 0);
    /* Another thread of the slot starts afresh, with gaps. */
    hs_stack_hint_learn_gaps(h, 42 + HS_STACK_HINT_SLOTS, end, g, 1);
    CHECK_EQ(hs_stack_hint_lookup_gaps(h, 42 + HS_STACK_HINT_SLOTS, got, &n), end);
    CHECK_EQ(n, 1);
    /* A slot written by someone else (the page is the program's too): gaps that do not lie
     * below the end in order are not used, the end still is. */
    struct hs_stack_hint *s = &h->slot[(42 + HS_STACK_HINT_SLOTS) % HS_STACK_HINT_SLOTS];
    const uint32_t hostile[][4] = {
        {0x100, 0x200, 0, 0},           /* longer than it lies below the end */
        {0x1000, 0x100, 0x2000, 0x100}, /* second below the first */
        {0x1000, 0x100, 0xf08, 0x100},  /* overlapping */
        {UINT32_MAX, 0x100, 0, 0},      /* the refusal mark with a length */
        {0x100, 0x100, 0, 0},           /* up to the end itself */
    };
    for (size_t i = 0; i < sizeof hostile / sizeof hostile[0]; i++) {
        s->gap[0].below = hostile[i][0];
        s->gap[0].len = hostile[i][1];
        s->gap[1].below = hostile[i][2];
        s->gap[1].len = hostile[i][3];
        s->gap[2].below = s->gap[2].len = 0;
        uint64_t e = hs_stack_hint_lookup_gaps(h, 42 + HS_STACK_HINT_SLOTS, got, &n);
        CHECK_EQ(e, end);
        if (!CHECK_EQ(n, 0))
            fprintf(stderr, "    hostile slot %zu\n", i);
    }
    s->gap[0].below = 0x10000000;
    s->gap[0].len = 0x100; /* below the end further than the end is from 0 */
    s->end = 0x1000;
    CHECK_EQ(hs_stack_hint_lookup_gaps(h, 42 + HS_STACK_HINT_SLOTS, got, &n), 0x1000);
    CHECK_EQ(n, 0);
}

/* The parts two unwinds both left unread: their common pieces of at least HS_STACK_GAP_MIN
 * bytes, the longest (up to the cap) of them, lowest first. */
static void test_ranges_common(void)
{
    check_context("common unread parts");
    const struct hs_stack_range a[3] = {{1000, 5000}, {6000, 9000}, {10000, 10400}};
    const struct hs_stack_range b[3] = {{2000, 7000}, {8000, 8400}, {8500, 12000}};
    struct hs_stack_range out[HS_STACK_GAPS];
    /* a0 & b0 = [2000, 5000), a1 & b0 = [6000, 7000), a1 & b1 = 400 (too short), a1 & b2 =
     * [8500, 9000) (500: too short), a2 & b2 = 400 (too short). */
    unsigned n = hs_stack_ranges_common(a, 3, b, 3, out, HS_STACK_GAPS);
    CHECK_EQ(n, 2);
    CHECK(out[0].lo == 2000 && out[0].hi == 5000 && out[1].lo == 6000 && out[1].hi == 7000);
    /* More than HS_STACK_GAPS pieces: the longest, lowest first. */
    const struct hs_stack_range c[4] = {{0, 600}, {1000, 3000}, {4000, 4700}, {5000, 6000}};
    const struct hs_stack_range all[1] = {{0, 100000}};
    n = hs_stack_ranges_common(c, 4, all, 1, out, HS_STACK_GAPS);
    CHECK_EQ(n, 3);
    CHECK(out[0].lo == 1000 && out[1].lo == 4000 && out[2].lo == 5000);
    n = hs_stack_ranges_common(all, 1, c, 4, out, HS_STACK_GAPS);
    CHECK_EQ(n, 3);
    CHECK(out[0].lo == 1000 && out[1].lo == 4000 && out[2].lo == 5000);
    /* A cap of 1: the longest alone. */
    CHECK_EQ(hs_stack_ranges_common(c, 4, all, 1, out, 1), 1);
    CHECK(out[0].lo == 1000 && out[0].hi == 3000);
    /* Nothing in common, or nothing at all. */
    CHECK_EQ(hs_stack_ranges_common(a, 1, b + 1, 1, out, HS_STACK_GAPS), 0);
    CHECK_EQ(hs_stack_ranges_common(a, 0, b, 3, out, HS_STACK_GAPS), 0);
}

/* One writer switching a slot between two threads, each with its own end; readers of both
 * threads must only ever see their own end or nothing. */
#define RACE_ROUNDS 2000000
#define TID_A 7u
#define TID_B (7u + HS_STACK_HINT_SLOTS)
#define END_A 0x7f00000a0000ull
#define END_B 0x7f00000b0000ull

/* Each thread's gaps: A one, B two. */
static const struct hs_stack_range GAPS_A[1] = {{END_A - 0x3000, END_A - 0x1000}};
static const struct hs_stack_range GAPS_B[2] = {{END_B - 0x5000, END_B - 0x4000},
                                                {END_B - 0x2000, END_B - 0x1800}};

static int g_stop;

static void *race_reader(void *arg)
{
    uint32_t tid = (uint32_t)(uintptr_t)arg;
    uint64_t mine = tid == TID_A ? END_A : END_B;
    const struct hs_stack_range *my_gaps = tid == TID_A ? GAPS_A : GAPS_B;
    unsigned my_n = tid == TID_A ? 1 : 2;
    struct hs_stack_hints *h = hs_stack_hints_of(&g_meta);
    uintptr_t wrong = 0, seen = 0;
    while (!__atomic_load_n(&g_stop, __ATOMIC_ACQUIRE)) {
        struct hs_stack_range got[HS_STACK_GAPS];
        unsigned n;
        uint64_t end = hs_stack_hint_lookup_gaps(h, tid, got, &n);
        if (end == mine && n == my_n && memcmp(got, my_gaps, n * sizeof got[0]) == 0)
            seen++;
        else if (end != 0 || n != 0)
            wrong++;
    }
    return (void *)(uintptr_t)(wrong != 0 ? 0 : seen != 0 ? 1 : 2);
}

static void test_race(void)
{
    check_context("a reader racing the writer");
    struct hs_stack_hints *h = hs_stack_hints_of(&g_meta);
    memset(h, 0, sizeof(*h));
    pthread_t ra, rb;
    pthread_create(&ra, NULL, race_reader, (void *)(uintptr_t)TID_A);
    pthread_create(&rb, NULL, race_reader, (void *)(uintptr_t)TID_B);
    for (int i = 0; i < RACE_ROUNDS; i++) {
        hs_stack_hint_learn_gaps(h, TID_A, END_A, GAPS_A, 1);
        hs_stack_hint_learn_gaps(h, TID_B, END_B, GAPS_B, 2);
    }
    __atomic_store_n(&g_stop, 1, __ATOMIC_RELEASE);
    void *va, *vb;
    pthread_join(ra, &va);
    pthread_join(rb, &vb);
    CHECK((uintptr_t)va != 0); /* 0: A saw a note that was not A's (seeing none is fine) */
    CHECK((uintptr_t)vb != 0);
}

int main(void)
{
    test_learn_and_lookup();
    test_refuse();
    test_gaps();
    test_ranges_common();
    test_race();
    return check_report();
}
