/* test_hash_table.c: the shared open-addressing table (src/common/hash_table.h) and the
 * address-range lookups (src/common/range_lookup.h).
 *
 * The table runs random insert / find / erase sequences against a plain array model, with a
 * good hash, with one hash value for every key and with ~67 keys per value (long probe
 * runs that wrap around the table's end), built at assert level 2 so every grow and erase walks the
 * whole table (P_check). Deletion at the end of the table is checked slot by slot; growth,
 * iteration, failing allocators and a table of indices compared through its ctx are covered too.
 */
#define _GNU_SOURCE
#include "check.h"

/* Every check on, whatever the build's level: the consistency walk runs after each change. */
#undef HEAPSCOPE_ASSERT_LEVEL
#define HEAPSCOPE_ASSERT_LEVEL 2
#define HS_HASH_TABLE_LIBC
#include "hash_table.h"
#include "range_lookup.h"

#include <signal.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

/* ---- A table of (key, value) structs ---------------------------------------------------- */

struct kv {
    uint64_t key;
    uint64_t val;
    bool used;
};

static unsigned g_hash_shift; /* 0: the key is its hash; else key >> shift (collisions) */

static uint64_t kv_key_hash(const uint64_t *k, const void *ctx)
{
    (void)ctx;
    return g_hash_shift ? *k >> g_hash_shift : *k;
}
static uint64_t kv_entry_hash(const struct kv *e, const void *ctx)
{
    return kv_key_hash(&e->key, ctx);
}
static bool kv_matches(const struct kv *e, const uint64_t *k, const void *ctx)
{
    (void)ctx;
    return e->key == *k;
}
static bool kv_is_empty(const struct kv *e)
{
    return !e->used;
}
static void kv_clear(struct kv *e)
{
    e->used = false;
}

HS_HASH_TABLE_DEFINE(kv_table, struct kv, uint64_t, kv_key_hash, kv_entry_hash, kv_matches,
                     kv_is_empty, kv_clear)

static bool kv_insert(struct kv_table *t, uint64_t key, uint64_t val)
{
    bool inserted;
    struct kv *e = kv_table_find_or_insert(t, &key, &inserted);
    if (!e)
        return false;
    *e = (struct kv){key, val, true};
    return inserted;
}

/* ---- Allocators that count and fail ----------------------------------------------------- */

struct counting_alloc {
    long live;       /* blocks allocated and not freed */
    long fail_after; /* allocations left before every one fails; < 0: never fail */
};

static void *counting_alloc(void *ctx, size_t size)
{
    struct counting_alloc *c = ctx;
    if (c->fail_after == 0)
        return NULL;
    if (c->fail_after > 0)
        c->fail_after--;
    void *p = malloc(size);
    memset(p, 0xa5, size); /* the table must clear its slots itself */
    c->live++;
    return p;
}

static void counting_free(void *ctx, void *p, size_t size)
{
    struct counting_alloc *c = ctx;
    (void)size;
    c->live--;
    free(p);
}

/* ---- Random operations against a model -------------------------------------------------- */

#define MODEL_KEYS 3000u

static void random_ops(unsigned hash_shift, unsigned load, unsigned seed, unsigned nkeys)
{
    g_hash_shift = hash_shift;
    struct counting_alloc ca = {0, -1};
    struct hs_table_alloc a = {counting_alloc, counting_free, &ca};
    struct kv_table t;
    kv_table_init(&t, &a, NULL, load);
    static uint64_t model[MODEL_KEYS]; /* value + 1, 0 when absent */
    memset(model, 0, sizeof(model));
    size_t present = 0;
    srand(seed);
    bool ok = true;
    for (int op = 0; op < 60000 && ok; op++) {
        uint64_t key = (uint64_t)(rand() % nkeys) * 977 + 5;
        size_t k = (size_t)((key - 5) / 977);
        int r = rand() % 10;
        if (r < 5) {
            uint64_t val = (uint64_t)rand();
            bool inserted = kv_insert(&t, key, val);
            ok &= CHECK(inserted == (model[k] == 0));
            if (model[k] == 0)
                present++;
            model[k] = val + 1;
        } else if (r < 8) {
            bool removed = kv_table_remove(&t, &key);
            ok &= CHECK(removed == (model[k] != 0));
            if (model[k] != 0)
                present--;
            model[k] = 0;
        } else {
            struct kv *e = kv_table_find(&t, &key);
            ok &= CHECK((e != NULL) == (model[k] != 0));
            if (e)
                ok &= CHECK_EQ(e->val + 1, model[k]);
        }
        ok &= CHECK_EQ(t.count, present);
    }
    /* Every key of the model, present or absent, as the table says. */
    for (size_t k = 0; k < MODEL_KEYS; k++) {
        uint64_t key = (uint64_t)k * 977 + 5;
        struct kv *e = kv_table_find(&t, &key);
        if ((e != NULL) != (model[k] != 0) || (e && e->val + 1 != model[k])) {
            CHECK(!"table and model disagree");
            break;
        }
    }
    kv_table_check(&t);
    CHECK(t.count * 100 <= t.cap * load);
    kv_table_destroy(&t);
    CHECK_EQ(ca.live, 0);
}

/* ---- Deletion across the end of the table ----------------------------------------------- */

/* A hash whose home slot in a table of 16 (shift 60) is `slot`. */
static uint64_t hash_for_slot(size_t slot)
{
    for (uint64_t h = 1;; h++)
        if (hs_hash_table_home(h, 60) == slot)
            return h;
}

static void test_wraparound_delete(void)
{
    check_context("backward shift across the table's end");
    g_hash_shift = 8; /* keys h << 8 | i share the home of h */
    struct kv_table t;
    kv_table_init(&t, &hs_table_libc, NULL, 75);
    CHECK(kv_table_reserve(&t, 4));
    CHECK_EQ(t.cap, 16);
    uint64_t h15 = hash_for_slot(15), h0 = hash_for_slot(0), h14 = hash_for_slot(14);
    uint64_t a = h15 << 8 | 1, b = h15 << 8 | 2, c = h15 << 8 | 3, d = h0 << 8 | 1,
             e = h14 << 8 | 1;
    kv_insert(&t, a, 1); /* slot 15 */
    kv_insert(&t, b, 2); /* slot 0, wrapped */
    kv_insert(&t, c, 3); /* slot 1 */
    kv_insert(&t, d, 4); /* home 0, pushed to slot 2 */
    CHECK_EQ(kv_table_slot_of(&t, kv_table_find(&t, &a)), 15);
    CHECK_EQ(kv_table_slot_of(&t, kv_table_find(&t, &b)), 0);
    CHECK_EQ(kv_table_slot_of(&t, kv_table_find(&t, &c)), 1);
    CHECK_EQ(kv_table_slot_of(&t, kv_table_find(&t, &d)), 2);

    /* Erasing slot 15 pulls b back across the end, then c and d down one slot. */
    CHECK(kv_table_remove(&t, &a));
    CHECK_EQ(kv_table_slot_of(&t, kv_table_find(&t, &b)), 15);
    CHECK_EQ(kv_table_slot_of(&t, kv_table_find(&t, &c)), 0);
    CHECK_EQ(kv_table_slot_of(&t, kv_table_find(&t, &d)), 1);
    CHECK(kv_table_find(&t, &a) == NULL);
    CHECK(t.slots[2].used == false);

    /* An entry at home stays put: e lands at 14, erasing b (15) may not move c (home 15) to
     * before its home... c moves to 15, d (home 0) to 0. */
    kv_insert(&t, e, 5);
    CHECK_EQ(kv_table_slot_of(&t, kv_table_find(&t, &e)), 14);
    CHECK(kv_table_remove(&t, &b));
    CHECK_EQ(kv_table_slot_of(&t, kv_table_find(&t, &c)), 15);
    CHECK_EQ(kv_table_slot_of(&t, kv_table_find(&t, &d)), 0);
    CHECK_EQ(kv_table_slot_of(&t, kv_table_find(&t, &e)), 14);

    /* Erasing e (14) moves nothing: c's home is 15, d's is 0, both past the hole. */
    CHECK(kv_table_remove(&t, &e));
    CHECK_EQ(kv_table_slot_of(&t, kv_table_find(&t, &c)), 15);
    CHECK_EQ(kv_table_slot_of(&t, kv_table_find(&t, &d)), 0);
    CHECK(!t.slots[14].used);
    CHECK_EQ(t.count, 2);
    kv_table_check(&t);
    kv_table_destroy(&t);
}

/* ---- Growth, iteration, failure ---------------------------------------------------------- */

static void test_grow_and_iterate(void)
{
    check_context("grow and iterate");
    g_hash_shift = 0;
    struct counting_alloc ca = {0, -1};
    struct hs_table_alloc a = {counting_alloc, counting_free, &ca};
    struct kv_table t;
    kv_table_init(&t, &a, NULL, 50);
    CHECK(kv_table_find(&t, &(uint64_t){1}) == NULL); /* nothing allocated yet */
    CHECK_EQ(t.cap, 0);
    size_t pos = 0;
    CHECK(kv_table_next(&t, &pos) == NULL);
    uint64_t sum = 0;
    for (uint64_t k = 1; k <= 1000; k++) {
        kv_insert(&t, k << 12, k);
        sum += k;
        CHECK(t.count * 100 <= t.cap * 50);
    }
    CHECK_EQ(t.cap, 2048);
    CHECK_EQ(ca.live, 1); /* old arrays returned as the table grew */
    uint64_t seen = 0;
    size_t n = 0;
    pos = 0;
    for (struct kv *e; (e = kv_table_next(&t, &pos)) != NULL; n++)
        seen += e->val;
    CHECK_EQ(n, 1000);
    CHECK_EQ(seen, sum);
    CHECK(kv_table_reserve(&t, 24)); /* 1024 of 2048: no growth */
    CHECK_EQ(t.cap, 2048);
    CHECK(kv_table_reserve(&t, 25));
    CHECK_EQ(t.cap, 4096);
    kv_table_clear(&t);
    CHECK_EQ(t.count, 0);
    CHECK(kv_table_find(&t, &(uint64_t){5 << 12}) == NULL);
    kv_table_destroy(&t);
    CHECK_EQ(ca.live, 0);

    check_context("a failed allocation leaves the table as it was");
    ca = (struct counting_alloc){0, 1};
    kv_table_init(&t, &a, NULL, 75);
    for (uint64_t k = 1; k <= 12; k++)
        CHECK(kv_insert(&t, k, k)); /* 12 of 16 */
    bool inserted = true;
    uint64_t k13 = 13, k5 = 5;
    CHECK(kv_table_find_or_insert(&t, &k13, &inserted) == NULL);
    CHECK_EQ(t.count, 12);
    CHECK_EQ(t.cap, 16);
    struct kv *e = kv_table_find_or_insert(&t, &k5, &inserted); /* present: no growth needed */
    CHECK(e != NULL && !inserted && e->val == 5);
    CHECK(!kv_table_reserve(&t, SIZE_MAX / 2));
    kv_table_check(&t);
    kv_table_destroy(&t);
    CHECK_EQ(ca.live, 0);
}

/* ---- A table of indices into the caller's array ----------------------------------------- */

struct node {
    uint32_t parent;
    uintptr_t pc;
};
struct node_key {
    uint32_t parent;
    uintptr_t pc;
};

static uint64_t node_key_hash(const struct node_key *k, const void *ctx)
{
    (void)ctx;
    return k->pc ^ ((uint64_t)k->parent << 40);
}
static uint64_t node_entry_hash(const uint32_t *id, const void *ctx)
{
    const struct node *nodes = *(struct node *const *)ctx;
    return node_key_hash(&(struct node_key){nodes[*id].parent, nodes[*id].pc}, ctx);
}
static bool node_matches(const uint32_t *id, const struct node_key *k, const void *ctx)
{
    const struct node *nodes = *(struct node *const *)ctx;
    return nodes[*id].parent == k->parent && nodes[*id].pc == k->pc;
}
static bool node_is_empty(const uint32_t *id)
{
    return *id == UINT32_MAX;
}
static void node_clear(uint32_t *id)
{
    *id = UINT32_MAX;
}

HS_HASH_TABLE_DEFINE(node_table, uint32_t, struct node_key, node_key_hash, node_entry_hash,
                     node_matches, node_is_empty, node_clear)

static void test_index_table(void)
{
    check_context("table of indices, keys read through ctx");
    struct node *nodes = NULL; /* the table reads the array through &nodes: it may move */
    size_t n = 0;
    struct node_table t;
    node_table_init(&t, &hs_table_libc, &nodes, 50);
    for (uint32_t i = 0; i < 500; i++) {
        struct node_key k = {i / 7, 0x400000 + (uintptr_t)i * 16};
        bool inserted;
        nodes = realloc(nodes, (n + 1) * sizeof(*nodes));
        nodes[n] = (struct node){k.parent, k.pc};
        uint32_t *slot = node_table_find_or_insert(&t, &k, &inserted);
        CHECK(slot && inserted);
        *slot = (uint32_t)n++;
    }
    for (uint32_t i = 0; i < 500; i++) {
        struct node_key k = {i / 7, 0x400000 + (uintptr_t)i * 16};
        uint32_t *slot = node_table_find(&t, &k);
        if (!CHECK(slot && *slot == i))
            break;
    }
    CHECK(node_table_find(&t, &(struct node_key){1, 0x400000}) == NULL);
    node_table_check(&t);
    node_table_destroy(&t);
    free(nodes);
}

/* The consistency walk catches an entry out of its probe run (in a child: it aborts). */
static void test_check_catches_corruption(void)
{
    check_context("P_check aborts on a broken table");
    pid_t pid = fork();
    if (pid == 0) {
        g_hash_shift = 8;
        struct kv_table t;
        kv_table_init(&t, &hs_table_libc, NULL, 75);
        kv_insert(&t, hash_for_slot(3) << 8, 1);
        size_t at = kv_table_slot_of(&t, kv_table_find(&t, &(uint64_t){hash_for_slot(3) << 8}));
        t.slots[(at + 2) & 15] = t.slots[at]; /* a gap between its home and it */
        t.slots[at].used = false;
        freopen("/dev/null", "w", stderr);
        kv_table_check(&t);
        _exit(0);
    }
    int status = 0;
    CHECK(waitpid(pid, &status, 0) == pid);
    CHECK(WIFSIGNALED(status) && WTERMSIG(status) == SIGABRT);
}

/* ---- Range lookups ----------------------------------------------------------------------- */

struct range {
    uintptr_t begin, end;
};

static void test_ranges(void)
{
    check_context("range lookup");
    const struct range r[] = {{10, 20}, {20, 30}, {40, 50}, {UINT64_MAX - 10, UINT64_MAX}};
    const size_t n = sizeof(r) / sizeof(r[0]);
    CHECK(hs_ranges_disjoint(r, n, begin, end));
    const struct {
        uintptr_t addr;
        size_t want;
    } cases[] = {{0, n},
                 {9, n},
                 {10, 0},
                 {19, 0},
                 {20, 1},
                 {29, 1},
                 {30, n},
                 {39, n},
                 {40, 2},
                 {49, 2},
                 {50, n},
                 {UINT64_MAX - 11, n},
                 {UINT64_MAX - 10, 3},
                 {UINT64_MAX - 1, 3},
                 {UINT64_MAX, n}};
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++)
        if (!CHECK_EQ(hs_range_find(r, n, cases[i].addr, begin, end), cases[i].want))
            fprintf(stderr, "    addr %llu\n", (unsigned long long)cases[i].addr);
    CHECK_EQ(hs_range_find(r, 0, 15, begin, end), 0); /* empty: "none" is 0 */
    CHECK_EQ(hs_range_find(r, 1, 25, begin, end), 1);

    CHECK_EQ(hs_range_upper_bound(r, n, 9, begin), 0);
    CHECK_EQ(hs_range_upper_bound(r, n, 10, begin), 1);
    CHECK_EQ(hs_range_upper_bound(r, n, 20, begin), 2);
    CHECK_EQ(hs_range_upper_bound(r, n, 35, begin), 2);
    CHECK_EQ(hs_range_upper_bound(r, n, UINT64_MAX, begin), 4);
    CHECK_EQ(hs_range_first_ending_after(r, n, 19, end), 0);
    CHECK_EQ(hs_range_first_ending_after(r, n, 20, end), 1);
    CHECK_EQ(hs_range_first_ending_after(r, n, 30, end), 2);
    CHECK_EQ(hs_range_first_ending_after(r, n, UINT64_MAX, end), 4);

    check_context("overlapping ranges: never a wrong range, possibly none");
    const struct range o[] = {{0, 100}, {10, 20}, {30, 40}};
    CHECK(!hs_ranges_disjoint(o, 3, begin, end));
    const struct range e[] = {{5, 5}};
    CHECK(!hs_ranges_disjoint(e, 1, begin, end)); /* empty range */
    for (uintptr_t addr = 0; addr < 110; addr++) {
        size_t i = hs_range_find(o, 3, addr, begin, end);
        if (!CHECK(i == 3 || (o[i].begin <= addr && addr < o[i].end)))
            break;
    }

    check_context("partition point against a linear scan");
    int v[64];
    srand(7);
    for (int round = 0; round < 200; round++) {
        size_t len = (size_t)(rand() % 64);
        int x = 0;
        for (size_t i = 0; i < len; i++)
            v[i] = x += rand() % 3;
        int want = rand() % (x + 3);
        size_t lin = 0;
        while (lin < len && v[lin] < want)
            lin++;
        if (!CHECK_EQ(hs_partition_point(len, i, v[i] >= want), lin))
            break;
    }
}

int main(void)
{
    check_context("random ops, identity hash, load 50%");
    random_ops(0, 50, 1, MODEL_KEYS);
    check_context("random ops, identity hash, load 90%");
    random_ops(0, 90, 2, MODEL_KEYS);
    check_context("random ops, one hash value for all keys (one run round the end), load 75%");
    random_ops(40, 75, 3, 60); /* keys < 2^22, so key >> 40 == 0 */
    check_context("random ops, about 67 keys per hash value, load 75%");
    random_ops(16, 75, 4, MODEL_KEYS);
    test_wraparound_delete();
    test_grow_and_iterate();
    test_index_table();
    test_check_catches_corruption();
    test_ranges();
    return check_report();
}
