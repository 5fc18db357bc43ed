/* test_heap_snapshot.c: unit tests of the heap snapshot (src/malloc_debug/heap_snapshot.c)
 * and of get_malloc_leak_info / free_malloc_leak_info (src/malloc_debug/leak_info.c).
 *
 * The sort and merge rules are tested on hand-made entries; hs_md_snapshot_take and the leak
 * info on the real pointer and backtrace tables, filled with made-up pointers (the tables
 * never dereference them) and made-up frames; reference counts of the backtrace records are
 * checked before, during and after a snapshot, and a snapshot is taken over and over while
 * four threads add and remove entries. Log lines are captured with hs_log_set_sink.
 *
 * What init.c defines in the shim comes from shim_stubs.c.
 */
#define _GNU_SOURCE
#include "check.h"
#include "debug_state.h"
#include "heap_snapshot.h"
#include "heapscope/malloc_debug.h"
#include "log.h"
#include "options.h"
#include "pointer_table.h"
#include "pointer_table_helpers.h"

#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- log capture ---- */

#define MAX_LOG 16
static int log_count;
static char log_body[MAX_LOG][HS_LOG_LINE_MAX];

static void log_sink(const char *line, size_t len, void *ctx)
{
    (void)ctx;
    (void)len;
    if (log_count >= MAX_LOG)
        return;
    const char *close = strstr(line, "] ");
    const char *body = close ? strstr(close + 2, ": ") : NULL;
    snprintf(log_body[log_count], HS_LOG_LINE_MAX, "%s", body ? body + 2 : line);
    size_t n = strlen(log_body[log_count]);
    if (n && log_body[log_count][n - 1] == '\n')
        log_body[log_count][n - 1] = '\0';
    log_count++;
}

static void log_reset(void)
{
    log_count = 0;
}

/* ---- helpers ---- */

/* A free-standing backtrace record (not in the table) for the pure sort/merge tests. */
static struct hs_md_bt *fake_bt(size_t n, const uintptr_t *frames)
{
    struct hs_md_bt *bt = calloc(1, sizeof(*bt) + n * sizeof(uintptr_t));
    bt->num_frames = (uint32_t)n;
    memcpy(bt->frames, frames, n * sizeof(uintptr_t));
    return bt;
}

#define FRAMES(...)                                                                                \
    (sizeof((uintptr_t[]){__VA_ARGS__}) / sizeof(uintptr_t)), (uintptr_t[])                        \
    {                                                                                              \
        __VA_ARGS__                                                                                \
    }

static int released;
static struct hs_md_bt *released_last;

static void count_release(struct hs_md_bt *bt)
{
    released++;
    released_last = bt;
}

static struct hs_md_snapshot_entry entry(uintptr_t ptr, size_t size, struct hs_md_bt *bt)
{
    return (struct hs_md_snapshot_entry){ptr, size, 1, bt};
}

/* True when neighbours are strictly ordered by size, presence, length, frames. */
static bool strictly_ordered(const struct hs_md_snapshot_entry *e, size_t n)
{
    for (size_t i = 1; i < n; i++) {
        if (hs_md_snapshot_same(&e[i - 1], &e[i]))
            return false;
        if (hs_md_snapshot_compare(&e[i - 1], &e[i], NULL) >= 0)
            return false;
    }
    return true;
}

/* ---- pure sort and merge ---- */

static void test_compare_rules(void)
{
    check_context("compare rules");
    struct hs_md_bt *short_bt = fake_bt(FRAMES(0x100, 0x200));
    struct hs_md_bt *long_bt = fake_bt(FRAMES(0x100, 0x200, 0x300));
    struct hs_md_bt *low = fake_bt(FRAMES(0x100, 0x200, 0x300));
    struct hs_md_bt *high = fake_bt(FRAMES(0x100, 0x201, 0x000));

    struct hs_md_snapshot_entry big = entry(0x9000, 200, NULL), small = entry(0x1000, 100, long_bt);
    CHECK(hs_md_snapshot_compare(&big, &small, NULL) < 0); /* size first, larger first */
    CHECK(hs_md_snapshot_compare(&small, &big, NULL) > 0);

    struct hs_md_snapshot_entry with = entry(0x9000, 100, short_bt),
                                without = entry(0x1000, 100, NULL);
    CHECK(hs_md_snapshot_compare(&with, &without, NULL) < 0); /* with a backtrace first */

    struct hs_md_snapshot_entry l = entry(0x9000, 100, long_bt), s = entry(0x1000, 100, short_bt);
    CHECK(hs_md_snapshot_compare(&l, &s, NULL) < 0); /* longer backtrace first */

    struct hs_md_snapshot_entry a = entry(0x9000, 100, low), b = entry(0x1000, 100, high);
    CHECK(hs_md_snapshot_compare(&a, &b, NULL) < 0); /* frames, smaller pc first */
    CHECK(hs_md_snapshot_compare(&b, &a, NULL) > 0);

    struct hs_md_snapshot_entry x = entry(0x1000, 100, long_bt), y = entry(0x2000, 100, low);
    CHECK(hs_md_snapshot_compare(&x, &y, NULL) < 0); /* identical frames: address */
    CHECK(hs_md_snapshot_same(&x, &y));
    CHECK(hs_md_snapshot_compare(&x, &x, NULL) == 0);
    CHECK(!hs_md_snapshot_same(&a, &b));
    struct hs_md_snapshot_entry n1 = entry(0x1000, 100, NULL), n2 = entry(0x2000, 100, NULL);
    CHECK(hs_md_snapshot_same(&n1, &n2));
    CHECK(!hs_md_snapshot_same(&n1, &with));

    free(short_bt);
    free(long_bt);
    free(low);
    free(high);
    check_context(NULL);
}

/* Android's BacktraceDumpOnSignal example (non-zygote part): 10, 50, 5 -> 50, 10, 5. */
static void test_android_example(void)
{
    check_context("android example");
    struct hs_md_bt *b1 = fake_bt(FRAMES(0xa000, 0xb000));
    struct hs_md_bt *b2 = fake_bt(FRAMES(0xa100, 0xb200));
    struct hs_md_bt *b3 = fake_bt(FRAMES(0xa300, 0xb300));
    struct hs_md_snapshot_entry e[] = {entry(0x100, 10, b1), entry(0x200, 50, b2),
                                       entry(0x300, 5, b3)};
    released = 0;
    size_t n = hs_md_snapshot_sort_merge(e, 3, count_release);
    CHECK_EQ(n, 3);
    CHECK_EQ(released, 0);
    CHECK_EQ(e[0].size, 50);
    CHECK(e[0].bt == b2);
    CHECK_EQ(e[1].size, 10);
    CHECK_EQ(e[2].size, 5);
    for (size_t i = 0; i < n; i++)
        CHECK_EQ(e[i].num, 1);
    free(b1);
    free(b2);
    free(b3);
    check_context(NULL);
}

static void test_merge(void)
{
    check_context("merge");
    struct hs_md_bt *x = fake_bt(FRAMES(0x1000, 0x2000));
    struct hs_md_bt *x_copy = fake_bt(FRAMES(0x1000, 0x2000)); /* same frames, other record */
    struct hs_md_bt *y = fake_bt(FRAMES(0x1000, 0x3000));
    /* Interleaved addresses: x, y, x, x_copy, y; plus two without backtrace and a 400. */
    struct hs_md_snapshot_entry e[] = {
        entry(0x5000, 300, x),      entry(0x1000, 300, y), entry(0x3000, 300, x),
        entry(0x2000, 300, x_copy), entry(0x4000, 300, y), entry(0x6000, 300, NULL),
        entry(0x0800, 300, NULL),   entry(0x7000, 400, y),
    };
    released = 0;
    size_t n = hs_md_snapshot_sort_merge(e, 8, count_release);
    CHECK_EQ(n, 4);
    CHECK_EQ(released, 4); /* 2 of the x group, 1 of y, 1 without backtrace */
    CHECK_EQ(e[0].size, 400);
    CHECK_EQ(e[0].num, 1);
    CHECK_EQ(e[1].size, 300);
    CHECK_EQ(e[1].num, 3); /* x, x, x_copy */
    CHECK_EQ(e[1].bt->frames[1], 0x2000);
    CHECK_EQ(e[1].ptr, 0x2000); /* lowest address of the group */
    CHECK_EQ(e[2].num, 2);      /* y, y */
    CHECK(e[2].bt == y);
    CHECK_EQ(e[2].ptr, 0x1000);
    CHECK(e[3].bt == NULL);
    CHECK_EQ(e[3].num, 2);
    CHECK_EQ(e[3].ptr, 0x0800);
    CHECK(released_last == NULL);
    CHECK(strictly_ordered(e, n));
    CHECK_EQ(hs_md_snapshot_sort_merge(e, 0, count_release), 0);
    CHECK_EQ(hs_md_snapshot_sort_merge(e, n, NULL), n); /* already merged: unchanged */
    free(x);
    free(x_copy);
    free(y);
    check_context(NULL);
}

/* Random entries from small pools: the result is strictly ordered and every (size, frames)
 * group keeps its count. */
static void test_random_merge(void)
{
    check_context("random merge");
    enum { POOL = 12, N = 5000 };
    struct hs_md_bt *pool[POOL];
    unsigned seed = 12345;
    for (int i = 0; i < POOL; i++) {
        uintptr_t f[5];
        size_t len = 1 + (size_t)(rand_r(&seed) % 5);
        for (size_t k = 0; k < len; k++)
            f[k] = 0x1000 + (uintptr_t)(rand_r(&seed) % 3) * 0x10;
        pool[i] = fake_bt(len, f);
    }
    static struct hs_md_snapshot_entry e[N];
    static size_t counts[4][POOL + 1];
    for (int i = 0; i < N; i++) {
        int s = rand_r(&seed) % 4, b = rand_r(&seed) % (POOL + 1);
        e[i] = entry((uintptr_t)(N - i) * 16, (size_t)(s + 1) * 8, b == POOL ? NULL : pool[b]);
    }
    for (int i = 0; i < N; i++) /* group counts by size and by exact frames */
        for (int b = 0; b <= POOL; b++) {
            struct hs_md_snapshot_entry probe = entry(0, e[i].size, b == POOL ? NULL : pool[b]);
            if (hs_md_snapshot_same(&probe, &e[i]) && (e[i].bt == probe.bt)) {
                counts[e[i].size / 8 - 1][b]++;
                break;
            }
        }
    released = 0;
    size_t n = hs_md_snapshot_sort_merge(e, N, count_release);
    CHECK(strictly_ordered(e, n));
    size_t total = 0;
    for (size_t i = 0; i < n; i++)
        total += e[i].num;
    CHECK_EQ(total, N);
    CHECK_EQ((size_t)released, N - n);
    /* Each merged entry's num is the sum of the groups with the same frames. */
    bool ok = true;
    for (size_t i = 0; i < n; i++) {
        size_t want = 0;
        for (int b = 0; b <= POOL; b++) {
            struct hs_md_snapshot_entry probe = entry(0, e[i].size, b == POOL ? NULL : pool[b]);
            if (hs_md_snapshot_same(&probe, &e[i]))
                want += counts[e[i].size / 8 - 1][b];
        }
        if (want != e[i].num)
            ok = false;
    }
    CHECK(ok);
    for (int i = 0; i < POOL; i++)
        free(pool[i]);
    check_context(NULL);
}

/* ---- snapshots of the real tables ---- */

static void configure(const char *options, int mode)
{
    CHECK(hs_md_config_parse(&hs_md.cfg, options));
    __atomic_store_n(&hs_md.mode, mode, __ATOMIC_RELEASE);
}

static void test_take_small(void)
{
    check_context("take small");
    configure("backtrace=4", HS_MD_DEBUG);
    struct hs_md_bt *a = add(0x10010, 1000, FRAMES(0xa000, 0xb000));
    add(0x10020, 1000, FRAMES(0xa000, 0xb000));
    add(0x10030, 1000, FRAMES(0xa000, 0xb000));
    struct hs_md_bt *c = add(0x10040, 5000, FRAMES(0xc000));
    add(0x10050, 70, 0, NULL); /* no backtrace */
    add(0x10060, 70, 0, NULL);
    CHECK_EQ(a->refs, 3);
    CHECK_EQ(hs_md_bt_count(), 2);

    struct hs_md_snapshot s;
    CHECK(hs_md_snapshot_take(&s, 0));
    CHECK_EQ(s.count, 3);
    CHECK_EQ(s.allocations, 6);
    CHECK_EQ(s.total_memory, 3 * 1000 + 5000 + 2 * 70);
    CHECK_EQ(s.entries[0].size, 5000);
    CHECK(s.entries[0].bt == c);
    CHECK_EQ(s.entries[1].size, 1000);
    CHECK_EQ(s.entries[1].num, 3);
    CHECK_EQ(s.entries[1].ptr, 0x10010);
    CHECK(s.entries[1].bt == a);
    CHECK_EQ(s.entries[2].size, 70);
    CHECK_EQ(s.entries[2].num, 2);
    CHECK(s.entries[2].bt == NULL);
    CHECK_EQ(a->refs, 4); /* 3 live + 1 held by the snapshot (merged duplicates dropped) */
    CHECK_EQ(c->refs, 2);

    /* The snapshot's reference keeps a record alive after its allocations are freed. */
    struct hs_md_ptr_info out;
    CHECK(hs_md_ptr_remove((void *)0x10040, &out));
    hs_md_bt_release(out.bt);
    CHECK_EQ(c->refs, 1);
    CHECK_EQ(s.entries[0].bt->frames[0], 0xc000);

    struct hs_md_snapshot only;
    CHECK(hs_md_snapshot_take(&only, HS_MD_SNAPSHOT_ONLY_WITH_BACKTRACE));
    CHECK_EQ(only.count, 1);
    CHECK_EQ(only.allocations, 3);
    CHECK_EQ(only.total_memory, 3000);
    CHECK_EQ(a->refs, 5); /* 3 live + s + only */
    hs_md_snapshot_release(&only);
    CHECK_EQ(a->refs, 4);

    hs_md_snapshot_release(&s);
    CHECK_EQ(s.count, 0);
    hs_md_snapshot_release(&s); /* twice is fine */
    CHECK_EQ(a->refs, 3);
    CHECK_EQ(hs_md_bt_count(), 1); /* c went with the snapshot's reference */
    remove_all();
    CHECK_EQ(hs_md_bt_count(), 0);
    CHECK_EQ(hs_md_ptr_count(), 0);

    CHECK(hs_md_snapshot_take(&s, 0)); /* empty table */
    CHECK_EQ(s.count, 0);
    CHECK_EQ(s.total_memory, 0);
    hs_md_snapshot_release(&s);
    check_context(NULL);
}

static void test_take_large(void)
{
    check_context("take large");
    configure("backtrace=8", HS_MD_DEBUG);
    enum { N = 30000 };
    size_t want_total = 0;
    for (uintptr_t i = 0; i < N; i++) {
        uintptr_t f[3] = {0x400000 + (i % 7) * 0x10, 0x500000, 0x600000 + (i % 3)};
        size_t size = 16 + (i % 5) * 16;
        add(0x7f0000000000 + i * 32, size, 3, f);
        want_total += size;
    }
    struct hs_md_snapshot s;
    CHECK(hs_md_snapshot_take(&s, 0));
    CHECK_EQ(s.allocations, N);
    CHECK_EQ(s.total_memory, want_total);
    CHECK_EQ(s.count, 5 * 21); /* 5 sizes x lcm(7, 3) backtraces */
    CHECK(strictly_ordered(s.entries, s.count));
    hs_md_snapshot_release(&s);
    remove_all();
    CHECK_EQ(hs_md_bt_count(), 0);
    check_context(NULL);
}

/* ---- concurrency ---- */

static int stop_threads;

static void *churn(void *arg)
{
    uintptr_t base = 0x100000000ull * (1 + (uintptr_t)arg);
    unsigned seed = (unsigned)(uintptr_t)arg;
    enum { LIVE = 256 };
    uintptr_t live[LIVE] = {0};
    while (!__atomic_load_n(&stop_threads, __ATOMIC_RELAXED)) {
        int slot = rand_r(&seed) % LIVE;
        if (live[slot]) {
            struct hs_md_ptr_info out;
            if (hs_md_ptr_remove((void *)live[slot], &out))
                hs_md_bt_release(out.bt);
            live[slot] = 0;
        } else {
            uintptr_t f[2] = {0x1000 + (uintptr_t)(rand_r(&seed) % 4), 0x2000};
            live[slot] = base + (uintptr_t)slot * 64;
            struct hs_md_ptr_info info = {.size = (size_t)(1 + rand_r(&seed) % 4) * 100,
                                          .bt = hs_md_bt_acquire(f, 2)};
            if (!hs_md_ptr_add((void *)live[slot], &info))
                hs_md_bt_release(info.bt);
        }
    }
    for (int i = 0; i < LIVE; i++) {
        struct hs_md_ptr_info out;
        if (live[i] && hs_md_ptr_remove((void *)live[i], &out))
            hs_md_bt_release(out.bt);
    }
    return NULL;
}

static void test_concurrent(void)
{
    check_context("concurrent");
    configure("backtrace=4", HS_MD_DEBUG);
    pthread_t t[4];
    stop_threads = 0;
    for (uintptr_t i = 0; i < 4; i++)
        pthread_create(&t[i], NULL, churn, (void *)i);
    int bad = 0;
    for (int round = 0; round < 300; round++) {
        struct hs_md_snapshot s;
        if (!hs_md_snapshot_take(&s, 0)) {
            bad++;
            continue;
        }
        size_t total = 0, allocations = 0;
        for (size_t i = 0; i < s.count; i++) {
            total += s.entries[i].size * s.entries[i].num;
            allocations += s.entries[i].num;
        }
        if (total != s.total_memory || allocations != s.allocations || allocations > 4 * 256 ||
            !strictly_ordered(s.entries, s.count))
            bad++;
        hs_md_snapshot_release(&s);
    }
    __atomic_store_n(&stop_threads, 1, __ATOMIC_RELAXED);
    for (int i = 0; i < 4; i++)
        pthread_join(t[i], NULL);
    CHECK_EQ(bad, 0);
    CHECK_EQ(hs_md_ptr_count(), 0);
    CHECK_EQ(hs_md_bt_count(), 0); /* every reference taken was dropped */
    check_context(NULL);
}

/* ---- get_malloc_leak_info ---- */

static void test_leak_info_layout(void)
{
    check_context("leak info layout");
    configure("backtrace=4", HS_MD_DEBUG);
    add(0x20010, 500, FRAMES(0xbc000, 0xecd00, 0x12000));
    add(0x20020, 4100, FRAMES(0x1, 0x2, 0x3, 0x4));
    add(0x20030, 500, FRAMES(0xbc000, 0xecd00, 0x12000));
    add(0x20040, 9000, FRAMES(0x104));
    add(0x20050, 123456, 0, NULL); /* no backtrace: not listed, not counted */

    uint8_t *info = (uint8_t *)1;
    size_t overall = 1, entry_size = 1, total = 1, frames = 1;
    log_reset();
    get_malloc_leak_info(&info, &overall, &entry_size, &total, &frames);
    CHECK_EQ(log_count, 0);
    CHECK(info != NULL);
    size_t want_entry = 2 * sizeof(size_t) + 4 * sizeof(uintptr_t);
    CHECK_EQ(entry_size, want_entry);
    CHECK_EQ(overall, 3 * want_entry);
    CHECK_EQ(total, 9000 + 4100 + 2 * 500);
    CHECK_EQ(frames, 4);
    if (info && overall == 3 * want_entry) {
        const size_t expect[3][6] = {
            {9000, 1, 0x104, 0, 0, 0},
            {4100, 1, 0x1, 0x2, 0x3, 0x4},
            {500, 2, 0xbc000, 0xecd00, 0x12000, 0},
        };
        for (int i = 0; i < 3; i++) {
            size_t got[6];
            memcpy(got, info + (size_t)i * want_entry, sizeof(got));
            for (int k = 0; k < 6; k++)
                CHECK_EQ(got[k], expect[i][k]);
        }
    }
    free_malloc_leak_info(info);
    free_malloc_leak_info(NULL);
    remove_all();

    /* Nothing live: NULL and zeros, no message. */
    get_malloc_leak_info(&info, &overall, &entry_size, &total, &frames);
    CHECK(info == NULL);
    CHECK_EQ(overall + entry_size + total + frames, 0);
    CHECK_EQ(log_count, 0);
    check_context(NULL);
}

static void test_leak_info_errors(void)
{
    check_context("leak info errors");
    uint8_t *info = (uint8_t *)1;
    size_t overall = 1, entry_size = 1, total = 1, frames = 1;

    configure("guard", HS_MD_DEBUG);
    add(0x30010, 10, FRAMES(0x1));
    log_reset();
    get_malloc_leak_info(&info, &overall, &entry_size, &total, &frames);
    CHECK(info == NULL);
    CHECK_EQ(overall + entry_size + total + frames, 0);
    CHECK_EQ(log_count, 1);
    CHECK_STREQ(log_body[0], "get_malloc_leak_info: Allocations not being tracked, to enable "
                             "set the option 'backtrace'.");

    configure("backtrace", HS_MD_PASSTHROUGH); /* shim loaded, malloc debug off */
    log_reset();
    get_malloc_leak_info(&info, &overall, &entry_size, &total, &frames);
    CHECK(info == NULL);
    CHECK_EQ(log_count, 1);

    configure("backtrace", HS_MD_DEBUG);
    log_reset();
    info = (uint8_t *)1;
    overall = 77;
    get_malloc_leak_info(&info, &overall, &entry_size, NULL, &frames);
    get_malloc_leak_info(NULL, &overall, &entry_size, &total, &frames);
    CHECK(info == (uint8_t *)1); /* untouched */
    CHECK_EQ(overall, 77);
    CHECK_EQ(log_count, 2);
    CHECK_STREQ(log_body[0], "get_malloc_leak_info: At least one invalid parameter.");
    CHECK_STREQ(log_body[1], "get_malloc_leak_info: At least one invalid parameter.");
    remove_all();
    check_context(NULL);
}

/* The header's wrappers find the functions when they are in the process (here they are
 * linked into the test executable, which dlsym(RTLD_DEFAULT) sees only if exported; the test
 * is not built with -rdynamic, so they must report "not loaded" cleanly). */
static void test_wrappers_without_shim(void)
{
    check_context("wrappers");
    uint8_t *info = (uint8_t *)1;
    size_t overall = 1, entry_size = 1, total = 1, frames = 1;
    bool loaded = heapscope_malloc_debug_loaded();
    if (!loaded) {
        CHECK(!heapscope_get_malloc_leak_info(&info, &overall, &entry_size, &total, &frames));
        CHECK(info == NULL);
        CHECK_EQ(overall + entry_size + total + frames, 0);
        CHECK_EQ(heapscope_malloc_iterate(0, 1, NULL, NULL), -1);
        CHECK(!heapscope_malloc_disable());
        CHECK(!heapscope_malloc_enable());
        uintptr_t f[2];
        CHECK_EQ(heapscope_malloc_backtrace(NULL, f, 2), (ssize_t)-1);
        heapscope_free_malloc_leak_info(NULL);
    }
    CHECK(!loaded);
    check_context(NULL);
}

int main(void)
{
    hs_log_set_sink(log_sink, NULL);
    hs_md.guarded = true; /* records of made-up pointers in shim_stubs.c's store */
    test_compare_rules();
    test_android_example();
    test_merge();
    test_random_merge();
    test_take_small();
    test_take_large();
    test_concurrent();
    test_leak_info_layout();
    test_leak_info_errors();
    test_wrappers_without_shim();
    return check_report();
}
