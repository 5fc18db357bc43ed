/* test_arena.c: the private allocator (src/common/arena.c): hs_arena_grow keeps contents
 * across the small and large sizes, moves large blocks without copying (mremap: the bytes
 * past the old size read as zeros), keeps the mapping list of a tracking arena and the mapped
 * byte count right, and hs_arena_destroy unmaps what it grew.
 */
#define _GNU_SOURCE
#include "check.h"

#include "arena.h"

#include <stdint.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

static void fill(void *p, size_t n, unsigned seed)
{
    for (size_t i = 0; i < n; i++)
        ((uint8_t *)p)[i] = (uint8_t)(i * 31 + seed);
}

static bool filled(const void *p, size_t n, unsigned seed)
{
    for (size_t i = 0; i < n; i++)
        if (((const uint8_t *)p)[i] != (uint8_t)(i * 31 + seed))
            return false;
    return true;
}

static bool zeros(const void *p, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (((const uint8_t *)p)[i] != 0)
            return false;
    return true;
}

/* Whether a tracking arena lists a mapping holding [p, p + n). */
static bool listed(struct hs_arena *a, const void *p, size_t n)
{
    struct hs_arena_mapping maps[64];
    size_t m = hs_arena_mappings(a, maps, 64);
    for (size_t i = 0; i < m && i < 64; i++)
        if ((uintptr_t)p >= maps[i].begin && (uintptr_t)p + n <= maps[i].end)
            return true;
    return false;
}

static bool is_mapped(const void *p)
{
    unsigned char v;
    return mincore((void *)((uintptr_t)p & ~(uintptr_t)4095), 4096, &v) == 0;
}

static void test_grow_sizes(void)
{
    check_context("grow from NULL, small to small, small to large, large to small");
    struct hs_arena a = HS_ARENA_INIT;
    char *p = hs_arena_grow(&a, NULL, 0, 100);
    CHECK(p != NULL);
    fill(p, 100, 1);
    p = hs_arena_grow(&a, p, 100, 5000);
    CHECK(p && filled(p, 100, 1));
    fill(p, 5000, 2);
    p = hs_arena_grow(&a, p, 5000, 300000);
    CHECK(p && filled(p, 5000, 2));
    fill(p, 300000, 3);
    p = hs_arena_grow(&a, p, 300000, 40);
    CHECK(p && filled(p, 40, 3));
    hs_arena_free(&a, p, 40);
}

static void test_grow_large(void)
{
    check_context("large blocks: moved by mremap, new bytes zero, counts and mapping list");
    struct hs_arena a = HS_ARENA_INIT;
    hs_arena_track_mappings(&a);
    size_t before = hs_arena_mapped_bytes(&a);
    size_t n = 1 << 20;
    char *p = hs_arena_alloc(&a, n);
    fill(p, n, 4);
    CHECK_EQ(hs_arena_mapped_bytes(&a) - before, n);
    char *q = hs_arena_grow(&a, p, n, 64 * n);
    CHECK(q != NULL);
    CHECK(filled(q, n, 4));
    CHECK(zeros(q + n, 63 * n));
    CHECK_EQ(hs_arena_mapped_bytes(&a) - before, 64 * n);
    CHECK(listed(&a, q, 64 * n));
    CHECK(q == p || !listed(&a, p, 1));
    char *r = hs_arena_grow(&a, q, 64 * n, 2 * n); /* shrinks */
    CHECK(r && filled(r, n, 4));
    CHECK_EQ(hs_arena_mapped_bytes(&a) - before, 2 * n);
    CHECK(listed(&a, r, 2 * n));
    CHECK(hs_arena_grow(&a, r, 2 * n, 2 * n - 100) == r); /* same pages: unchanged */
    hs_arena_destroy(&a);
    CHECK(!is_mapped(r));
}

int main(void)
{
    test_grow_sizes();
    test_grow_large();
    return check_report();
}
