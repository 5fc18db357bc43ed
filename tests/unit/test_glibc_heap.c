/* test_glibc_heap.c: the walk of glibc's own heap (src/memunreachable/glibc_heap.c,
 * glibc_free_chunks.c).
 *
 *  - real heap: this process allocates blocks of many sizes from the main thread and from 3
 *    other threads (non-main arenas), large ones (mmapped, adjacent), and frees some into the
 *    tcaches, the fastbins and the unsorted bin; the threads then wait while a fork of the
 *    process (a snapshot, as the sweeper gets) walks the heap: every live block of ours must be
 *    listed once with malloc_usable_size, no freed block may be listed or covered by a listed
 *    one, and the figures must show the arenas, tcaches and fastbins.
 *  - hostile heap: fake maps over memory this test fills with garbage (chunk sizes that do not
 *    fit, loops and wild pointers in tcache and fastbin lists, bad heap_info headers, mmapped
 *    headers too large for their mapping): the walk ends, lists only what is sound, counts the
 *    problems, and never reads outside the fake mappings.
 */
#define _GNU_SOURCE
#include "check.h"
#include "count_allocs.h"
#include "glibc_heap.h"
#include "glibc_malloc.h"
#include "heap_walker.h"

#include <errno.h>
#include <fcntl.h>
#include <malloc.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#define THREADS 4 /* the main thread and 3 others */
#define MAX_OWN 256

struct block {
    uintptr_t ptr;
    size_t usable;
};

struct owned {
    struct block live[MAX_OWN];
    size_t num_live;
    uintptr_t freed[MAX_OWN];
    size_t num_freed;
    uintptr_t sp;
};

static struct owned g_own[THREADS];
static pthread_barrier_t g_built, g_walked;

/* What the walk lists. */
static struct block *g_listed;
static size_t g_num_listed, g_cap_listed;

static void collect(uintptr_t ptr, size_t size, void *arg)
{
    (void)arg;
    if (g_num_listed < g_cap_listed)
        g_listed[g_num_listed++] = (struct block){ptr, size};
}

static void *live(struct owned *o, size_t size)
{
    void *p = malloc(size);
    memset(p, 0x5a, size);
    o->live[o->num_live++] = (struct block){(uintptr_t)p, malloc_usable_size(p)};
    return p;
}

/* Allocates everything before freeing anything (a later request would reuse a freed chunk or,
 * from 1 KiB up, consolidate the fastbins), and frees the small ones last. */
static void build(struct owned *o)
{
    volatile int here;
    o->sp = (uintptr_t)&here;
    for (size_t size = 1; size <= 3000; size += size < 200 ? 7 : 97)
        live(o, size);
    for (int i = 0; i < 3; i++)
        live(o, 200 << 10); /* mmapped, adjacent mappings */
    void *small[10], *mid[9], *big[3], *tc[2];
    for (int i = 0; i < 10; i++)
        small[i] = malloc(40);
    for (int i = 0; i < 9; i++)
        mid[i] = malloc(100);
    for (int i = 0; i < 2; i++)
        tc[i] = malloc(600);
    for (int i = 0; i < 3; i++) {
        big[i] = malloc(2000);
        live(o, 24); /* keeps the free 2000-byte chunks apart and off the top */
    }
    void *order[] = {big[0], big[1], big[2], tc[0], tc[1]};
    for (size_t i = 0; i < sizeof(order) / sizeof(order[0]); i++) {
        o->freed[o->num_freed++] = (uintptr_t)order[i];
        free(order[i]);
    }
    for (int i = 0; i < 10; i++) { /* 7 into the tcache, 3 into a fastbin */
        o->freed[o->num_freed++] = (uintptr_t)small[i];
        free(small[i]);
    }
    for (int i = 0; i < 9; i++) {
        o->freed[o->num_freed++] = (uintptr_t)mid[i];
        free(mid[i]);
    }
}

static void *thread_main(void *arg)
{
    build(arg);
    pthread_barrier_wait(&g_built);
    pthread_barrier_wait(&g_walked); /* alive (with its tcache) until the walk is done */
    return NULL;
}

static size_t read_file(const char *path, char *buf, size_t cap)
{
    int fd = open(path, O_RDONLY);
    size_t len = 0;
    ssize_t n;
    while (fd >= 0 && len + 1 < cap && (n = read(fd, buf + len, cap - 1 - len)) > 0)
        len += (size_t)n;
    if (fd >= 0)
        close(fd);
    buf[len] = '\0';
    return len;
}

static const struct block *find_listed(uintptr_t ptr)
{
    for (size_t i = 0; i < g_num_listed; i++)
        if (g_listed[i].ptr == ptr)
            return &g_listed[i];
    return NULL;
}

static bool covered_by_listed(uintptr_t ptr)
{
    for (size_t i = 0; i < g_num_listed; i++)
        if (ptr >= g_listed[i].ptr && ptr < g_listed[i].ptr + g_listed[i].usable)
            return true;
    return false;
}

/* In the forked snapshot: walk, then check. Returns the exit status. */
static int walk_snapshot(void)
{
    static char maps[1 << 20];
    static struct hs_mu_thread threads[THREADS];
    struct hs_mu_capture cap;
    memset(&cap, 0, sizeof(cap));
    cap.pid = getpid();
    cap.maps_len = read_file("/proc/self/maps", maps, sizeof(maps));
    cap.maps_text = maps;
    for (int t = 0; t < THREADS; t++)
        threads[t].sp = g_own[t].sp;
    cap.threads = threads;
    cap.num_threads = THREADS;

    g_cap_listed = 1 << 16;
    g_listed = mmap(NULL, g_cap_listed * sizeof(*g_listed), PROT_READ | PROT_WRITE,
                    MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    struct hs_arena arena = HS_ARENA_INIT;
    struct hs_mu_glibc_heap_stats st;
    CHECK_EQ(hs_mu_fault_guard_install(), 0);
    count_allocs_start();
    int r = hs_mu_glibc_heap_walk(&cap, &arena, 0, SIZE_MAX, collect, NULL, &st);
    long allocs = count_allocs_stop();
    hs_mu_fault_guard_remove();

    check_context("real heap");
    CHECK_EQ(r, 0);
    CHECK_EQ(allocs, 0); /* the sweeper's own arena only, never glibc's heap */
    CHECK(st.main_arena != 0);
    CHECK(st.arenas >= THREADS);
    CHECK(st.heaps >= THREADS);
    CHECK(st.tcache_structs >= THREADS);
    CHECK(st.tcache_chunks >= THREADS * (7 + 7 + 2));
    CHECK(st.fastbin_chunks >= THREADS * (3 + 2));
    CHECK(st.mmapped_chunks >= THREADS * 3);
    CHECK_EQ(st.bad_heaps, 0);
    CHECK_EQ(st.bad_lists, 0);
    CHECK(g_num_listed < g_cap_listed);
    for (int t = 0; t < THREADS; t++) {
        const struct owned *o = &g_own[t];
        size_t missing = 0, wrong_size = 0, freed_listed = 0;
        for (size_t i = 0; i < o->num_live; i++) {
            const struct block *b = find_listed(o->live[i].ptr);
            missing += b == NULL;
            wrong_size += b && b->usable != o->live[i].usable;
        }
        for (size_t i = 0; i < o->num_freed; i++)
            freed_listed += covered_by_listed(o->freed[i]);
        CHECK_EQ(missing, 0);
        CHECK_EQ(wrong_size, 0);
        CHECK_EQ(freed_listed, 0);
    }
    /* Listed blocks never overlap (each chunk once). */
    size_t overlaps = 0;
    for (size_t i = 0; i < g_num_listed; i++)
        for (size_t j = i + 1; j < g_num_listed; j++)
            overlaps += g_listed[i].ptr < g_listed[j].ptr + g_listed[j].usable &&
                        g_listed[j].ptr < g_listed[i].ptr + g_listed[i].usable;
    CHECK_EQ(overlaps, 0);
    return check_report();
}

static void test_real_heap(void)
{
    pthread_t threads[THREADS - 1];
    pthread_barrier_init(&g_built, NULL, THREADS);
    pthread_barrier_init(&g_walked, NULL, THREADS);
    for (int t = 1; t < THREADS; t++)
        pthread_create(&threads[t - 1], NULL, thread_main, &g_own[t]);
    build(&g_own[0]);
    pthread_barrier_wait(&g_built);
    fflush(stdout);
    pid_t pid = fork();
    if (pid == 0)
        _exit(walk_snapshot());
    int status = -1;
    waitpid(pid, &status, 0);
    check_context("real heap (the forked walk)");
    CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0);
    pthread_barrier_wait(&g_walked);
    for (int t = 1; t < THREADS; t++)
        pthread_join(threads[t - 1], NULL);
}

/* ---- hostile heap ------------------------------------------------------------------------ */

#define PG 4096ul

static void put(uintptr_t addr, uintptr_t value)
{
    memcpy((void *)addr, &value, sizeof(value));
}

static void chunk(uintptr_t c, uintptr_t size)
{
    put(c + 8, size);
}

struct fake_map {
    uintptr_t start, end;
    const char *path;
};

static int by_start(const void *a, const void *b)
{
    uintptr_t x = ((const struct fake_map *)a)->start, y = ((const struct fake_map *)b)->start;
    return x < y ? -1 : x > y;
}

static void test_hostile_heap(void)
{
    check_context("hostile heap");
    /* Fake libc data holding a fake main_arena, a fake [heap], a region with three 64 MiB
     * boundaries for arena heaps, and a mapping of mmapped chunks. */
    uintptr_t libc =
        (uintptr_t)mmap(NULL, 2 * PG, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    uintptr_t heap =
        (uintptr_t)mmap(NULL, 16 * PG, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    uintptr_t mm =
        (uintptr_t)mmap(NULL, 4 * PG, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    uintptr_t big = (uintptr_t)mmap(NULL, 4 * HS_GLIBC_HEAP_MAX, PROT_NONE,
                                    MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    uintptr_t a1 = (big + HS_GLIBC_HEAP_MAX - 1) & ~(HS_GLIBC_HEAP_MAX - 1);
    uintptr_t a2 = a1 + HS_GLIBC_HEAP_MAX, a3 = a2 + HS_GLIBC_HEAP_MAX;
    mprotect((void *)a1, 16 * PG, PROT_READ | PROT_WRITE);
    mprotect((void *)a2, 4 * PG, PROT_READ | PROT_WRITE);
    mprotect((void *)a3, 4 * PG, PROT_READ | PROT_WRITE);

    /* main_arena: empty bins, top in the fake heap, fastbins with a loop and a wild pointer. */
    uintptr_t ma = libc + 0x100;
    for (unsigned i = 0; i < HS_GLIBC_NBINS; i++) {
        uintptr_t self = ma + HS_GLIBC_MSTATE_BINS + 16u * i - 16u;
        put(ma + HS_GLIBC_MSTATE_BINS + 16u * i, self);
        put(ma + HS_GLIBC_MSTATE_BINS + 16u * i + 8, self);
    }
    put(ma + HS_GLIBC_MSTATE_TOP, heap + 12 * PG);
    put(ma + HS_GLIBC_MSTATE_NEXT, ma);
    put(ma + HS_GLIBC_MSTATE_FASTBINS + 8, 0xdead0000ul); /* outside every mapping */

    /* [heap]: a tcache-sized chunk with wild entries, a tcache whose list loops, good chunks,
     * a fastbin chunk whose fd is itself (main_arena's fastbin 0), then a size that does not
     * fit the heap. Every chunk is laid out after the previous one: a fake chunk inside the
     * tcache struct would write into its entries[] and make it no tcache. */
    uintptr_t c = heap;
    chunk(c, HS_GLIBC_TCACHE_CHUNK | 1); /* counts[0] = 1, entries[0] wild */
    memset((void *)(c + 16), 0, HS_GLIBC_TCACHE_CHUNK - 16);
    *(uint16_t *)(c + 16) = 1;
    put(c + 16 + HS_GLIBC_TCACHE_ENTRIES, 0x10ul);
    uintptr_t t2 = c + HS_GLIBC_TCACHE_CHUNK; /* a tcache: bin 0 holds `e`, which loops */
    chunk(t2, HS_GLIBC_TCACHE_CHUNK | 1);
    memset((void *)(t2 + 16), 0, HS_GLIBC_TCACHE_CHUNK - 16);
    *(uint16_t *)(t2 + 16) = 65535;
    uintptr_t e = t2 + HS_GLIBC_TCACHE_CHUNK; /* 32-byte chunk, "free" in the tcache */
    chunk(e, 0x21);
    put(e + 16, hs_glibc_reveal(e + 16, e + 16));
    put(t2 + 16 + HS_GLIBC_TCACHE_ENTRIES, e + 16);
    uintptr_t good = e + 0x20;
    chunk(good, 0x41);
    chunk(good + 0x40, 0x31);
    uintptr_t loop = good + 0x70; /* looks in use, but free in a fastbin: not listed */
    chunk(loop, 0x21);
    put(loop + 16, hs_glibc_reveal(loop + 16, loop));
    put(ma + HS_GLIBC_MSTATE_FASTBINS, loop);
    chunk(loop + 0x20, 0x12345);   /* ends the walk */
    chunk(heap + 12 * PG, 0x1001); /* the top the walk never reaches */

    /* Arena heap 1: valid header, top inside, a first chunk that claims a huge size. */
    put(a1, a1 + HS_GLIBC_HEAP_INFO_SIZE);
    put(a1 + 8, 0);
    put(a1 + 16, 16 * PG);
    put(a1 + 24, 16 * PG);
    put(a1 + HS_GLIBC_HEAP_INFO_SIZE + HS_GLIBC_MSTATE_TOP, a1 + 8 * PG);
    put(a1 + HS_GLIBC_HEAP_INFO_SIZE + HS_GLIBC_MSTATE_FASTBINS, a1 + 3); /* misaligned */
    chunk(a1 + 0x8d0, 0x7fff0005);
    /* Arena heap 2: size above mprotect_size: not a heap (its memory is not walked). */
    put(a2, a2 + HS_GLIBC_HEAP_INFO_SIZE);
    put(a2 + 16, 64 * PG);
    put(a2 + 24, 4 * PG);
    /* Arena heap 3: an older heap of arena 1 (no top), closed the way sysmalloc closes it when
     * the old top had 48 bytes: a 32-byte fencepost without NON_MAIN_ARENA, then a zero-size
     * header in the last 16 bytes. Sound: its one block is listed, the fencepost is not. */
    put(a3, a1 + HS_GLIBC_HEAP_INFO_SIZE);
    put(a3 + 8, a1);
    put(a3 + 16, 4 * PG);
    put(a3 + 24, 4 * PG);
    uintptr_t old = a3 + HS_GLIBC_HEAP_INFO_SIZE, fence = a3 + 4 * PG - 0x30;
    chunk(old, (fence - old) | HS_GLIBC_NON_MAIN_ARENA | HS_GLIBC_PREV_INUSE);
    chunk(fence, 0x20 | HS_GLIBC_PREV_INUSE);
    chunk(fence + 0x20, 0 | HS_GLIBC_PREV_INUSE);

    /* Mmapped chunks: one of 2 pages, then a header claiming more than the mapping. */
    chunk(mm, 2 * PG | HS_GLIBC_IS_MMAPPED);
    chunk(mm + 2 * PG, 64 * PG | HS_GLIBC_IS_MMAPPED);

    struct fake_map fm[] = {
        {libc, libc + 2 * PG, "/fake/lib/libc.so.6"},
        {heap, heap + 16 * PG, "[heap]"},
        {mm, mm + 4 * PG, ""},
        {a1, a1 + 16 * PG, ""},
        {a2, a2 + 4 * PG, ""},
        {a3, a3 + 4 * PG, ""},
    };
    qsort(fm, sizeof(fm) / sizeof(fm[0]), sizeof(fm[0]), by_start);
    static char maps[4096];
    size_t len = 0;
    for (size_t i = 0; i < sizeof(fm) / sizeof(fm[0]); i++)
        len += (size_t)snprintf(maps + len, sizeof(maps) - len, "%lx-%lx rw-p 00000000 %s %s\n",
                                (unsigned long)fm[i].start, (unsigned long)fm[i].end,
                                fm[i].path[0] == '/' ? "08:01 77" : "00:00 0", fm[i].path);
    struct hs_mu_capture cap;
    memset(&cap, 0, sizeof(cap));
    cap.maps_text = maps;
    cap.maps_len = len;

    static struct block listed[1024];
    g_listed = listed;
    g_cap_listed = 1024;
    g_num_listed = 0;
    struct hs_arena arena = HS_ARENA_INIT;
    struct hs_mu_glibc_heap_stats st;
    CHECK_EQ(hs_mu_fault_guard_install(), 0);
    int r = hs_mu_glibc_heap_walk(&cap, &arena, 0, SIZE_MAX, collect, NULL, &st);
    CHECK_EQ(hs_mu_fault_guard_skipped_pages(), 0); /* nothing outside the mappings was read */
    hs_mu_fault_guard_remove();

    CHECK_EQ(r, 0);
    CHECK_EQ(st.main_arena, ma);
    CHECK_EQ(st.heaps, 3);     /* [heap], arena heaps 1 and 3 */
    CHECK_EQ(st.bad_heaps, 2); /* [heap] and arena heap 1 */
    CHECK(st.bad_lists >= 3);  /* the fastbin loop, the wild fastbin, the tcache loop */
    CHECK_EQ(st.tcache_structs, 1);
    CHECK_EQ(st.mmapped_chunks, 1);
    /* Listed: the wild tcache chunk (not a tcache: a block), the two good chunks, the block of
     * the older heap, the mmapped chunk; not the real tcache, its looping entry, the looping
     * fastbin chunk or the fencepost. */
    CHECK(find_listed(heap + 16) != NULL);
    CHECK(find_listed(t2 + 16) == NULL);
    CHECK(find_listed(e + 16) == NULL);
    CHECK(find_listed(loop + 16) == NULL);
    CHECK(find_listed(good + 16) && find_listed(good + 16)->usable == 0x38);
    CHECK(find_listed(good + 0x40 + 16) != NULL);
    CHECK(find_listed(old + 16) && find_listed(old + 16)->usable == fence - old - 8);
    CHECK(find_listed(fence + 16) == NULL);
    CHECK(find_listed(mm + 16) && find_listed(mm + 16)->usable == 2 * PG - 16);
    CHECK_EQ(g_num_listed, 5);
    for (size_t i = 0; i < g_num_listed; i++) {
        uintptr_t p = g_listed[i].ptr;
        CHECK((p >= heap && p < heap + 16 * PG) || (p >= mm && p < mm + 4 * PG) ||
              (p >= a3 && p < a3 + 4 * PG));
    }

    /* Without a main_arena (garbage in libc's data) the walk refuses. */
    memset((void *)libc, 0xff, 2 * PG);
    CHECK_EQ(hs_mu_fault_guard_install(), 0);
    r = hs_mu_glibc_heap_walk(&cap, &arena, 0, SIZE_MAX, collect, NULL, &st);
    hs_mu_fault_guard_remove();
    CHECK_EQ(r, -ENOTSUP);

    /* The fake heaps must not outlive this test: the real-heap walk scans this process's
     * anonymous mappings and would find the fake arena heap (a valid heap_info) there. */
    munmap((void *)libc, 2 * PG);
    munmap((void *)heap, 16 * PG);
    munmap((void *)mm, 4 * PG);
    munmap((void *)big, 4 * HS_GLIBC_HEAP_MAX);
}

int main(void)
{
    setvbuf(stdout, NULL, _IONBF, 0);
    test_hostile_heap();
    test_real_heap();
    return check_report();
}
