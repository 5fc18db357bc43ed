/* test_arena.c: the private allocator (src/common/arena.c): hs_arena_grow keeps contents
 * across the small and large sizes, moves large blocks without copying (mremap: the bytes
 * past the old size read as zeros), keeps the mapping list of a tracking arena and the mapped
 * byte count right, and hs_arena_destroy unmaps what it grew. Every size class aligned and
 * reused, calloc of a recycled block, threads sharing an arena, and a double free caught by
 * the arena's invariant check (hs_assert).
 */
#define _GNU_SOURCE
#include "check.h"

#include "arena.h"

#include <pthread.h>
#include <stdbool.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
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

static void test_classes(void)
{
    check_context("every size: 16-aligned, writable, freed blocks reused within their class");
    struct hs_arena a = HS_ARENA_INIT;
    static const size_t sizes[] = {0,    1,    15,   16,    17,    48,    49,    100,
                                   1000, 4096, 4097, 40000, 65536, 65537, 300000};
    void *blocks[sizeof(sizes) / sizeof(*sizes)];
    for (size_t i = 0; i < sizeof(sizes) / sizeof(*sizes); i++) {
        blocks[i] = hs_arena_alloc(&a, sizes[i]);
        CHECK(blocks[i] != NULL && ((uintptr_t)blocks[i] & 15) == 0);
        fill(blocks[i], sizes[i], (unsigned)i);
    }
    for (size_t i = 0; i < sizeof(sizes) / sizeof(*sizes); i++)
        CHECK(filled(blocks[i], sizes[i], (unsigned)i));
    CHECK(((uintptr_t)blocks[14] & 4095) == 0); /* large: a mapping of its own */
    size_t mapped = hs_arena_mapped_bytes(&a);
    hs_arena_free(&a, blocks[14], 300000);
    CHECK_EQ(hs_arena_mapped_bytes(&a), mapped - 303104); /* 300000 rounded to pages */
    /* 100 and 120 share a class (96 < n <= 128): the freed block comes back, LIFO. */
    hs_arena_free(&a, blocks[7], 100);
    CHECK(hs_arena_alloc(&a, 120) == blocks[7]);
    check_context("calloc clears a recycled block");
    memset(blocks[8], 0x5a, 1000);
    hs_arena_free(&a, blocks[8], 1000);
    char *z = hs_arena_calloc(&a, 1000);
    CHECK(z == blocks[8] && zeros(z, 1000));
}

/* Threads allocating and freeing in the same classes (under ASan in the sanitizer leg). */
static struct hs_arena g_shared = HS_ARENA_INIT;

static void *churn(void *arg)
{
    unsigned seed = (unsigned)(uintptr_t)arg;
    void *held[64] = {0};
    size_t size[64] = {0};
    size_t bad = 0;
    for (int i = 0; i < 20000; i++) {
        seed = seed * 1103515245u + 12345u;
        size_t k = (seed >> 8) % 64;
        if (held[k]) {
            if (!filled(held[k], size[k], (unsigned)k))
                bad++;
            hs_arena_free(&g_shared, held[k], size[k]);
            held[k] = NULL;
        } else {
            size[k] = 1 + (seed >> 16) % 3000;
            held[k] = hs_arena_alloc(&g_shared, size[k]);
            if (!held[k])
                bad++;
            else
                fill(held[k], size[k], (unsigned)k);
        }
    }
    for (size_t k = 0; k < 64; k++)
        hs_arena_free(&g_shared, held[k], size[k]);
    return (void *)bad;
}

static void test_threads(void)
{
    check_context("threads sharing an arena: no block handed out twice");
    pthread_t t[4];
    for (uintptr_t i = 0; i < 4; i++)
        pthread_create(&t[i], NULL, churn, (void *)(i + 1));
    size_t bad = 0;
    for (int i = 0; i < 4; i++) {
        void *r;
        pthread_join(t[i], &r);
        bad += (size_t)r;
    }
    CHECK_EQ(bad, 0);
}

/* Freeing the block freed last again: hs_assert stops the process with the reason. */
static void test_double_free_caught(void)
{
    check_context("a double free of an arena block aborts with the assertion's line");
    int fds[2];
    if (pipe(fds) != 0)
        return;
    pid_t pid = fork();
    if (pid == 0) {
        dup2(fds[1], STDERR_FILENO);
        struct hs_arena a = HS_ARENA_INIT;
        void *p = hs_arena_alloc(&a, 64);
        hs_arena_free(&a, p, 64);
        hs_arena_free(&a, p, 64);
        _exit(0);
    }
    close(fds[1]);
    char out[1024];
    size_t len = 0;
    ssize_t n;
    while ((n = read(fds[0], out + len, sizeof(out) - 1 - len)) > 0)
        len += (size_t)n;
    out[len] = '\0';
    close(fds[0]);
    int status = 0;
    waitpid(pid, &status, 0);
#if HEAPSCOPE_ASSERT_LEVEL >= 1
    CHECK(WIFSIGNALED(status) && WTERMSIG(status) == SIGABRT);
    CHECK(strstr(out, "heapscope: assertion failed: p != k->free_list at arena.c:") != NULL);
#else
    CHECK(WIFEXITED(status));
#endif
}

/* True when the mapping holding p has the huge-page advice ("hg" in its smaps VmFlags). */
static bool advised_huge(const void *p)
{
    FILE *f = fopen("/proc/self/smaps", "r");
    if (!f)
        return false;
    char line[512];
    bool in = false, hg = false;
    while (fgets(line, sizeof(line), f)) {
        unsigned long lo, hi;
        if (sscanf(line, "%lx-%lx ", &lo, &hi) == 2) { /* a mapping's first line */
            in = (uintptr_t)p >= lo && (uintptr_t)p < hi;
            continue;
        }
        if (in && strncmp(line, "VmFlags:", 8) == 0) {
            hg = strstr(line, " hg") != NULL;
            break;
        }
    }
    fclose(f);
    return hg;
}

static void test_huge_pages(void)
{
    check_context("hs_arena_use_huge_pages: large blocks advised, small ones and other arenas not");
    struct hs_arena plain = HS_ARENA_INIT, dense = HS_ARENA_INIT;
    hs_arena_use_huge_pages(&dense);
    size_t big = (size_t)4 << 20;
    void *a = hs_arena_alloc(&plain, big), *b = hs_arena_alloc(&dense, big);
    void *c = hs_arena_alloc(&dense, (size_t)1 << 20); /* below 2 MiB: never */
    CHECK(a && b && c);
    CHECK(!advised_huge(a));
    CHECK(advised_huge(b));
    CHECK(!advised_huge(c));
    /* A block that grows past 2 MiB by mremap gets the advice too. */
    void *d = hs_arena_grow(&dense, c, (size_t)1 << 20, (size_t)8 << 20);
    CHECK(d && advised_huge(d));
    memset(b, 1, big); /* usable memory all the same */
    hs_arena_free(&plain, a, big);
    hs_arena_free(&dense, b, big);
    hs_arena_free(&dense, d, (size_t)8 << 20);
}

int main(void)
{
    test_grow_sizes();
    test_grow_large();
    test_classes();
    test_threads();
    test_double_free_caught();
    test_huge_pages();
    return check_report();
}
