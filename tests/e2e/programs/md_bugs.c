/* md_bugs.c: small programs with real heap bugs, one per scenario (argv[1]), for the malloc
 * debug end-to-end tests. Each scenario prints the pointers it used ("ptr=0x...") and its pid
 * on stdout so that the test can build the exact report text it expects. */
#include <errno.h>
#include <malloc.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* Keeps the compiler from removing or moving the buggy accesses. */
static void *volatile sink;

static void announce(const char *name, void *p)
{
    printf("%s=%p\n", name, p);
    fflush(stdout);
}

static __attribute__((noinline)) void free_it(void *p)
{
    free(p);
}

static __attribute__((noinline)) int rear_overflow_1(void)
{
    char *p = malloc(100);
    announce("ptr", p);
    p[100] = 0;
    free_it(p);
    return 0;
}

static __attribute__((noinline)) int rear_overflow_many(void)
{
    char *p = malloc(100);
    announce("ptr", p);
    memset(p + 100, 'A', 10);
    free_it(p);
    return 0;
}

static __attribute__((noinline)) int front_underflow_1(void)
{
    char *p = malloc(40);
    announce("ptr", p);
    p[-1] = 0;
    free_it(p);
    return 0;
}

static __attribute__((noinline)) int front_underflow_many(void)
{
    char *p = malloc(40);
    announce("ptr", p);
    memset(p - 16, 0x55, 16);
    free_it(p);
    return 0;
}

static __attribute__((noinline)) int both_guards(void)
{
    char *p = malloc(8);
    announce("ptr", p);
    p[-2] = 1;
    p[9] = 2;
    free_it(p);
    return 0;
}

static __attribute__((noinline)) int double_free(void)
{
    char *p = malloc(64);
    announce("ptr", p);
    free(p);
    free_it(p);
    return 0;
}

static __attribute__((noinline)) int realloc_after_free(void)
{
    char *p = malloc(64);
    announce("ptr", p);
    free(p);
    sink = realloc(p, 128);
    printf("realloc=%p\n", sink);
    return 0;
}

static __attribute__((noinline)) int free_interior(void)
{
    char *p = malloc(256);
    memset(p, 0, 256);
    announce("ptr", p + 128);
    free_it(p + 128);
    free(p);
    return 0;
}

static __attribute__((noinline)) int usable_size_interior(void)
{
    char *p = malloc(256);
    memset(p, 0x5a, 256);
    announce("ptr", p + 128);
    printf("usable=%zu\n", malloc_usable_size(p + 128));
    free(p);
    return 0;
}

static int all_bytes(const unsigned char *p, size_t n, unsigned char v)
{
    for (size_t i = 0; i < n; i++)
        if (p[i] != v)
            return 0;
    return 1;
}

/* Prints what the program sees of the fill options. */
static int fills(void)
{
    unsigned char *p = malloc(64);
    printf("alloc_fill_64=%d\n", all_bytes(p, 64, 0xeb));
    printf("usable_fill=%d\n", all_bytes(p, malloc_usable_size(p), 0xeb));
    free(p);
    /* The freed block is still mapped; look at its tail (glibc's free-list links may use
     * the first 16 bytes). Reading freed memory on purpose: that is what fill_on_free makes
     * visible to a buggy program. */
    volatile unsigned char *stale = p;
    int freed_fill = 1;
    for (int i = 16; i < 64; i++)
        freed_fill &= stale[i] == 0xef;
    printf("free_fill=%d\n", freed_fill);

    unsigned char *z = calloc(1, 64);
    printf("calloc_zero=%d\n", all_bytes(z, 64, 0));
    free(z);

    unsigned char *r = malloc(16);
    memset(r, 'a', 16);
    size_t old_usable = malloc_usable_size(r);
    r = realloc(r, 4096);
    printf("realloc_keeps=%d realloc_fill=%d\n", all_bytes(r, 16, 'a'),
           all_bytes(r + old_usable, 4096 - old_usable, 0xeb));
    free(r);
    return 0;
}

/* fill_on_alloc=32: only the first 32 bytes of a recycled block are filled. */
static int partial_fill(void)
{
    unsigned char *p = malloc(128);
    memset(p, 0x11, 128);
    free(p);
    unsigned char *q = malloc(128);
    printf("same_block=%d head_fill=%d tail_kept=%d\n", p == q, all_bytes(q, 32, 0xeb),
           all_bytes(q + 32, 96, 0x11));
    free(q);
    return 0;
}

static int usable_size(void)
{
    void *p = malloc(100);
    printf("usable=%zu\n", malloc_usable_size(p));
    free(p);
    return 0;
}

/* The allocation contract malloc debug keeps (Android's own tests). Prints "ok" or the
 * first failed check. argv[2] = "debug" when debug-only behaviour must hold too. */
#define EXPECT(cond)                                                                               \
    do {                                                                                           \
        if (!(cond)) {                                                                             \
            printf("FAILED line %d: %s\n", __LINE__, #cond);                                       \
            return 1;                                                                              \
        }                                                                                          \
    } while (0)

static int semantics(int debug)
{
    char *p = realloc(NULL, 10);
    EXPECT(p != NULL);
    memset(p, 'x', 10);
    char *q = realloc(p, 5);
    EXPECT(q == p);
    q = realloc(q, 5);
    EXPECT(q == p);
    char *g = realloc(q, 1000);
    EXPECT(g != NULL && all_bytes((unsigned char *)g, 5, 'x'));
    errno = 0;
    EXPECT(realloc(g, SIZE_MAX) == NULL && errno == ENOMEM);
    EXPECT(all_bytes((unsigned char *)g, 5, 'x'));
    errno = 0;
    EXPECT(realloc(g, 0) == NULL);

    errno = 0;
    EXPECT(malloc(SIZE_MAX) == NULL && errno == ENOMEM);
    errno = 0;
    EXPECT(calloc(SIZE_MAX / 2, 3) == NULL && errno == ENOMEM);
    errno = 0;
    EXPECT(reallocarray(NULL, SIZE_MAX / 2, 3) == NULL && errno == ENOMEM);
    p = reallocarray(NULL, 10, 10);
    EXPECT(p != NULL && malloc_usable_size(p) >= 100);
    free(p);

    p = malloc(0);
    EXPECT(p != NULL && malloc_usable_size(p) >= 1);
    free(p);

    p = memalign(1, 10);
    EXPECT(p && ((uintptr_t)p % 16) == 0);
    free(p);
    p = memalign(4096, 10);
    EXPECT(p && ((uintptr_t)p % 4096) == 0);
    memset(p, 1, 10);
    free(p);
    if (debug) {
        p = memalign(24, 10); /* rounded up to 32 */
        EXPECT(p && ((uintptr_t)p % 32) == 0);
        free(p);
    }

    void *m = (void *)0x1;
    errno = 1234;
    EXPECT(posix_memalign(&m, 11, 10) == EINVAL && errno == 1234 && m == (void *)0x1);
    EXPECT(posix_memalign(&m, SIZE_MAX / 2 + 1, 10) == ENOMEM);
    errno = 1234;
    EXPECT(posix_memalign(&m, 64, SIZE_MAX) == ENOMEM && errno == 1234);
    EXPECT(posix_memalign(&m, 256, 100) == 0 && ((uintptr_t)m % 256) == 0);
    free(m);

    if (debug) {
        errno = 0;
        EXPECT(aligned_alloc(3, 12) == NULL && errno == EINVAL);
    }
    p = aligned_alloc(64, 128);
    EXPECT(p && ((uintptr_t)p % 64) == 0);
    free(p);

    long page = sysconf(_SC_PAGESIZE);
    p = valloc(100);
    EXPECT(p && ((uintptr_t)p % (uintptr_t)page) == 0);
    free(p);
    p = pvalloc(100);
    EXPECT(p && ((uintptr_t)p % (uintptr_t)page) == 0 && malloc_usable_size(p) >= (size_t)page);
    memset(p, 1, (size_t)page);
    free(p);

    /* Growth copies everything the block could hold. */
    p = malloc(24);
    size_t u = malloc_usable_size(p);
    memset(p, 'q', u);
    p = realloc(p, 10000);
    EXPECT(all_bytes((unsigned char *)p, u, 'q'));
    free(p);
    printf("ok\n");
    return 0;
}

static int clean(void)
{
    /* Correct use of everything: must produce no report. */
    for (int i = 0; i < 1000; i++) {
        size_t n = (size_t)(i * 37) % 5000;
        char *p = malloc(n);
        memset(p, 1, n);
        p = realloc(p, n * 2 + 1);
        memset(p, 2, n * 2 + 1);
        free(p);
        void *a;
        if (posix_memalign(&a, 64, n + 1) == 0) {
            memset(a, 3, n + 1);
            free(a);
        }
    }
    char *s = strdup("heapscope");
    printf("%s ok\n", s);
    free(s);
    return 0;
}

/* Overflows the last block of the heap far enough to smash the top chunk's size field, as a
 * real overflow of the newest allocation does; leaks one block and leaves "done" in stdout's
 * buffer. Any malloc from the top chunk after this aborts in glibc. */
static __attribute__((noinline)) int top_overflow(void)
{
    char *leaked = malloc(24);
    sink = leaked;
    char *p = malloc(40);
    announce("ptr", p);
    announce("leaked", leaked);
    printf("done\n"); /* stays in stdout's buffer until exit */
    memset(p + 40, 'A', 160);
    free_it(p);
    return 0;
}

int main(int argc, char **argv)
{
    if (argc < 2) {
        fprintf(stderr, "usage: md_bugs SCENARIO\n");
        return 2;
    }
    printf("pid=%d\n", (int)getpid());
    fflush(stdout);
    const char *s = argv[1];
    if (!strcmp(s, "rear_overflow_1"))
        return rear_overflow_1();
    if (!strcmp(s, "rear_overflow_many"))
        return rear_overflow_many();
    if (!strcmp(s, "front_underflow_1"))
        return front_underflow_1();
    if (!strcmp(s, "front_underflow_many"))
        return front_underflow_many();
    if (!strcmp(s, "both_guards"))
        return both_guards();
    if (!strcmp(s, "double_free"))
        return double_free();
    if (!strcmp(s, "realloc_after_free"))
        return realloc_after_free();
    if (!strcmp(s, "free_interior"))
        return free_interior();
    if (!strcmp(s, "usable_size_interior"))
        return usable_size_interior();
    if (!strcmp(s, "fills"))
        return fills();
    if (!strcmp(s, "partial_fill"))
        return partial_fill();
    if (!strcmp(s, "usable_size"))
        return usable_size();
    if (!strcmp(s, "semantics"))
        return semantics(argc > 2 && !strcmp(argv[2], "debug"));
    if (!strcmp(s, "clean"))
        return clean();
    if (!strcmp(s, "top_overflow"))
        return top_overflow();
    fprintf(stderr, "md_bugs: unknown scenario %s\n", s);
    return 2;
}
