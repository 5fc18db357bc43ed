/* test_stack_hints.c: the daemon's notes on how much stack a thread's samples need
 * (src/profiler/stack_hints.c): a note is the tid's only, is written only when it changes,
 * is dropped for good once it cut a copy short, and a reader racing the writer never takes
 * another thread's note for its own. */
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

/* One writer switching a slot between two threads, each with its own end; readers of both
 * threads must only ever see their own end or nothing. */
#define RACE_ROUNDS 2000000
#define TID_A 7u
#define TID_B (7u + HS_STACK_HINT_SLOTS)
#define END_A 0x7f00000a0000ull
#define END_B 0x7f00000b0000ull

static int g_stop;

static void *race_reader(void *arg)
{
    uint32_t tid = (uint32_t)(uintptr_t)arg;
    uint64_t mine = tid == TID_A ? END_A : END_B;
    struct hs_stack_hints *h = hs_stack_hints_of(&g_meta);
    uintptr_t wrong = 0, seen = 0;
    while (!__atomic_load_n(&g_stop, __ATOMIC_ACQUIRE)) {
        uint64_t end = hs_stack_hint_lookup(h, tid);
        if (end == mine)
            seen++;
        else if (end != 0)
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
        hs_stack_hint_learn(h, TID_A, END_A);
        hs_stack_hint_learn(h, TID_B, END_B);
    }
    __atomic_store_n(&g_stop, 1, __ATOMIC_RELEASE);
    void *va, *vb;
    pthread_join(ra, &va);
    pthread_join(rb, &vb);
    CHECK((uintptr_t)va != 0); /* 0: A saw an end that was not A's (seeing none is fine) */
    CHECK((uintptr_t)vb != 0);
}

int main(void)
{
    test_learn_and_lookup();
    test_refuse();
    test_race();
    return check_report();
}
