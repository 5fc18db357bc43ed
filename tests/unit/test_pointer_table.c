/* test_pointer_table.c: malloc debug's live-allocation table (src/malloc_debug/pointer_table.c),
 * its deletion above all: backward shift in a probe run that wraps from the last slot of a
 * shard to the first, removal of each position of such a run, random operations against a
 * simple model with every key in one shard (long runs, growth, wrap-arounds), and threads
 * adding and removing at once (run under ThreadSanitizer by the sanitizer leg).
 *
 * The test picks keys by where they land, so it repeats the table's hash (mix, the top 6 bits
 * for the shard, the low bits for the home slot): if pointer_table.c's hash changes, the
 * placement checks below fail and say so.
 */
#define _GNU_SOURCE
#include "check.h"

#include "pointer_table.h"

#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#define SHARDS 64
#define MIN_CAPACITY 64

static uint64_t mix(uintptr_t p)
{
    uint64_t h = (uint64_t)p * 0x9e3779b97f4a7c15ull;
    return h ^ (h >> 29);
}

static unsigned shard_of(uintptr_t p)
{
    return (unsigned)(mix(p) >> 58);
}

static size_t home_of(uintptr_t p, size_t capacity)
{
    return (size_t)mix(p) & (capacity - 1);
}

/* The next 16-aligned pointer from *cursor in `shard` whose home slot (at `capacity`)
 * is `home`. */
static uintptr_t find_key(uintptr_t *cursor, unsigned shard, size_t capacity, size_t home)
{
    for (;;) {
        uintptr_t p = (*cursor += 16);
        if (shard_of(p) == shard && home_of(p, capacity) == home)
            return p;
    }
}

static bool has(uintptr_t p, size_t size)
{
    struct hs_md_ptr_info info;
    return hs_md_ptr_find((void *)p, &info) && info.size == size && info.bt == NULL;
}

static void add_plain(uintptr_t p, size_t size)
{
    struct hs_md_ptr_info info = {size, NULL};
    CHECK(hs_md_ptr_add((void *)p, &info));
}

static bool remove_plain(uintptr_t p, size_t *size)
{
    struct hs_md_ptr_info out;
    if (!hs_md_ptr_remove((void *)p, &out))
        return false;
    *size = out.size;
    return true;
}

/* A run of keys whose homes are the last two slots of a 64-slot shard, so that the run wraps
 * to slots 0, 1, ...; removing any one of them must leave the others findable. */
static void test_wrap_around(void)
{
    enum { RUN = 6 };
    static const size_t homes[RUN] = {62, 63, 62, 63, 0, 63};
    uintptr_t cursor = 0x10000000;
    for (size_t victim = 0; victim < RUN; victim++) {
        check_context("remove one key of a run wrapping around the end of the shard");
        uintptr_t keys[RUN];
        for (size_t i = 0; i < RUN; i++)
            keys[i] = find_key(&cursor, 5, MIN_CAPACITY, homes[i]);
        for (size_t i = 0; i < RUN; i++)
            add_plain(keys[i], 100 + i);
        size_t size = 0;
        CHECK(remove_plain(keys[victim], &size));
        CHECK_EQ(size, 100 + victim);
        CHECK(!hs_md_ptr_find((void *)keys[victim], NULL));
        for (size_t i = 0; i < RUN; i++)
            if (i != victim)
                CHECK(has(keys[i], 100 + i));
        /* Then the rest, in an order that walks the run backwards. */
        for (size_t k = RUN; k-- > 0;) {
            if (k == victim)
                continue;
            CHECK(remove_plain(keys[k], &size));
            CHECK_EQ(size, 100 + k);
            for (size_t i = 0; i < k; i++)
                if (i != victim)
                    CHECK(has(keys[i], 100 + i));
        }
        CHECK_EQ(hs_md_ptr_count(), 0);
    }
}

/* Random adds, removes and finds with every key in one shard, against an array of what
 * should be there. The shard grows from 64 slots to 2048 on the way. */
static void test_against_model(void)
{
    check_context("random operations in one shard against a model");
    enum { KEYS = 900, OPS = 60000 };
    uintptr_t *keys = calloc(KEYS, sizeof(*keys));
    size_t *sizes = calloc(KEYS, sizeof(*sizes)); /* 0: absent */
    uintptr_t cursor = 0x20000000;
    for (size_t i = 0; i < KEYS; i++) {
        do
            cursor += 16;
        while (shard_of(cursor) != 9);
        keys[i] = cursor;
    }
    uint64_t rng = 0x2545f4914f6cdd1dull;
    size_t live = 0, bad = 0;
    for (size_t op = 0; op < OPS; op++) {
        rng ^= rng << 13;
        rng ^= rng >> 7;
        rng ^= rng << 17;
        size_t i = (size_t)(rng >> 8) % (op < OPS / 2 ? KEYS : KEYS / 3);
        size_t got = 0;
        switch (rng % 3) {
        case 0:
            if (sizes[i] == 0) {
                add_plain(keys[i], 1 + op);
                sizes[i] = 1 + op;
                live++;
            }
            break;
        case 1:
            if (remove_plain(keys[i], &got) != (sizes[i] != 0) || got != sizes[i])
                bad++;
            if (sizes[i])
                live--;
            sizes[i] = 0;
            break;
        default:
            if (sizes[i] ? !has(keys[i], sizes[i]) : hs_md_ptr_find((void *)keys[i], NULL))
                bad++;
            break;
        }
    }
    CHECK_EQ(bad, 0);
    CHECK_EQ(hs_md_ptr_count(), live);
    for (size_t i = 0; i < KEYS; i++) {
        size_t got = 0;
        if (sizes[i])
            CHECK(remove_plain(keys[i], &got) && got == sizes[i]);
        else
            CHECK(!hs_md_ptr_find((void *)keys[i], NULL));
    }
    CHECK_EQ(hs_md_ptr_count(), 0);
    free(keys);
    free(sizes);
}

/* Threads adding and removing their own keys at once, in every shard. */
enum { THREADS = 4, PER_THREAD = 20000 };

static void *worker(void *arg)
{
    uintptr_t base = 0x40000000 + (uintptr_t)arg * 0x10000000;
    size_t bad = 0;
    for (int round = 0; round < 3; round++) {
        for (uintptr_t i = 0; i < PER_THREAD; i++) {
            struct hs_md_ptr_info info = {i + 1, NULL};
            if (!hs_md_ptr_add((void *)(base + i * 16), &info))
                bad++;
        }
        for (uintptr_t i = 0; i < PER_THREAD; i += 2) {
            struct hs_md_ptr_info out;
            if (!hs_md_ptr_remove((void *)(base + i * 16), &out) || out.size != i + 1)
                bad++;
        }
        for (uintptr_t i = 1; i < PER_THREAD; i += 2) {
            struct hs_md_ptr_info out;
            if (!hs_md_ptr_find((void *)(base + i * 16), &out) || out.size != i + 1)
                bad++;
            if (!hs_md_ptr_remove((void *)(base + i * 16), &out))
                bad++;
        }
    }
    return (void *)bad;
}

static void test_threads(void)
{
    check_context("threads adding and removing at once");
    pthread_t t[THREADS];
    for (uintptr_t i = 0; i < THREADS; i++)
        pthread_create(&t[i], NULL, worker, (void *)i);
    size_t bad = 0;
    for (int i = 0; i < THREADS; i++) {
        void *r;
        pthread_join(t[i], &r);
        bad += (size_t)r;
    }
    CHECK_EQ(bad, 0);
    CHECK_EQ(hs_md_ptr_count(), 0);
    CHECK(hs_md_ptr_peak() >= PER_THREAD);
}

int main(void)
{
    test_wrap_around();
    test_against_model();
    test_threads();
    return check_report();
}
