/* mu_leaks.c: programs for the unreachable-memory detector's end-to-end tests, one scenario
 * per argv[1]. Linked with -lmemunreachable and nothing else: the "no setup" path. Each
 * scenario prints key=value lines the test checks (counts from GetUnreachableMemory). */
#define _GNU_SOURCE
#include <heapscope/memunreachable.h>

#include <dlfcn.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

static void *volatile g_global;
static atomic_int g_stop;

/* The detector is conservative: a stale copy of a pointer left in a dead stack slot by an
 * earlier call keeps its block reachable. The scenarios zero the stack below their frame
 * (where those calls ran) before each check, so that what they test is the reference they
 * hold or dropped, not the compiler's leftovers. */
static __attribute__((noinline)) void scrub(void)
{
    volatile char area[65536];
    memset((char *)area, 0, sizeof(area));
    __asm__ volatile("" : : "r"(area) : "memory");
}

/* Runs the check and prints its summary as key=value. */
static struct UnreachableMemoryInfo check(const char *tag, size_t limit)
{
    struct UnreachableMemoryInfo info;
    memset(&info, 0, sizeof(info));
    bool ok = GetUnreachableMemory(&info, limit);
    printf("%s_ok=%d %s_leaks=%zu %s_bytes=%zu %s_reported=%zu\n", tag, ok, tag, info.num_leaks,
           tag, info.leak_bytes, tag, info.num_reported_leaks);
    fflush(stdout);
    return info;
}

static __attribute__((noinline)) void check_and_free_now(const char *tag, size_t limit)
{
    struct UnreachableMemoryInfo info = check(tag, limit);
    FreeUnreachableMemory(&info);
}

#define check_and_free(tag, limit) (scrub(), check_and_free_now(tag, limit))

/* Pointers are hidden by flipping their top bit (a non-canonical address, never inside a
 * block; flipping a low bit would make an interior pointer, which counts). */
static void *hide(void *p)
{
    return (void *)((uintptr_t)p ^ (1ull << 63));
}

/* The block is zeroed: fresh heap memory may hold stale copies of pointers (the results of
 * an earlier check, freed and handed out again), which a conservative detector rightly
 * follows; the scenarios test the references they make, not the heap's leftovers. */
static __attribute__((noinline)) void *alloc_hidden(size_t n)
{
    void *p = malloc(n);
    if (p)
        memset(p, 0, n);
    return hide(p);
}

/* A block that only a local variable of this frame refers to. */
static __attribute__((noinline)) void held_by_stack(void)
{
    void *volatile p = alloc_hidden(100);
    p = hide(p);
    check_and_free("stack_held", 10);
    p = NULL;
    check_and_free("stack_cleared", 10);
}

static __attribute__((noinline)) void set_global(size_t size)
{
    g_global = hide(alloc_hidden(size));
}

static __attribute__((noinline)) void set_global_interior(size_t size, size_t offset)
{
    g_global = (char *)hide(alloc_hidden(size)) + offset;
}

static int scenario_basic(void)
{
    check_and_free("clean", 10);
    printf("noleaks=%d\n", NoLeaks());

    held_by_stack();

    set_global(200);
    check_and_free("global_held", 10);
    g_global = hide(g_global);
    check_and_free("global_cleared", 10);
    free(hide(g_global));
    g_global = NULL;
    check_and_free("global_freed", 10);

    /* Interior pointer: the middle of a block keeps it alive; one past the end does not. */
    set_global_interior(256, 100);
    check_and_free("interior", 10);
    g_global = (char *)g_global + 156;
    check_and_free("one_past_end", 10);
    free((char *)g_global - 256);
    g_global = NULL;
    check_and_free("twice_a", 10);
    check_and_free("twice_b", 10);
    return 0;
}

/* ---- thread-local storage of another thread ---- */

static __thread void *t_local;
static pthread_key_t g_key;
static atomic_int g_phase;

static __attribute__((noinline)) void fill_tls(void)
{
    t_local = malloc(300);
    pthread_setspecific(g_key, malloc(400));
}

static void *tls_holder(void *arg)
{
    (void)arg;
    fill_tls();
    scrub();
    atomic_store(&g_phase, 1);
    while (atomic_load(&g_phase) == 1)
        usleep(1000);
    t_local = hide(t_local);
    pthread_setspecific(g_key, hide(pthread_getspecific(g_key)));
    scrub();
    atomic_store(&g_phase, 3);
    while (!atomic_load(&g_stop))
        usleep(1000);
    free(hide(t_local));
    free(hide(pthread_getspecific(g_key)));
    return NULL;
}

static int scenario_tls(void)
{
    pthread_key_create(&g_key, NULL);
    pthread_t t;
    pthread_create(&t, NULL, tls_holder, NULL);
    while (atomic_load(&g_phase) != 1)
        usleep(1000);
    check_and_free("tls", 10);
    atomic_store(&g_phase, 2);
    while (atomic_load(&g_phase) != 3)
        usleep(1000);
    check_and_free("tls_cleared", 10);
    atomic_store(&g_stop, 1);
    pthread_join(t, NULL);
    return 0;
}

/* ---- a reference held only in a register of another thread ---- */

static atomic_int g_parked;

static void *register_holder(void *arg)
{
    (void)arg;
    void *hidden = alloc_hidden(500);
    scrub();
    /* Phase 1: the only copy of the pointer is in r15 (every other register that could hold
     * a leftover is cleared). When told (phase 2): keep it flipped in r14 (no longer a
     * pointer), clear r15, say so (phase 3), and wait for stop. */
    __asm__ volatile("mov %2, %%r15\n\t"
                     "btc $63, %%r15\n\t"
                     "xor %%ecx, %%ecx\n\t"
                     "xor %%edx, %%edx\n\t"
                     "xor %%esi, %%esi\n\t"
                     "xor %%edi, %%edi\n\t"
                     "xor %%r8d, %%r8d\n\t"
                     "xor %%r9d, %%r9d\n\t"
                     "xor %%r10d, %%r10d\n\t"
                     "xor %%r11d, %%r11d\n\t"
                     "movl $1, %0\n\t"
                     "1:\n\t"
                     "pause\n\t"
                     "movl %0, %%eax\n\t"
                     "cmpl $2, %%eax\n\t"
                     "jne 1b\n\t"
                     "mov %%r15, %%r14\n\t"
                     "btc $63, %%r14\n\t"
                     "xor %%r15, %%r15\n\t"
                     "movl $3, %0\n\t"
                     "2:\n\t"
                     "pause\n\t"
                     "movl %1, %%eax\n\t"
                     "testl %%eax, %%eax\n\t"
                     "jz 2b\n\t"
                     : "+m"(g_parked)
                     : "m"(g_stop), "m"(hidden)
                     : "rax", "rcx", "rdx", "rsi", "rdi", "r8", "r9", "r10", "r11", "r14", "r15",
                       "memory");
    void *back;
    __asm__ volatile("mov %%r14, %0" : "=r"(back));
    free(hide(back));
    return NULL;
}

static int scenario_register(void)
{
    pthread_t t;
    pthread_create(&t, NULL, register_holder, NULL);
    while (atomic_load(&g_parked) != 1)
        usleep(1000);
    usleep(10000);
    check_and_free("register", 10);
    atomic_store(&g_parked, 2);
    while (atomic_load(&g_parked) != 3)
        usleep(1000);
    check_and_free("register_cleared", 10);
    atomic_store(&g_stop, 1);
    pthread_join(t, NULL);
    return 0;
}

/* ---- a global of a dlopen'ed library ---- */

static int scenario_dlopen(const char *lib_path)
{
    void *lib = dlopen(lib_path, RTLD_NOW | RTLD_LOCAL);
    if (!lib) {
        printf("dlopen failed: %s\n", dlerror());
        return 1;
    }
    void **volatile slot = (void **)dlsym(lib, "mu_lib_global");
    if (!slot) {
        printf("dlsym failed: %s\n", dlerror());
        return 1;
    }
    *slot = hide(alloc_hidden(600));
    check_and_free("dlopen_held", 10);
    *slot = hide(*slot);
    check_and_free("dlopen_cleared", 10);
    free(hide(*slot));
    return 0;
}

/* ---- graphs of leaked blocks ---- */

/* Builds n blocks in a cycle (and an entry block pointing into it); nothing else refers to
 * them once this frame is gone. */
static __attribute__((noinline)) void make_cycle(size_t n, int entry)
{
    void **first = malloc(sizeof(void *) * 2);
    void **prev = first;
    for (size_t i = 1; i < n; i++) {
        void **b = malloc(sizeof(void *) * 2);
        prev[0] = b;
        prev = b;
    }
    prev[0] = first; /* close the cycle */
    if (entry) {
        void **e = malloc(sizeof(void *) * 2);
        e[0] = first;
    }
}

static int scenario_cycle(size_t n, int entry)
{
    make_cycle(n, entry);
    scrub();
    struct UnreachableMemoryInfo info = check("cycle", 2000);
    size_t max_ref = 0, min_ref = SIZE_MAX;
    for (size_t i = 0; i < info.num_reported_leaks; i++) {
        size_t r = info.leaks[i].referenced_count;
        max_ref = r > max_ref ? r : max_ref;
        min_ref = r < min_ref ? r : min_ref;
    }
    printf("cycle_min_ref=%zu cycle_max_ref=%zu\n", min_ref, max_ref);
    FreeUnreachableMemory(&info);
    return 0;
}

static __attribute__((noinline)) void make_many(void)
{
    for (int i = 0; i < 1024; i++)
        (void)malloc(32);
}

static int scenario_many(void)
{
    make_many();
    check_and_free("many", 100);
    return 0;
}

/* The program's own malloc_iterate (exported: dlsym(RTLD_DEFAULT) finds it before the
 * library's), counting the calls and passing them on. */
static atomic_int g_iterate_calls;

__attribute__((visibility("default"))) int
malloc_iterate(uintptr_t base, size_t size, void (*callback)(uintptr_t, size_t, void *), void *arg)
{
    atomic_fetch_add(&g_iterate_calls, 1);
    int (*next)(uintptr_t, size_t, void (*)(uintptr_t, size_t, void *), void *) =
        (int (*)(uintptr_t, size_t, void (*)(uintptr_t, size_t, void *), void *))dlsym(
            RTLD_NEXT, "malloc_iterate");
    return next ? next(base, size, callback, arg) : -1;
}

/* A check walks the blocks once, in the sweeper, listing them all at once: it does not call
 * malloc_iterate (which reads every block's record) to find out whether they are tracked. */
static int scenario_iterate_calls(void)
{
    make_many();
    check_and_free("probe", 100);
    printf("iterate_calls=%d\n", atomic_load(&g_iterate_calls));
    return 0;
}

/* A leak whose text report the test compares exactly. */
static __attribute__((noinline)) void make_report_leak(void)
{
    char *p = malloc(40);
    memcpy(p, "heapscope leak report 0123456789ABCDEFGH", 40);
    printf("leak=%lx\n", (unsigned long)(uintptr_t)p);
}

static int scenario_report(void)
{
    make_report_leak();
    char *text = GetUnreachableMemoryString(true, 10);
    fputs(text ? text : "(null)\n", stdout);
    FreeUnreachableMemoryString(text);
    return 0;
}

/* A referenced block made unreadable: the walker must not crash. */
static int scenario_protnone(void)
{
    g_global = aligned_alloc(4096, 8192);
    scrub();
    mprotect(g_global, 8192, PROT_NONE);
    check_and_free("protnone", 10);
    mprotect(g_global, 8192, PROT_READ | PROT_WRITE);
    free(g_global);
    g_global = NULL;
    return 0;
}

/* ---- capture under load ---- */

static void *idle_thread(void *arg)
{
    (void)arg;
    while (!atomic_load(&g_stop))
        usleep(5000);
    return NULL;
}

static void *churn_thread(void *arg)
{
    (void)arg;
    while (!atomic_load(&g_stop)) {
        void *p = malloc(64);
        void *q = malloc(1000);
        free(p);
        free(q);
    }
    return NULL;
}

static void *short_lived(void *arg)
{
    (void)arg;
    void *p = malloc(16);
    free(p);
    return NULL;
}

static void *spawner(void *arg)
{
    (void)arg;
    while (!atomic_load(&g_stop)) {
        pthread_t t;
        if (pthread_create(&t, NULL, short_lived, NULL) == 0)
            pthread_join(t, NULL);
    }
    return NULL;
}

static atomic_int g_signals;

static void on_usr1(int sig)
{
    (void)sig;
    atomic_fetch_add(&g_signals, 1);
}

static void *signaller(void *arg)
{
    (void)arg;
    while (!atomic_load(&g_stop)) {
        kill(getpid(), SIGUSR1);
        usleep(200);
    }
    return NULL;
}

static __attribute__((noinline)) void make_leak_777(void)
{
    (void)malloc(777);
}

static int scenario_load(int nthreads)
{
    signal(SIGUSR1, on_usr1);
    pthread_t *t = calloc((size_t)nthreads + 3, sizeof(*t));
    pthread_attr_t attr;
    pthread_attr_init(&attr);
    pthread_attr_setstacksize(&attr, 64 * 1024);
    int started = 0;
    for (int i = 0; i < nthreads; i++)
        started += pthread_create(&t[i], &attr, idle_thread, NULL) == 0;
    pthread_create(&t[nthreads], NULL, churn_thread, NULL);
    pthread_create(&t[nthreads + 1], NULL, spawner, NULL);
    pthread_create(&t[nthreads + 2], NULL, signaller, NULL);
    usleep(20000);
    make_leak_777();
    int before = atomic_load(&g_signals);
    check_and_free("load1", 10);
    check_and_free("load2", 10);
    usleep(20000);
    printf("threads=%d signals_after=%d\n", started, atomic_load(&g_signals) > before);
    atomic_store(&g_stop, 1);
    for (int i = 0; i < nthreads + 3; i++)
        if (i >= nthreads || i < started)
            pthread_join(t[i], NULL);
    free(t);
    return 0;
}

/* Leaks at exit, for `heapscope leaks -- PROGRAM`. */
static __attribute__((noinline)) void *make_leak(size_t n)
{
    return malloc(n);
}

static int scenario_exit_leak(void)
{
    g_global = make_leak(123); /* reachable at exit: not reported */
    (void)make_leak(4321);     /* unreachable at exit */
    printf("exiting\n");
    return 0;
}

/* A service that leaks and then idles (no allocation) until its stdin closes, for
 * `heapscope leaks -p PID`. */
static int scenario_serve(void)
{
    for (int i = 0; i < 3; i++)
        (void)make_leak(1000 + (size_t)i);
    pthread_t t;
    pthread_create(&t, NULL, idle_thread, NULL);
    printf("ready\n");
    char c;
    while (read(0, &c, 1) > 0) {
    }
    atomic_store(&g_stop, 1);
    pthread_join(t, NULL);
    return 0;
}

int main(int argc, char **argv)
{
    setvbuf(stdout, NULL, _IONBF, 0); /* no stdio buffer on the heap */
    if (argc < 2)
        return 2;
    const char *s = argv[1];
    if (!strcmp(s, "basic"))
        return scenario_basic();
    if (!strcmp(s, "tls"))
        return scenario_tls();
    if (!strcmp(s, "register"))
        return scenario_register();
    if (!strcmp(s, "dlopen") && argc > 2)
        return scenario_dlopen(argv[2]);
    if (!strcmp(s, "cycle"))
        return scenario_cycle(1000, 0);
    if (!strcmp(s, "cycle_entry"))
        return scenario_cycle(1000, 1);
    if (!strcmp(s, "pair"))
        return scenario_cycle(2, 0);
    if (!strcmp(s, "many"))
        return scenario_many();
    if (!strcmp(s, "report"))
        return scenario_report();
    if (!strcmp(s, "iterate_calls"))
        return scenario_iterate_calls();
    if (!strcmp(s, "protnone"))
        return scenario_protnone();
    if (!strcmp(s, "load"))
        return scenario_load(argc > 2 ? atoi(argv[2]) : 10);
    if (!strcmp(s, "exit_leak"))
        return scenario_exit_leak();
    if (!strcmp(s, "serve"))
        return scenario_serve();
    return 2;
}
