/* md_track.c: heap bugs and API calls for the tracking options (backtrace, free_track,
 * leak_track, verify_pointers), one scenario per argv[1]. Pointers are printed so the test
 * can build the exact reports it expects. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <malloc.h>
#include <pthread.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/types.h>
#include <unistd.h>

static void *volatile sink;

static void announce(const char *name, void *p)
{
    printf("%s=%p\n", name, p);
    fflush(stdout);
}

static __attribute__((noinline)) char *make(size_t n)
{
    return malloc(n);
}

static __attribute__((noinline)) void drop(void *p)
{
    free(p);
}

static int uaf_write(void)
{
    char *p = make(64);
    announce("ptr", p);
    drop(p);
    p[10] = 1; /* use after free: caught when the block leaves the queue (here: exit) */
    return 0;
}

static int uaf_evicted(void)
{
    char *p = make(48);
    announce("ptr", p);
    drop(p);
    p[0] = 'x';
    p[47] = 'y';
    drop(make(16)); /* with free_track=2 this evicts nothing yet */
    printf("before_evict\n");
    fflush(stdout);
    drop(make(16)); /* the third free evicts p and finds the writes */
    printf("after_evict\n");
    fflush(stdout);
    return 0;
}

static int double_free(void)
{
    char *p = make(100);
    announce("ptr", p);
    drop(p);
    drop(p);
    return 0;
}

static int realloc_after_free(void)
{
    char *p = make(100);
    announce("ptr", p);
    drop(p);
    sink = realloc(p, 200);
    printf("realloc=%p\n", sink);
    return 0;
}

static int leaks(void)
{
    announce("big", make(333));
    announce("small", make(20));
    drop(make(50)); /* not a leak */
    return 0;
}

/* calloc on the short paths (leak_track, verify_pointers, backtrace): zeroed, tracked with
 * the size asked for (nmemb * size), freed like any block; an overflowing product fails. */
static __attribute__((noinline)) void *make_zeroed(size_t nmemb, size_t size)
{
    return calloc(nmemb, size);
}

static int calloc_leaks(void)
{
    char *dirty = make(77); /* freed dirty: the calloc below gets its memory back */
    memset(dirty, 0xaa, 77);
    drop(dirty);
    unsigned char *z = make_zeroed(7, 11);
    int zero = z != NULL;
    for (size_t i = 0; zero && i < 77; i++)
        zero = z[i] == 0;
    printf("calloc_zero=%d\n", zero);
    announce("zeroed", z);
    drop(make_zeroed(3, 100)); /* not a leak */
    printf("overflow_null=%d\n", make_zeroed(SIZE_MAX / 2, 3) == NULL);
    return 0;
}

/* A failed dlopen leaves its message, allocated through the debug paths, to the thread's
 * dlerror state; glibc frees it at the next dl* call, which may be the shim's own (the leak
 * report's dlopen of the symbols plug-in at exit). Then one block leaks. */
static int failed_dlopen(void)
{
    void *h = dlopen("/nonexistent/heapscope-e2e.so", RTLD_NOW);
    const char *err = dlerror();
    printf("dlopen_failed=%d\n", h == NULL && err != NULL && strstr(err, "heapscope-e2e") != NULL);
    announce("leaked", make(55));
    return 0;
}

/* Leaks from two call paths: 300 blocks of 32 bytes from make_small, 100 of 40 to 49 bytes
 * from make_mixed, and one of 1000 bytes from make. */
static __attribute__((noinline)) void *make_small(void)
{
    return malloc(32);
}

static __attribute__((noinline)) void *make_mixed(size_t i)
{
    return malloc(40 + i % 10);
}

static int many_leaks(void)
{
    for (size_t i = 0; i < 300; i++)
        sink = make_small();
    for (size_t i = 0; i < 100; i++)
        sink = make_mixed(i);
    announce("big", make(1000));
    return 0;
}

static int stray(void)
{
    int x;
    announce("stack", &x);
    drop(&x);
    char *p = make(64);
    announce("interior", p + 8);
    printf("usable=%zu\n", malloc_usable_size(p + 8));
    drop(p);
    return 0;
}

/* A pointer into unmapped memory: nothing in front of it can be read. */
static int wild(void)
{
    void *p = (void *)0x10040;
    announce("ptr", p);
    drop(p);
    printf("survived\n");
    return 0;
}

static int tag_after_free(void)
{
    char *p = make(64);
    announce("ptr", p);
    drop(p);
    /* Header is 32 bytes before the 32-byte front guard. */
    memset(p - 64, 0x11, 4);
    return 0;
}

typedef ssize_t (*backtrace_fn)(void *, uintptr_t *, size_t);
typedef int (*iterate_fn)(uintptr_t, size_t, void (*)(uintptr_t, size_t, void *), void *);
typedef void (*toggle_fn)(void);

static void count_block(uintptr_t ptr, size_t size, void *arg)
{
    size_t *c = arg;
    (void)ptr;
    (void)size;
    c[0]++;
    c[1] += size;
}

static void *churn(void *arg)
{
    volatile int *stop = arg;
    while (!*stop) {
        void *p = malloc(32);
        free(p);
    }
    return NULL;
}

static int api(void)
{
    backtrace_fn bt = (backtrace_fn)dlsym(RTLD_DEFAULT, "malloc_backtrace");
    iterate_fn iterate = (iterate_fn)dlsym(RTLD_DEFAULT, "malloc_iterate");
    toggle_fn disable = (toggle_fn)dlsym(RTLD_DEFAULT, "malloc_disable");
    toggle_fn enable = (toggle_fn)dlsym(RTLD_DEFAULT, "malloc_enable");
    if (!bt || !iterate || !disable || !enable) {
        printf("missing API\n");
        return 1;
    }
    char *p = make(4000);
    uintptr_t frames[32];
    ssize_t n = bt(p, frames, 32);
    Dl_info info;
    int named = n > 0 && dladdr((void *)frames[0], &info) && info.dli_fbase;
    printf("frames=%zd first_in_program=%d\n", n, named);
    int unknown = 0;
    printf("unknown_frames=%zd\n", bt(&unknown, frames, 32));

    size_t counts[2] = {0, 0};
    disable();
    int rc = iterate(0, UINTPTR_MAX, count_block, counts);
    enable();
    printf("iterate_rc=%d has_block=%d\n", rc, counts[1] >= 4000);

    /* heapscope_malloc_debug_list (libmemunreachable's bulk listing): the same blocks and
     * sizes as malloc_iterate; past cap nothing is written, and the count is still whole. */
    typedef size_t (*list_fn)(uintptr_t (*)[2], size_t);
    list_fn list = (list_fn)dlsym(RTLD_DEFAULT, "heapscope_malloc_debug_list");
    size_t want = list ? list(NULL, 0) : 0, cap = want + 64;
    uintptr_t(*pairs)[2] = calloc(cap, sizeof(*pairs));
    size_t listed = 0, listed_bytes = 0, short_n = 0, now[2] = {0, 0};
    int has_p = 0, cap_kept = 1;
    if (list && pairs) {
        disable();
        iterate(0, UINTPTR_MAX, count_block, now); /* pairs is one more block */
        want = list(NULL, 0);
        pairs[1][0] = 7;
        short_n = list(pairs, 1);
        cap_kept = pairs[1][0] == 7;
        listed = list(pairs, cap);
        enable();
        for (size_t i = 0; i < listed && i < cap; i++) {
            listed_bytes += pairs[i][1];
            has_p |= pairs[i][0] == (uintptr_t)p && pairs[i][1] == 4000;
        }
    }
    free(pairs);
    printf("list_count_matches=%d list_bytes_match=%d list_has_block=%d list_cap=%d\n",
           list && listed == now[0] && want == now[0], listed_bytes == now[1], has_p,
           short_n == listed && cap_kept);

    size_t in_range[2] = {0, 0};
    iterate((uintptr_t)p, 1, count_block, in_range);
    printf("range_count=%zu range_bytes=%zu\n", in_range[0], in_range[1]);

    volatile int stop = 0;
    pthread_t t[4];
    for (int i = 0; i < 4; i++)
        pthread_create(&t[i], NULL, churn, (void *)&stop);
    for (int i = 0; i < 2000; i++) {
        disable();
        enable();
    }
    stop = 1;
    for (int i = 0; i < 4; i++)
        pthread_join(t[i], NULL);
    drop(p);
    printf("disable_loop=ok\n");
    return 0;
}

static int toggle(void)
{
    announce("before", make(111));
    raise(SIGRTMAX - 19);
    announce("during", make(222));
    raise(SIGRTMAX - 19);
    announce("after", make(333));
    return 0;
}

int main(int argc, char **argv)
{
    if (argc < 2)
        return 2;
    /* An unbuffered stdout allocates no buffer, which leak_track would (rightly) report. */
    setvbuf(stdout, NULL, _IONBF, 0);
    printf("pid=%d\n", (int)getpid());
    fflush(stdout);
    const char *s = argv[1];
    if (!strcmp(s, "uaf_write"))
        return uaf_write();
    if (!strcmp(s, "uaf_evicted"))
        return uaf_evicted();
    if (!strcmp(s, "double_free"))
        return double_free();
    if (!strcmp(s, "realloc_after_free"))
        return realloc_after_free();
    if (!strcmp(s, "leaks"))
        return leaks();
    if (!strcmp(s, "calloc_leaks"))
        return calloc_leaks();
    if (!strcmp(s, "many_leaks"))
        return many_leaks();
    if (!strcmp(s, "failed_dlopen"))
        return failed_dlopen();
    if (!strcmp(s, "stray"))
        return stray();
    if (!strcmp(s, "tag_after_free"))
        return tag_after_free();
    if (!strcmp(s, "wild"))
        return wild();
    if (!strcmp(s, "api"))
        return api();
    if (!strcmp(s, "toggle"))
        return toggle();
    return 2;
}
