/* hp_workload.c: programs with known allocations for the profiler's end-to-end tests.
 *
 *   hp_workload known          call sites with known totals (bytes and counts below), then
 *                              prints "known done checksum=X"
 *   hp_workload threads N      N threads, each through site_thread (THREAD_BYTES each)
 *   hp_workload fork           site_parent in the parent, site_child in a forked child
 *   hp_workload short          a few allocations and an immediate exit
 *   hp_workload custom         a custom heap "pool" through heapscope/heapprofd.h
 *   hp_workload dlopen LIB     dlopens LIB (hp_lib.c) and keeps 1000 x 1000 B from its
 *                              hp_lib_alloc
 *   hp_workload serve SECONDS  allocates and frees in a loop for SECONDS (or until SIGTERM),
 *                              then prints "serve done rounds=N checksum=X"; prints
 *                              "serving pid=P" once started
 *   hp_workload spin THREADS ROUNDS [LIB [RELOADS]]
 *                              THREADS threads, each ROUNDS rounds of 64 frees and mallocs
 *                              through site_spin (1 ms apart), then one line per thread with a
 *                              checksum of the contents (the same in every run); prints
 *                              "spinning pid=P" once started. With LIB, SIGUSR2 makes the
 *                              main thread dlopen LIB and keep 1000 x 1000 B from it; with
 *                              RELOADS, instead load LIB, keep 1000 B from it and unload it,
 *                              RELOADS times (prints "dlclose done")
 *   hp_workload dlclose LIB    20 rounds of loading LIB, keeping 1000 B from it and unloading
 *                              it at once; prints "dlclose done"
 *   hp_workload vfork          site_before_vfork, then a vforked child through site_vfork_child
 *                              (then _exit), then site_after_vfork in the parent, 100 x 100 B
 *                              each, all freed; prints "vfork done status=S"
 *   hp_workload clone_vm       the same through clone(CLONE_VM | CLONE_VFORK) on a stack of the
 *                              child's own (site_clone_child; posix_spawn's way, no vfork
 *                              call); prints "clone_vm done status=S"
 *   hp_workload placement      each allocation function in turn (realloc growing and shrinking
 *                              a block with contents), checking the contents, calloc's zeros
 *                              (also under mallopt(M_PERTURB)),
 *                              malloc_usable_size and posix_memalign's EINVAL; prints
 *                              "placement ok=1|0 aligned=A of N in_place=I of 200" where A
 *                              counts the blocks whose address is a multiple of 1024 and I the
 *                              shrinking reallocs that kept their block's address
 * Every site is a noinline function that calls the allocator itself (no tail calls), so the
 * leaf frame of each sampled stack names the site.
 */
#define _GNU_SOURCE
#include <heapscope/heapprofd.h>

#include <dlfcn.h>
#include <errno.h>
#include <malloc.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define NOINLINE __attribute__((noinline, noclone))

static uint64_t g_checksum;

static void touch(void *p, size_t n)
{
    if (p == NULL) {
        fprintf(stderr, "allocation failed\n");
        exit(3);
    }
    memset(p, 0x5a, n < 64 ? n : 64);
    g_checksum = g_checksum * 31 + n;
}

/* known: site_small 20000 x 64 B (first 1000 kept), site_medium 5000 x 1000 B (all freed),
 * site_large 100 x 100000 B (kept), site_calloc 3000 x 24 x 10 B (freed), site_realloc 2000 x
 * (malloc 100 B then realloc to 300 B, kept), site_memalign 500 x 4096 B aligned 64 (freed). */
NOINLINE void *site_small(void)
{
    void *p = malloc(64);
    __asm__ volatile("" ::: "memory");
    return p;
}

NOINLINE void *site_medium(void)
{
    void *p = malloc(1000);
    __asm__ volatile("" ::: "memory");
    return p;
}

NOINLINE void *site_large(void)
{
    void *p = malloc(100000);
    __asm__ volatile("" ::: "memory");
    return p;
}

NOINLINE void *site_calloc(void)
{
    void *p = calloc(24, 10);
    __asm__ volatile("" ::: "memory");
    return p;
}

NOINLINE void *site_realloc(void *old)
{
    void *p = realloc(old, 300);
    __asm__ volatile("" ::: "memory");
    return p;
}

NOINLINE void *site_memalign(void)
{
    void *p = NULL;
    if (posix_memalign(&p, 64, 4096) != 0)
        p = NULL;
    __asm__ volatile("" ::: "memory");
    return p;
}

static void *g_kept[4000];
static size_t g_num_kept;

static void keep(void *p)
{
    g_kept[g_num_kept++] = p;
}

static int known(void)
{
    for (int i = 0; i < 20000; i++) {
        void *p = site_small();
        touch(p, 64);
        if (i < 1000)
            keep(p);
        else
            free(p);
    }
    for (int i = 0; i < 5000; i++) {
        void *p = site_medium();
        touch(p, 1000);
        free(p);
    }
    for (int i = 0; i < 100; i++) {
        void *p = site_large();
        touch(p, 100000);
        keep(p);
    }
    for (int i = 0; i < 3000; i++) {
        void *p = site_calloc();
        touch(p, 240);
        free(p);
    }
    for (int i = 0; i < 2000; i++) {
        void *p = malloc(100); /* from known() itself: the realloc's old block */
        touch(p, 100);
        p = site_realloc(p);
        touch(p, 300);
        keep(p);
    }
    for (int i = 0; i < 500; i++) {
        void *p = site_memalign();
        touch(p, 4096);
        free(p);
    }
    printf("known done checksum=%llu\n", (unsigned long long)g_checksum);
    return 0;
}

/* threads: each thread 4000 x 512 B through site_thread, half kept until the thread ends. */
#define THREAD_ALLOCS 4000
NOINLINE void *site_thread(void)
{
    void *p = malloc(512);
    __asm__ volatile("" ::: "memory");
    return p;
}

static void *thread_main(void *arg)
{
    (void)arg;
    void **kept = malloc(sizeof(void *) * THREAD_ALLOCS);
    for (int i = 0; i < THREAD_ALLOCS; i++) {
        kept[i] = site_thread();
        memset(kept[i], 1, 16);
        if (i % 2)
            free(kept[i]);
    }
    for (int i = 0; i < THREAD_ALLOCS; i += 2)
        free(kept[i]);
    free(kept);
    return NULL;
}

static int threads(int n)
{
    pthread_t t[64];
    if (n < 1 || n > 64)
        return 2;
    for (int i = 0; i < n; i++)
        pthread_create(&t[i], NULL, thread_main, NULL);
    for (int i = 0; i < n; i++)
        pthread_join(t[i], NULL);
    printf("threads done n=%d\n", n);
    return 0;
}

/* fork: 1000 x 2000 B in the parent before and after the fork, 1000 x 3000 B in the child. */
NOINLINE void *site_parent(void)
{
    void *p = malloc(2000);
    __asm__ volatile("" ::: "memory");
    return p;
}

NOINLINE void *site_child(void)
{
    void *p = malloc(3000);
    __asm__ volatile("" ::: "memory");
    return p;
}

static int forked(void)
{
    for (int i = 0; i < 500; i++)
        keep(site_parent());
    fflush(stdout);
    pid_t pid = fork();
    if (pid == 0) {
        for (int i = 0; i < 1000; i++)
            free(site_child());
        /* Frees of the parent's sampled blocks must not reach the parent's profile. */
        for (size_t i = 0; i < g_num_kept; i++)
            free(g_kept[i]);
        printf("child done\n");
        exit(0);
    }
    int status;
    waitpid(pid, &status, 0);
    for (int i = 0; i < 500; i++)
        keep(site_parent());
    printf("fork done child_status=%d\n", WIFEXITED(status) ? WEXITSTATUS(status) : -1);
    return 0;
}

/* short: three blocks of 50000 B kept, and out. */
NOINLINE void *site_short(void)
{
    void *p = malloc(50000);
    __asm__ volatile("" ::: "memory");
    return p;
}

static int short_lived(void)
{
    for (int i = 0; i < 3; i++)
        keep(site_short());
    return 0;
}

/* custom: a pool heap: 1000 x 128 B reported (all live), 500 of them freed. */
static int custom(void)
{
    static char pool[1000][128];
    uint32_t heap = heapscope_heap_register_if_loaded("pool", 1);
    for (int i = 0; i < 1000; i++)
        heapscope_heap_report_alloc_if_loaded(heap, (uintptr_t)pool[i], 128);
    for (int i = 0; i < 500; i++)
        heapscope_heap_report_free_if_loaded(heap, (uintptr_t)pool[i]);
    printf("custom done heap=%u\n", heap);
    return 0;
}

typedef void *(*lib_alloc_fn)(size_t);

/* Loads the library at path into *lib: its hp_lib_alloc, or NULL (said on stderr). */
static lib_alloc_fn load_lib(const char *path, void **lib)
{
    *lib = dlopen(path, RTLD_NOW);
    lib_alloc_fn alloc = *lib ? (lib_alloc_fn)dlsym(*lib, "hp_lib_alloc") : NULL;
    if (alloc == NULL)
        fprintf(stderr, "dlopen %s: %s\n", path, dlerror());
    return alloc;
}

/* dlopen: a call site in a library loaded after the profiler attached. */
static int dlopened(const char *path)
{
    void *lib;
    lib_alloc_fn alloc = load_lib(path, &lib);
    if (alloc == NULL)
        return 3;
    for (int i = 0; i < 1000; i++)
        keep(alloc(1000));
    printf("dlopen done\n");
    return 0;
}

/* dlclose: rounds of loading the library, one allocation from it, and unloading it at once,
 * so that its sample is still in the buffer when the library goes away (and the library comes
 * back at the same address, with its link map at the same place). */
static int dlclosed(const char *path, int rounds)
{
    for (int round = 0; round < rounds; round++) {
        void *lib;
        lib_alloc_fn alloc = load_lib(path, &lib);
        if (alloc == NULL)
            return 3;
        keep(alloc(1000));
        dlclose(lib);
    }
    printf("dlclose done\n");
    return 0;
}

/* serve: a steady churn through site_serve until the time is up or SIGTERM. */
static volatile sig_atomic_t g_stop;

static void on_term(int sig)
{
    (void)sig;
    g_stop = 1;
}

NOINLINE void *site_serve(size_t n)
{
    void *p = malloc(n);
    __asm__ volatile("" ::: "memory");
    return p;
}

static int serve(int seconds)
{
    signal(SIGTERM, on_term);
    printf("serving pid=%d\n", (int)getpid());
    fflush(stdout);
    void *ring[256] = {0};
    unsigned long rounds = 0;
    struct timespec start, now;
    clock_gettime(CLOCK_MONOTONIC, &start);
    for (;;) {
        for (int i = 0; i < 256; i++) {
            free(ring[i]);
            size_t n = 16 + (size_t)((rounds * 7 + (unsigned)i * 13) % 2000);
            ring[i] = site_serve(n);
            touch(ring[i], n);
        }
        rounds++;
        struct timespec ts = {0, 1000000};
        nanosleep(&ts, NULL);
        clock_gettime(CLOCK_MONOTONIC, &now);
        double elapsed = (double)(now.tv_sec - start.tv_sec) + (now.tv_nsec - start.tv_nsec) / 1e9;
        if (g_stop || elapsed >= seconds)
            break;
    }
    for (int i = 0; i < 256; i++)
        free(ring[i]);
    printf("serve done checksum_ok=%d\n", g_checksum != 0);
    return 0;
}

/* spin: deterministic churn in several threads, for attaching to a running process. */
struct spinner {
    pthread_t thread;
    int index, rounds;
    uint64_t sum;
};

static volatile sig_atomic_t g_dlopen_now;

static void on_usr2(int sig)
{
    (void)sig;
    g_dlopen_now = 1;
}

NOINLINE void *site_spin(size_t n)
{
    void *p = malloc(n);
    __asm__ volatile("" ::: "memory");
    return p;
}

static void *spin_thread(void *arg)
{
    struct spinner *s = arg;
    unsigned char *ring[64] = {0};
    size_t sizes[64] = {0};
    for (int r = 0; r < s->rounds; r++) {
        for (int i = 0; i < 64; i++) {
            if (ring[i] != NULL)
                for (size_t k = 0; k < sizes[i]; k += 61)
                    s->sum = s->sum * 1099511628211ull + ring[i][k];
            free(ring[i]);
            sizes[i] = 16 + (size_t)((r * 7 + i * 13 + s->index * 5) % 3000);
            ring[i] = site_spin(sizes[i]);
            for (size_t k = 0; k < sizes[i]; k++)
                ring[i][k] = (unsigned char)(k * 31 + (size_t)r + (size_t)i);
        }
        struct timespec ts = {0, 1000000};
        nanosleep(&ts, NULL);
    }
    for (int i = 0; i < 64; i++)
        free(ring[i]);
    return NULL;
}

static int spin(int num_threads, int rounds, const char *lib, int reloads)
{
    struct spinner s[16];
    if (num_threads < 1 || num_threads > 16)
        return 2;
    signal(SIGUSR2, on_usr2);
    printf("spinning pid=%d\n", (int)getpid());
    for (int t = 1; t < num_threads; t++) {
        s[t] = (struct spinner){.index = t, .rounds = rounds};
        pthread_create(&s[t].thread, NULL, spin_thread, &s[t]);
    }
    s[0] = (struct spinner){.index = 0, .rounds = rounds};
    if (lib != NULL) {
        /* The main thread waits for the signal, then loads the library and allocates. */
        while (!g_dlopen_now) {
            struct timespec ts = {0, 10000000};
            nanosleep(&ts, NULL);
        }
        int rc = reloads > 0 ? dlclosed(lib, reloads) : dlopened(lib);
        if (rc != 0)
            return rc;
    }
    spin_thread(&s[0]);
    for (int t = 1; t < num_threads; t++)
        pthread_join(s[t].thread, NULL);
    for (int t = 0; t < num_threads; t++)
        printf("spin thread %d checksum=%llu\n", t, (unsigned long long)s[t].sum);
    return 0;
}

static __attribute__((noinline)) void site_before_vfork(void **keep)
{
    for (int i = 0; i < 100; i++)
        keep[i] = malloc(100);
}

static __attribute__((noinline)) void site_vfork_child(void **keep)
{
    for (int i = 0; i < 100; i++)
        keep[i] = malloc(100);
}

static __attribute__((noinline)) void site_after_vfork(void **keep)
{
    for (int i = 0; i < 100; i++)
        keep[i] = malloc(100);
}

/* The child allocates in the parent's memory (vfork's contract allows little more than
 * _exit; glibc's malloc works there) and the parent frees what it allocated. */
static int vforked(void)
{
    static void *before[100], *child[100], *after[100];
    site_before_vfork(before);
    pid_t pid = vfork();
    if (pid == 0) {
        site_vfork_child(child);
        _exit(7);
    }
    int status = -1;
    if (pid > 0)
        waitpid(pid, &status, 0);
    site_after_vfork(after);
    for (int i = 0; i < 100; i++) {
        free(before[i]);
        free(child[i]);
        free(after[i]);
    }
    printf("vfork done status=%d\n", WIFEXITED(status) ? WEXITSTATUS(status) : -1);
    return 0;
}

static __attribute__((noinline)) void site_clone_child(void **keep)
{
    for (int i = 0; i < 100; i++)
        keep[i] = malloc(100);
}

static void *g_clone_blocks[100];

static int clone_child(void *arg)
{
    (void)arg;
    site_clone_child(g_clone_blocks);
    return 7;
}

/* posix_spawn's way: clone(CLONE_VM | CLONE_VFORK) with a stack of the child's own, no vfork
 * call for the client to see; here the child allocates (in the parent's memory, the parent
 * suspended meanwhile) and the parent frees what it allocated. */
static int clone_vm(void)
{
    static void *before[100], *after[100];
    site_before_vfork(before);
    size_t stack_bytes = 256 * 1024;
    char *stack = malloc(stack_bytes);
    pid_t pid = clone(clone_child, stack + stack_bytes, CLONE_VM | CLONE_VFORK | SIGCHLD, NULL);
    int status = -1;
    if (pid > 0)
        waitpid(pid, &status, 0);
    free(stack);
    site_after_vfork(after);
    for (int i = 0; i < 100; i++) {
        free(before[i]);
        free(g_clone_blocks[i]);
        free(after[i]);
    }
    printf("clone_vm done status=%d\n", WIFEXITED(status) ? WEXITSTATUS(status) : -1);
    return 0;
}

/* For placement: counts the blocks at a multiple of 1024 (where the profiler places the blocks
 * it samples) and checks that each is usable as asked. */
static unsigned g_placed, g_blocks, g_in_place;
static int g_placement_ok = 1;

static void *placed(void *p, size_t size)
{
    if (p == NULL || malloc_usable_size(p) < size) {
        g_placement_ok = 0;
        return p;
    }
    g_blocks++;
    g_placed += ((uintptr_t)p & 1023) == 0;
    return p;
}

static int placement(void)
{
    for (unsigned i = 0; i < 200; i++) {
        size_t n = 24 + (size_t)(i * 37) % 3000;
        unsigned char *m = placed(malloc(n), n);
        unsigned char *c = placed(calloc(1, n), n);
        for (size_t k = 0; m && c && k < n; k++) {
            g_placement_ok &= c[k] == 0;
            m[k] = (unsigned char)(k * 7 + i);
        }
        /* Growing, then shrinking: the contents move with the block. */
        unsigned char *r = placed(realloc(m, n * 3), n * 3);
        for (size_t k = 0; r && k < n; k++)
            g_placement_ok &= r[k] == (unsigned char)(k * 7 + i);
        unsigned char *s = placed(realloc(r, n / 2), n / 2);
        g_in_place += s == r; /* a shrinking block stays where it is, sampled or not */
        for (size_t k = 0; s && k < n / 2; k++)
            g_placement_ok &= s[k] == (unsigned char)(k * 7 + i);
        void *a = placed(aligned_alloc(64, 128), 128);
        g_placement_ok &= ((uintptr_t)a & 63) == 0;
        void *pm = NULL;
        g_placement_ok &= posix_memalign(&pm, 4096, n) == 0 && ((uintptr_t)pm & 4095) == 0;
        placed(pm, n);
        void *bad = NULL;
        g_placement_ok &= posix_memalign(&bad, 24, n) == EINVAL && bad == NULL;
        free(s);
        free(c);
        free(a);
        free(pm);
    }
    /* A big calloc (glibc mmaps it) stays cleared while glibc perturbs fresh memory. */
    mallopt(M_PERTURB, 0xa5);
    size_t big = (size_t)1 << 20;
    unsigned char *z = placed(calloc(1, big), big);
    for (size_t k = 0; z && k < big; k += 4096)
        g_placement_ok &= z[k] == 0 && z[k + 4095] == 0;
    /* Shrunk, it stays placed (glibc mremaps it, keeping its offset in the page). */
    unsigned char *zs = placed(realloc(z, big / 2), big / 2);
    for (size_t k = 0; zs && k < big / 2; k += 4096)
        g_placement_ok &= zs[k] == 0 && zs[k + 4095] == 0;
    free(zs);
    mallopt(M_PERTURB, 0);
    printf("placement ok=%d aligned=%u of %u in_place=%u of 200\n", g_placement_ok, g_placed,
           g_blocks, g_in_place);
    return g_placement_ok ? 0 : 1;
}

/* big_frames: allocations under two frames with big locals (the shape of sqlite3's shell,
 * whose outer frames hold KiB of buffers), then under a chain of small frames that lies where
 * those locals were. Each phase starts with one sample, then two rounds of samples from
 * rotating stack pointers, a pause after each so that the daemon reads them before the next:
 * the daemon notes as gaps only parts that call paths kept unread for 200 ms. The later copies
 * of the first phase leave the locals out (stack_gap.h); the first sample of the second phase
 * needs words there, ends truncated, and the thread's later copies have no gaps. */
#define BIG_FRAMES_ALLOCS 800

static void pause_ms(long ms)
{
    struct timespec ts = {ms / 1000, (ms % 1000) * 1000000};
    nanosleep(&ts, NULL);
}

NOINLINE void *site_under_big(void)
{
    void *p = malloc(48);
    __asm__ volatile("" ::: "memory");
    return p;
}

NOINLINE void *site_over_gap(void)
{
    void *p = malloc(48);
    __asm__ volatile("" ::: "memory");
    return p;
}

NOINLINE static void *one_deeper(void *(*site)(void))
{
    void *p = site();
    __asm__ volatile("" ::: "memory");
    return p;
}

NOINLINE static void *two_deeper(void *(*site)(void))
{
    void *p = one_deeper(site);
    __asm__ volatile("" ::: "memory");
    return p;
}

/* From three stack pointers in turn: whichever samples the daemon studies (1 in 8), two in a
 * row come from different ones. */
static void allocate_rotating(void *(*site)(void), int n)
{
    for (int i = 0; i < n; i++)
        free(i % 3 == 0 ? site() : i % 3 == 1 ? one_deeper(site) : two_deeper(site));
}

static void allocate_phase(void *(*site)(void))
{
    free(site()); /* alone: with the gaps of an earlier phase, the one truncated copy */
    pause_ms(300);
    allocate_rotating(site, 24);
    pause_ms(300); /* the daemon notes a gap that stayed unread for 200 ms */
    allocate_rotating(site, 24);
    pause_ms(300);
    allocate_rotating(site, BIG_FRAMES_ALLOCS);
}

NOINLINE static unsigned big_inner(void)
{
    volatile char locals[3000];
    locals[0] = 1;
    locals[2999] = 2;
    allocate_phase(site_under_big);
    return (unsigned)(locals[0] + locals[2999]);
}

NOINLINE static unsigned big_outer(void)
{
    volatile char locals[6000];
    locals[0] = 3;
    locals[5999] = 4;
    return big_inner() + (unsigned)(locals[0] + locals[5999]);
}

NOINLINE static unsigned small_frames(int depth)
{
    volatile char pad[48];
    pad[0] = (char)depth;
    if (depth > 0)
        return small_frames(depth - 1) + (unsigned)pad[0];
    allocate_phase(site_over_gap);
    return (unsigned)pad[0];
}

static int big_frames(void)
{
    unsigned sum = big_outer();
    sum += small_frames(200); /* 200 frames of some 80 bytes: over all of big_outer's */
    printf("big frames done sum=%u\n", sum);
    return 0;
}

int main(int argc, char **argv)
{
    setvbuf(stdout, NULL, _IOLBF, 0);
    if (argc >= 2 && strcmp(argv[1], "clone_vm") == 0)
        return clone_vm();
    if (argc >= 2 && strcmp(argv[1], "vfork") == 0)
        return vforked();
    if (argc >= 2 && strcmp(argv[1], "placement") == 0)
        return placement();
    if (argc >= 2 && strcmp(argv[1], "known") == 0)
        return known();
    if (argc >= 3 && strcmp(argv[1], "threads") == 0)
        return threads(atoi(argv[2]));
    if (argc >= 2 && strcmp(argv[1], "fork") == 0)
        return forked();
    if (argc >= 2 && strcmp(argv[1], "short") == 0)
        return short_lived();
    if (argc >= 2 && strcmp(argv[1], "custom") == 0)
        return custom();
    if (argc >= 3 && strcmp(argv[1], "dlopen") == 0)
        return dlopened(argv[2]);
    if (argc >= 3 && strcmp(argv[1], "dlclose") == 0)
        return dlclosed(argv[2], 20);
    if (argc >= 3 && strcmp(argv[1], "serve") == 0)
        return serve(atoi(argv[2]));
    if (argc >= 2 && strcmp(argv[1], "big_frames") == 0)
        return big_frames();
    if (argc >= 4 && strcmp(argv[1], "spin") == 0)
        return spin(atoi(argv[2]), atoi(argv[3]), argc >= 5 ? argv[4] : NULL,
                    argc >= 6 ? atoi(argv[5]) : 0);
    fprintf(stderr, "usage: hp_workload known|threads N|fork|short|custom|dlopen LIB|serve "
                    "SECONDS|spin THREADS ROUNDS [LIB [RELOADS]]|big_frames|dlclose LIB\n");
    return 2;
}
