/* md_oom.c: a workload that lives with malloc returning NULL, for the out-of-memory walk
 * (test_malloc_debug_oom.py). Two threads each keep a few thousand blocks, made by malloc,
 * calloc, realloc (growing and shrinking), memalign, posix_memalign, aligned_alloc and
 * valloc from call sites at several stack depths (many distinct backtraces), with now and
 * then a large block (glibc maps it: another address region); every block holds a pattern
 * that is checked before it is resized or freed. A NULL result is counted and the slot
 * skipped, as a careful program does. argv[1], if given, is the number of blocks a thread
 * keeps (1500 at most and by default); "moves" runs moves() instead. Prints "ok nulls=N" and
 * exits 0, or names the first damaged block and exits 1.
 */
#define _GNU_SOURCE
#include <malloc.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAX_SLOTS 1500
#define ROUNDS 3

static unsigned g_slots = MAX_SLOTS; /* argv[1]: fewer, for the slow page_guard runs */

struct slot {
    unsigned char *p;
    size_t size;
    unsigned seed;
};

struct worker {
    unsigned id;
    unsigned long nulls;
    int damaged;
    struct slot slots[MAX_SLOTS];
};

static void fill(unsigned char *p, size_t n, unsigned seed)
{
    for (size_t i = 0; i < n; i++)
        p[i] = (unsigned char)(i * 7 + seed);
}

static int intact(const unsigned char *p, size_t n, unsigned seed)
{
    for (size_t i = 0; i < n; i++)
        if (p[i] != (unsigned char)(i * 7 + seed))
            return 0;
    return 1;
}

static size_t size_for(unsigned r)
{
    if (r % 97 == 0)
        return 200000 + r % 5000; /* mmapped by glibc */
    return 1 + (r * 37) % 700;
}

/* One allocation by the call `kind` picks. */
static __attribute__((noinline)) void *allocate(unsigned kind, size_t size)
{
    void *p = NULL;
    switch (kind % 7) {
    case 0:
        return malloc(size);
    case 1:
        return calloc(1, size);
    case 2:
        return realloc(NULL, size);
    case 3:
        return memalign(64, size);
    case 4:
        return posix_memalign(&p, 128, size) == 0 ? p : NULL;
    case 5:
        return aligned_alloc(32, (size + 31) & ~(size_t)31);
    default:
        return size < 5000 ? valloc(size) : malloc(size);
    }
}

/* The same call from `depth` frames deeper: another backtrace. */
static __attribute__((noinline)) void *allocate_at(unsigned depth, unsigned kind, size_t size)
{
    void *p = depth ? allocate_at(depth - 1, kind, size) : allocate(kind, size);
    __asm__ volatile("" ::: "memory"); /* no tail call: each depth keeps its frame */
    return p;
}

static void check(struct worker *w, const struct slot *s)
{
    if (s->p && !intact(s->p, s->size, s->seed) && !w->damaged) {
        w->damaged = 1;
        printf("damaged block %p of size %zu (thread %u)\n", (void *)s->p, s->size, w->id);
    }
}

static void *work(void *arg)
{
    struct worker *w = arg;
    unsigned r = w->id * 7919u;
    for (unsigned round = 0; round < ROUNDS; round++) {
        for (unsigned i = 0; i < g_slots; i++) {
            struct slot *s = &w->slots[i];
            r = r * 1103515245u + 12345u;
            unsigned choice = (r >> 8) % 4;
            check(w, s);
            if (s->p && choice == 0) {
                free(s->p);
                s->p = NULL;
            } else if (s->p && choice == 1) {
                /* Grow or shrink; on NULL the old block must be as it was. */
                size_t size = size_for(r >> 12);
                unsigned char *q = realloc(s->p, size);
                if (!q) {
                    w->nulls++;
                    check(w, s);
                    continue;
                }
                size_t kept = size < s->size ? size : s->size;
                if (!intact(q, kept, s->seed) && !w->damaged) {
                    w->damaged = 1;
                    printf("realloc lost the contents of a block of size %zu\n", s->size);
                }
                s->p = q;
                s->size = size;
                fill(s->p, s->size, s->seed);
            } else if (!s->p) {
                s->size = size_for(r >> 12);
                s->seed = r >> 16;
                s->p = allocate_at((r >> 20) % 6, r >> 24, s->size);
                if (!s->p)
                    w->nulls++;
                else
                    fill(s->p, s->size, s->seed);
            }
        }
    }
    for (unsigned i = 0; i < g_slots; i++) {
        check(w, &w->slots[i]);
        free(w->slots[i].p);
    }
    return NULL;
}

/* Small blocks (glibc's heap) and large ones (each mapped by glibc, far from the heap) until
 * malloc fails or 200 of each, then every small block grown by realloc to a large size: glibc
 * moves it to a mapping of its own. Under fault injection the pointer table's shards fill
 * up, so such a block moves to where the table has no room (the shim's last resort). */
static int moves(void)
{
    enum { MAX = 200, BIG = 300000 };
    static unsigned char *small[MAX], *big[MAX];
    unsigned long nulls = 0;
    int damaged = 0;
    /* A fixed threshold: glibc would raise it when a large block is freed, and serve the
     * large ones from its heap. */
    mallopt(M_MMAP_THRESHOLD, 128 * 1024);
    for (int i = 0; i < MAX; i++) {
        small[i] = malloc(64);
        if (small[i])
            fill(small[i], 64, (unsigned)i);
    }
    int n_small = 0, n_big = 0;
    for (int i = 0; i < MAX; i++)
        n_small += small[i] != NULL;
    for (int i = 0; i < MAX && (big[i] = malloc(BIG)) != NULL; i++, n_big++)
        fill(big[i], 64, (unsigned)i);
    for (int i = 0; i < MAX; i++) {
        if (!small[i])
            continue;
        unsigned char *q = realloc(small[i], BIG);
        if (!q) {
            nulls++;
            damaged |= !intact(small[i], 64, (unsigned)i);
            continue;
        }
        damaged |= !intact(q, 64, (unsigned)i);
        small[i] = q;
    }
    for (int i = 0; i < MAX; i++) {
        free(small[i]);
        free(big[i]);
    }
    if (damaged) {
        printf("realloc lost the contents of a block\n");
        return 1;
    }
    printf("ok nulls=%lu small=%d big=%d\n", nulls, n_small, n_big);
    return 0;
}

int main(int argc, char **argv)
{
    if (argc > 1 && strcmp(argv[1], "moves") == 0)
        return moves();
    if (argc > 1 && atoi(argv[1]) > 0 && atoi(argv[1]) < MAX_SLOTS)
        g_slots = (unsigned)atoi(argv[1]);
    static struct worker workers[2];
    pthread_t thread;
    workers[0].id = 1;
    workers[1].id = 2;
    bool threaded = pthread_create(&thread, NULL, work, &workers[1]) == 0;
    work(&workers[0]);
    if (threaded)
        pthread_join(thread, NULL);
    else
        work(&workers[1]); /* no thread (no memory for its stack): the same work here */
    if (workers[0].damaged || workers[1].damaged)
        return 1;
    printf("ok nulls=%lu\n", workers[0].nulls + workers[1].nulls);
    return 0;
}
