/* md_guard.c: heap bugs caught at the faulting access (page_guard, sample_guard), for
 * tests/e2e/test_malloc_debug_guard.py.
 *
 *   md_guard SCENARIO [KIND [WHERE]]
 *     KIND   how the block is allocated: malloc (128 bytes), calloc (16 x 8), realloc (32
 *            bytes grown to 128), memalign (128 bytes aligned to 64); malloc by default
 *     WHERE  main (default) or thread: the scenario runs in a second thread
 *
 * Every bug is in a function of its own (read_past_end, write_before_start, free_again ...),
 * so that the test can check the first frame of the access stack; the block is allocated by
 * alloc_block and freed by free_block. The program prints its pid, the block's pointer and
 * size before the bug, and "survived" if it is still running after it. Blocks are 128 bytes,
 * a multiple of 16, so that their end touches the guard page (see slack_overflow for a size
 * that does not).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <malloc.h>
#include <pthread.h>
#include <setjmp.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#define NOINLINE __attribute__((noinline, noclone))
#define BLOCK 128

static const char *g_kind = "malloc";
static char *volatile g_null_page = (char *)16; /* an address no program maps */
static void *volatile g_sink;

static void say(const char *key, const void *value)
{
    printf("%s=%p\n", key, value);
    fflush(stdout);
}

static NOINLINE char *alloc_block(void)
{
    char *p;
    if (strcmp(g_kind, "calloc") == 0) {
        p = calloc(16, BLOCK / 16);
    } else if (strcmp(g_kind, "realloc") == 0) {
        p = malloc(32);
        memset(p, 7, 32);
        p = realloc(p, BLOCK);
    } else if (strcmp(g_kind, "memalign") == 0) {
        p = memalign(64, BLOCK);
    } else {
        p = malloc(BLOCK);
    }
    if (!p) {
        printf("allocation failed\n");
        exit(2);
    }
    memset(p, 1, BLOCK);
    say("ptr", p);
    printf("size=%d\n", BLOCK);
    fflush(stdout);
    return p;
}

static NOINLINE void free_block(void *p)
{
    free(p);
}

static NOINLINE int read_past_end(volatile char *p, size_t index)
{
    return p[index];
}

static NOINLINE void write_past_end(volatile char *p, size_t index)
{
    p[index] = 42;
}

static NOINLINE int read_before_start(volatile char *p, size_t back)
{
    return p[-(long)back];
}

static NOINLINE void write_before_start(volatile char *p, size_t back)
{
    p[-(long)back] = 42;
}

static NOINLINE int read_after_free(volatile char *p)
{
    return p[8];
}

static NOINLINE void write_after_free(volatile char *p)
{
    p[8] = 42;
}

static NOINLINE void free_again(void *p)
{
    free(p);
}

static NOINLINE void free_interior(char *p)
{
    free(p + 16);
}

/* realloc to a size that cannot stay in place: the old pointer is freed here. */
static NOINLINE char *grow_block(char *p)
{
    char *q = realloc(p, 3 * BLOCK);
    if (!q) {
        printf("realloc failed\n");
        exit(2);
    }
    say("moved", q);
    return q;
}

/* Other allocations after a free, the ones that would reuse its memory without a guard. */
static NOINLINE void allocate_others(void)
{
    for (int i = 0; i < 20; i++) {
        char *q = malloc(BLOCK);
        memset(q, 2, BLOCK);
        g_sink = q; /* kept: they stay live */
    }
}

/* ---- the scenarios ---- */

static int bug(const char *s)
{
    if (strcmp(s, "read_past_end_1") == 0) {
        g_sink = (void *)(intptr_t)read_past_end(alloc_block(), BLOCK);
    } else if (strcmp(s, "write_past_end_1") == 0) {
        write_past_end(alloc_block(), BLOCK);
    } else if (strcmp(s, "read_past_end_100") == 0) {
        g_sink = (void *)(intptr_t)read_past_end(alloc_block(), BLOCK + 99);
    } else if (strcmp(s, "write_past_end_100") == 0) {
        write_past_end(alloc_block(), BLOCK + 99);
    } else if (strcmp(s, "read_before_start_1") == 0) {
        g_sink = (void *)(intptr_t)read_before_start(alloc_block(), 1);
    } else if (strcmp(s, "write_before_start_1") == 0) {
        write_before_start(alloc_block(), 1);
    } else if (strcmp(s, "read_before_start_100") == 0) {
        g_sink = (void *)(intptr_t)read_before_start(alloc_block(), 100);
    } else if (strcmp(s, "write_before_start_100") == 0) {
        write_before_start(alloc_block(), 100);
    } else if (strcmp(s, "read_after_free") == 0) {
        char *p = alloc_block();
        free_block(p);
        g_sink = (void *)(intptr_t)read_after_free(p);
    } else if (strcmp(s, "write_after_free") == 0) {
        char *p = alloc_block();
        free_block(p);
        write_after_free(p);
    } else if (strcmp(s, "read_after_free_twice") == 0) {
        char *p = alloc_block();
        free_block(p);
        g_sink = (void *)(intptr_t)read_after_free(p);
        g_sink = (void *)(intptr_t)read_past_end(p, BLOCK - 1);
    } else if (strcmp(s, "read_after_free_later") == 0) {
        char *p = alloc_block();
        free_block(p);
        allocate_others();
        g_sink = (void *)(intptr_t)read_after_free(p);
    } else if (strcmp(s, "write_after_free_later") == 0) {
        char *p = alloc_block();
        free_block(p);
        allocate_others();
        write_after_free(p);
    } else if (strcmp(s, "read_after_realloc") == 0) {
        char *p = alloc_block();
        g_sink = grow_block(p);
        g_sink = (void *)(intptr_t)read_after_free(p);
    } else if (strcmp(s, "double_free") == 0) {
        char *p = alloc_block();
        free_block(p);
        free_again(p);
    } else if (strcmp(s, "free_interior") == 0) {
        char *p = alloc_block();
        free_interior(p);
        free_block(p); /* the real free is clean */
    } else {
        return -1;
    }
    return 0;
}

static void *thread_main(void *arg)
{
    return (void *)(intptr_t)bug(arg);
}

static NOINLINE int run_bug(const char *s, const char *where)
{
    if (strcmp(where, "thread") != 0)
        return bug(s);
    pthread_t t;
    void *ret;
    pthread_create(&t, NULL, thread_main, (void *)s);
    pthread_join(t, &ret);
    return (int)(intptr_t)ret;
}

/* A 100-byte block ends 12 bytes short of its guard page (malloc's 16-byte alignment): a
 * one-byte overflow lands in the slack, which is checked at free. */
static int slack_overflow(void)
{
    char *p = malloc(100);
    say("ptr", p);
    p[100] = 0;
    free_block(p);
    return 0;
}

/* Allocation calls with their contracts checked, and blocks used to their last byte: nothing
 * must be reported. One block (333 bytes, from leak_one) is leaked on purpose. */
static NOINLINE void *leak_one(void)
{
    return malloc(333);
}

static int check(int ok, const char *what)
{
    if (!ok)
        printf("FAILED: %s\n", what);
    return ok ? 0 : 1;
}

static int clean(void)
{
    int bad = 0;
    for (size_t size = 1; size <= 70000; size = size * 3 + 1) {
        char *p = malloc(size);
        memset(p, 3, size);
        bad |= check(((uintptr_t)p & 15) == 0, "malloc alignment");
        bad |= check(malloc_usable_size(p) >= size, "malloc_usable_size");
        char *q = realloc(p, size * 2);
        bad |= check(q[size - 1] == 3, "realloc copy");
        memset(q, 4, size * 2);
        q = realloc(q, size / 2 + 1);
        bad |= check(q[size / 2] == 4, "realloc shrink");
        free(q);
        char *z = calloc(size, 1);
        for (size_t i = 0; i < size; i++)
            bad |= check(z[i] == 0, "calloc zero");
        free(z);
    }
    static const size_t aligns[] = {16, 64, 4096, 8192, 65536, 1 << 20};
    for (size_t i = 0; i < sizeof(aligns) / sizeof(aligns[0]); i++) {
        size_t a = aligns[i];
        char *m = memalign(a, 100);
        bad |= check(((uintptr_t)m & (a - 1)) == 0, "memalign alignment");
        memset(m, 5, 100);
        free(m);
        char *aa = aligned_alloc(a, 5000);
        bad |= check(aa && ((uintptr_t)aa & (a - 1)) == 0, "aligned_alloc alignment");
        memset(aa, 5, 5000);
        free(aa);
        void *pm = NULL;
        bad |= check(posix_memalign(&pm, a, 10) == 0 && ((uintptr_t)pm & (a - 1)) == 0,
                     "posix_memalign");
        memset(pm, 5, 10);
        free(pm);
    }
    char *v = valloc(10);
    bad |= check(((uintptr_t)v & 4095) == 0, "valloc");
    free(v);
    void *pm;
    bad |= check(posix_memalign(&pm, 11, 10) == EINVAL, "posix_memalign EINVAL");
    errno = 0;
    bad |= check(malloc(SIZE_MAX) == NULL && errno == ENOMEM, "malloc(SIZE_MAX)");
    bad |= check(malloc_usable_size(NULL) == 0, "malloc_usable_size(NULL)");
    g_sink = leak_one();
    printf("clean=%s\n", bad ? "no" : "yes");
    return bad;
}

/* The program's own SIGSEGV handler: it gets the faults that are not in guarded memory. */
static sigjmp_buf g_jump;
static volatile sig_atomic_t g_own_caught;

static void own_handler(int sig, siginfo_t *si, void *uc)
{
    (void)sig;
    (void)si;
    (void)uc;
    g_own_caught++;
    siglongjmp(g_jump, 1);
}

static void own_plain_handler(int sig)
{
    own_handler(sig, NULL, NULL);
}

/* glibc's sigaction under its internal name: installs without going through an interposed
 * sigaction, as a program calling the system call itself would. */
extern int __sigaction(int sig, const struct sigaction *act, struct sigaction *old);

static NOINLINE int touch_unmapped(void)
{
    char *page = mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    munmap(page, 4096);
    return *(volatile char *)page;
}

/* how: sigaction, signal or direct (__sigaction, behind the shim's back). Then a fault of the
 * program's own, which its handler must get, then (with "then_bug") a guarded-memory bug. */
static int own_handler_scenario(const char *how, int then_bug)
{
    struct sigaction sa, query;
    memset(&sa, 0, sizeof(sa));
    sa.sa_sigaction = own_handler;
    sa.sa_flags = SA_SIGINFO;
    sigemptyset(&sa.sa_mask);
    if (strcmp(how, "signal") == 0) {
        signal(SIGSEGV, own_plain_handler);
    } else if (strcmp(how, "direct") == 0) {
        __sigaction(SIGSEGV, &sa, NULL);
        /* Enough guarded allocations for the shim to look at its handler again. */
        for (int i = 0; i < 3000; i++)
            free(malloc(24));
    } else {
        sigaction(SIGSEGV, &sa, NULL);
    }
    sigaction(SIGSEGV, NULL, &query);
    int own = (query.sa_flags & SA_SIGINFO) ? query.sa_sigaction == own_handler
                                            : query.sa_handler == own_plain_handler;
    printf("query=%s\n", own ? "own" : "other");
    /* What the kernel itself has: with guarded memory on, the shim's handler stays in front
     * (the program's is chained to). */
    struct {
        void *handler;
        unsigned long flags;
        void *restorer;
        unsigned long mask;
    } kernel;
    syscall(SYS_rt_sigaction, SIGSEGV, NULL, &kernel, sizeof(kernel.mask));
    own = kernel.handler == (void *)own_handler || kernel.handler == (void *)own_plain_handler;
    printf("kernel=%s\n", own ? "own" : "other");
    for (int i = 0; i < 2; i++)
        if (sigsetjmp(g_jump, 1) == 0)
            g_sink = (void *)(intptr_t)touch_unmapped();
    printf("own_caught=%d\n", (int)g_own_caught);
    fflush(stdout);
    if (then_bug)
        g_sink = (void *)(intptr_t)read_past_end(alloc_block(), BLOCK);
    return 0;
}

/* fork: the child inherits the guarded blocks and the handler. */
static int fork_use_after_free(void)
{
    char *p = alloc_block();
    fflush(stdout);
    pid_t child = fork();
    if (child == 0) {
        free_block(p);
        g_sink = (void *)(intptr_t)read_after_free(p);
        _exit(0);
    }
    int status = 0;
    waitpid(child, &status, 0);
    printf("child_signal=%d\n", WIFSIGNALED(status) ? WTERMSIG(status) : 0);
    p[0] = 1; /* the parent's block is still live */
    free_block(p);
    return 0;
}

/* heapscope leaks on guarded memory. Reachable: g_reach -> a block -> another block (found
 * only by scanning the first, which is guarded too). Leaked: 4321 bytes (leak_big) and 77
 * bytes (leak_small). Freed blocks (PROT_NONE pages) and the guard page after a live block
 * stay pointed at from g_stale: the scan must never read them. With `protect`, a reachable
 * block of 8192 bytes has a page the program made PROT_NONE itself (printed as own_page=): the
 * scan reads it and the detector's own fault handler must get that fault. Prints "ready",
 * waits for a line on stdin (heapscope leaks -p checks meanwhile), then exits. */
static void *volatile g_reach;
static void *volatile g_stale[9];

static NOINLINE void leak_big(void)
{
    memset(malloc(4321), 9, 4321);
}

static NOINLINE void leak_small(void)
{
    memset(malloc(77), 9, 77);
}

/* Zeroes the stack below the caller, where the calls above left copies of the pointers. */
static NOINLINE void scrub(void)
{
    volatile char area[65536];
    memset((char *)area, 0, sizeof(area));
    __asm__ volatile("" : : "r"(area) : "memory");
}

static NOINLINE void make_heap(int protect)
{
    void **a = malloc(64), **b = malloc(200);
    char *own = malloc(8192);
    memset(b, 1, 200);
    memset(own, 1, 8192);
    a[0] = b;
    a[1] = own;
    g_reach = a;
    char *own_page = (char *)(((uintptr_t)own + 4095) & ~(uintptr_t)4095);
    if (protect) {
        mprotect(own_page, 4096, PROT_NONE);
        say("own_page", own_page);
    }
    for (int i = 0; i < 8; i++) {
        char *f = malloc(100 + 50 * i);
        memset(f, 2, 100 + 50 * i);
        free(f);
        g_stale[i] = f;
    }
    g_stale[8] = (char *)b + 200 + 4096; /* a page past b: PROT_NONE */
    leak_big();
    leak_small();
}

static int leaks(int protect)
{
    make_heap(protect);
    scrub();
    printf("ready\n");
    fflush(stdout);
    char line[16];
    if (!fgets(line, sizeof(line), stdin))
        line[0] = 0;
    return 0;
}

/* A fixed mix of malloc, calloc, memalign, realloc and free (sizes up to 12 KiB, 512 blocks
 * live), then glibc's own figures of its heap: sample_guard must leave them as glibc alone
 * makes them, however many of the calls it samples. */
static int heap_shape(void)
{
    static char *live[512];
    uint32_t x = 12345;
    for (int i = 0; i < 200000; i++) {
        x = x * 1103515245u + 12345u;
        uint32_t r = x >> 8;
        size_t slot = r % 512, size = 1 + (r >> 9) % 12288;
        if (live[slot] && (r & 7) == 0) {
            char *q = realloc(live[slot], size);
            if (!q)
                return 1;
            live[slot] = q;
            q[size - 1] = 1;
            continue;
        }
        free(live[slot]);
        switch ((r >> 3) & 3) {
        case 0:
            live[slot] = calloc(1, size);
            break;
        case 1:
            live[slot] = memalign(64, size);
            break;
        default:
            live[slot] = malloc(size);
            break;
        }
        if (!live[slot])
            return 1;
        live[slot][0] = 1;
    }
    for (int i = 0; i < 512; i += 2) {
        free(live[i]);
        live[i] = NULL;
    }
    struct mallinfo2 mi = mallinfo2();
    printf("arena=%zu ordblks=%zu uordblks=%zu fordblks=%zu keepcost=%zu hblkhd=%zu\n", mi.arena,
           mi.ordblks, mi.uordblks, mi.fordblks, mi.keepcost, mi.hblkhd);
    return 0;
}

/* The same use after free, many times: sample_guard's default rate catches one. */
static NOINLINE int use_after_free_loop(long n)
{
    long sum = 0;
    for (long i = 0; i < n; i++) {
        char *p = malloc(64);
        p[8] = (char)i;
        free(p);
        sum += read_after_free(p);
    }
    printf("iterations=%ld\n", n);
    return (int)(sum & 1);
}

int main(int argc, char **argv)
{
    printf("pid=%d\n", (int)getpid());
    fflush(stdout);
    if (argc < 2)
        return 2;
    const char *s = argv[1];
    if (argc > 2)
        g_kind = argv[2];
    int rc;
    if (strcmp(s, "slack_overflow") == 0)
        rc = slack_overflow();
    else if (strcmp(s, "clean") == 0)
        rc = clean();
    else if (strcmp(s, "own_handler") == 0)
        rc = own_handler_scenario(argc > 2 ? argv[2] : "sigaction", argc > 3);
    else if (strcmp(s, "fork_use_after_free") == 0)
        rc = fork_use_after_free();
    else if (strcmp(s, "use_after_free_loop") == 0)
        rc = use_after_free_loop(argc > 2 ? atol(argv[2]) : 100000);
    else if (strcmp(s, "heap_shape") == 0)
        rc = heap_shape();
    else if (strcmp(s, "leaks") == 0)
        rc = leaks(argc > 2 && strcmp(argv[2], "protect") == 0);
    else if (strcmp(s, "null_deref") == 0)
        rc = *(volatile char *)g_null_page;
    else
        rc = run_bug(s, argc > 3 ? argv[3] : "main");
    if (rc < 0) {
        printf("unknown scenario %s\n", s);
        return 2;
    }
    printf("survived\n");
    return rc;
}
