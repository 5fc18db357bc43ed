/* mu_injected.c: a program started WITHOUT heapscope (no preload, plain glibc malloc) that
 * loads libmemunreachable.so itself the way an injector would (dlopen + the injected init),
 * for test_memunreachable_injected.py.
 *
 *   mu_injected LIB            serve: set up a known heap, print the facts and READY, then
 *                              answer stdin lines ("more": allocate and free some more;
 *                              "corrupt": give a live block a chunk size no chunk can have,
 *                              which the heap walk must stop at and note; EOF: finish, print
 *                              "done" and exit 0)
 *   mu_injected -              serve without loading anything (heapscope leaks -p loads the
 *                              library with ptrace)
 *   mu_injected LIB handler    install its own SIGRTMAX-16 handler first, then print init=CODE
 *   mu_injected - handler      the same handler, then serve
 *   mu_injected LIB refuse     only print init=CODE (run with another allocator preloaded)
 *
 * The heap of "serve": from the main thread and from 3 worker threads (non-main arenas),
 *   leaked: 3 blocks of 48 bytes (2 from main, 1 from worker 1) and 1 of 200000 (worker 1,
 *           mmapped), their pointers dropped;
 *   kept:   blocks of several sizes in every thread, 2 large ones (mmapped, adjacent) in worker
 *           2, all referenced from globals;
 *   freed:  10 blocks of 40 bytes per thread (7 into the tcache, 3 into a fastbin), 3 of 2000
 *           (unsorted bin, kept blocks between them).
 * Printed: init=, init_again=, usable_small=, usable_big=, leak_small=a,b,c, leak_big=a,
 * freed=..., kept=... (hex addresses), then READY.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <malloc.h>
#include <pthread.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define WORKERS 3
#define MAX_BLOCKS 64

struct owned {
    uintptr_t kept[MAX_BLOCKS]; /* plain pointers: these blocks stay reachable */
    size_t num_kept;
    uintptr_t freed[MAX_BLOCKS]; /* hidden (top bit flipped): not references */
    size_t num_freed;
    uintptr_t leaked[4]; /* hidden */
    size_t num_leaked;
};

static struct owned g_owned[WORKERS + 1];
static pthread_mutex_t g_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t g_cond = PTHREAD_COND_INITIALIZER;
static int g_ready, g_finish;

/* A non-canonical address: never inside a block (a low bit would make an interior pointer). */
static uintptr_t hide(uintptr_t p)
{
    return p ^ (1ull << 63);
}

/* The detector is conservative: stale copies of dropped pointers in dead stack slots would
 * keep their blocks alive. Zero the stack below the caller before waiting. */
static __attribute__((noinline)) void scrub(void)
{
    volatile char area[65536];
    memset((char *)area, 0, sizeof(area));
    __asm__ volatile("" : : "r"(area) : "memory");
}

static __attribute__((noinline)) void keep(struct owned *o, size_t size)
{
    void *p = malloc(size);
    memset(p, 0x11, size);
    o->kept[o->num_kept++] = (uintptr_t)p;
}

static __attribute__((noinline)) void leak(struct owned *o, size_t size)
{
    void *p = malloc(size);
    memset(p, 0x22, size);
    o->leaked[o->num_leaked++] = hide((uintptr_t)p);
}

static __attribute__((noinline)) uintptr_t alloc_hidden(size_t size)
{
    void *p = malloc(size);
    memset(p, 0x33, size);
    return hide((uintptr_t)p);
}

static __attribute__((noinline)) void free_hidden(struct owned *o, uintptr_t hidden)
{
    o->freed[o->num_freed++] = hidden;
    free((void *)hide(hidden));
}

/* Everything is allocated before anything is freed, and the 40-byte blocks are freed last:
 * a later allocation would reuse a freed block (a split of a free 2000-byte chunk, say), and
 * any request of 1 KiB or more consolidates the fastbins. Large blocks are never freed here:
 * that would raise glibc's mmap threshold under the other threads' large allocations. */
static __attribute__((noinline)) void build_heap(struct owned *o, int who)
{
    size_t sizes[] = {24, 100, 1000, 5000, 64, 300};
    for (size_t i = 0; i < sizeof(sizes) / sizeof(sizes[0]); i++)
        keep(o, sizes[i]);
    if (who == 0 || who == 1) { /* main thread, worker 1 */
        leak(o, 48);
        if (who == 0)
            leak(o, 48);
    }
    if (who == 1)
        leak(o, 200000);
    if (who == 2) {
        keep(o, 300000);
        keep(o, 300000);
    }
    uintptr_t small[10], medium[3];
    for (int i = 0; i < 10; i++)
        small[i] = alloc_hidden(40);
    for (int i = 0; i < 3; i++) {
        medium[i] = alloc_hidden(2000);
        keep(o, 24); /* keeps the free 2000-byte chunks apart, and off the top */
    }
    for (int i = 0; i < 3; i++)
        free_hidden(o, medium[i]); /* the unsorted bin */
    for (int i = 0; i < 10; i++)
        free_hidden(o, small[i]); /* 7 into the tcache, 3 into a fastbin */
}

static void *worker(void *arg)
{
    int who = (int)(intptr_t)arg;
    build_heap(&g_owned[who], who);
    scrub();
    pthread_mutex_lock(&g_lock);
    g_ready++;
    pthread_cond_broadcast(&g_cond);
    while (!g_finish)
        pthread_cond_wait(&g_cond, &g_lock);
    pthread_mutex_unlock(&g_lock);
    return NULL;
}

static void print_list(const char *key, const uintptr_t *v, size_t n, int hidden)
{
    printf("%s=", key);
    for (size_t i = 0; i < n; i++)
        printf("%s%lx", i ? "," : "", (unsigned long)(hidden ? hide(v[i]) : v[i]));
    printf("\n");
}

static __attribute__((noinline)) void print_facts(void)
{
    uintptr_t small[4], big[1], freed[(WORKERS + 1) * MAX_BLOCKS], kept[(WORKERS + 1) * MAX_BLOCKS];
    size_t ns = 0, nb = 0, nf = 0, nk = 0;
    for (int t = 0; t <= WORKERS; t++) {
        const struct owned *o = &g_owned[t];
        for (size_t i = 0; i < o->num_leaked; i++) {
            void *p = (void *)hide(o->leaked[i]);
            if (malloc_usable_size(p) > 1000)
                big[nb++] = o->leaked[i];
            else
                small[ns++] = o->leaked[i];
        }
        for (size_t i = 0; i < o->num_freed; i++)
            freed[nf++] = o->freed[i];
        for (size_t i = 0; i < o->num_kept; i++)
            kept[nk++] = o->kept[i];
    }
    printf("usable_small=%zu usable_big=%zu\n", malloc_usable_size((void *)hide(small[0])),
           malloc_usable_size((void *)hide(big[0])));
    print_list("leak_small", small, ns, 1);
    print_list("leak_big", big, nb, 1);
    print_list("freed", freed, nf, 1);
    print_list("kept", kept, nk, 0);
    memset(small, 0, sizeof(small));
    memset(big, 0, sizeof(big));
    __asm__ volatile("" : : "r"(small), "r"(big) : "memory");
}

static int serve(void);

static void on_signal(int sig)
{
    (void)sig;
}

int main(int argc, char **argv)
{
    if (argc < 2) {
        fprintf(stderr, "usage: mu_injected LIB|- [handler|refuse]\n");
        return 2;
    }
    setvbuf(stdout, NULL, _IOLBF, 0);
    if (argc > 2 && strcmp(argv[2], "handler") == 0)
        signal(SIGRTMAX - 16, on_signal);

    if (strcmp(argv[1], "-") == 0)
        return serve();
    void *lib = dlopen(argv[1], RTLD_NOW);
    if (!lib) {
        fprintf(stderr, "dlopen: %s\n", dlerror());
        return 1;
    }
    int (*init)(void) = (int (*)(void))dlsym(lib, "heapscope_unreachable_injected_init");
    if (!init) {
        fprintf(stderr, "dlsym: %s\n", dlerror());
        return 1;
    }
    int r = init();
    printf("init=%d\n", r);
    if (argc > 2 || r != 0)
        return 0;
    printf("init_again=%d\n", init());
    return serve();
}

static int serve(void)
{
    pthread_t threads[WORKERS];
    for (int i = 0; i < WORKERS; i++)
        pthread_create(&threads[i], NULL, worker, (void *)(intptr_t)(i + 1));
    build_heap(&g_owned[0], 0);
    pthread_mutex_lock(&g_lock);
    while (g_ready < WORKERS)
        pthread_cond_wait(&g_cond, &g_lock);
    pthread_mutex_unlock(&g_lock);
    print_facts();
    printf("READY\n");
    scrub();

    char line[64];
    while (fgets(line, sizeof(line), stdin)) {
        if (strncmp(line, "more", 4) == 0) {
            void *p[100];
            for (int i = 0; i < 100; i++)
                p[i] = malloc(16 + 8 * (size_t)i);
            for (int i = 0; i < 100; i++)
                free(p[i]);
            printf("more_ok\n");
        } else if (strncmp(line, "corrupt", 7) == 0) {
            /* Its neighbours stay allocated and it is never freed: glibc never reads the
             * header again (only the heap walk does). */
            static void *before, *victim, *after;
            before = malloc(64);
            victim = malloc(64);
            after = malloc(64);
            ((size_t *)victim)[-1] = 0x11; /* 16 bytes, in use before: below the minimum */
            printf("corrupt_ok %d\n", before != NULL && after != NULL);
        }
        scrub();
    }
    pthread_mutex_lock(&g_lock);
    g_finish = 1;
    pthread_cond_broadcast(&g_cond);
    pthread_mutex_unlock(&g_lock);
    for (int i = 0; i < WORKERS; i++)
        pthread_join(threads[i], NULL);
    for (int t = 0; t <= WORKERS; t++)
        for (size_t i = 0; i < g_owned[t].num_kept; i++)
            free((void *)g_owned[t].kept[i]);
    printf("done\n");
    return 0;
}
