/* md_heap.c: heap dumps and get_malloc_leak_info under malloc debug, one scenario per
 * argv[1], for tests/e2e/test_malloc_debug_heap_dump.py.
 *
 * Every scenario first makes a known set of allocations (make_known): three of 100003 bytes
 * from one call site (they merge into one record, num 3), two of 70001 bytes from another
 * (num 2), one of 70001 bytes from the first site (same size, other backtrace: a record of
 * its own) and one of 50021 bytes. It prints "key=value" words the test reads.
 *
 * The introspection calls go through <heapscope/malloc_debug.h>'s wrappers, so the program
 * also runs (and says so) without the shim.
 *
 * Scenarios:
 *   signal   get_malloc_leak_info, then raise(SIGRTMAX-17) and one malloc (which writes the
 *            dump before it allocates): the dump shows exactly the table the leak info saw.
 *            The leak info entries are printed as "leak size=.. num=.. bt=pc,pc,..".
 *   exit     the known set stays allocated; exit (backtrace_dump_on_exit writes the dump).
 *   leakinfo the leak info buffer, printed raw ("entry size=.. num=.. frames=f0,f1,..", all
 *            backtrace_size frames including the zero padding).
 *   errors   the error paths of get_malloc_leak_info: a NULL argument, then a normal call.
 *   threads  four threads allocate and free while the main thread asks for three dumps, each
 *            renamed to <file>.<n> once complete (its last line is END).
 */
#define _GNU_SOURCE
#include "heapscope/malloc_debug.h"

#include <pthread.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define SIZE_A 100003
#define SIZE_B 70001
#define SIZE_C 50021

static void *volatile sink;
static void *known[8];

__attribute__((noinline)) static void *alloc_a(size_t n)
{
    void *p = malloc(n);
    sink = p;
    return p;
}

__attribute__((noinline)) static void *alloc_b(size_t n)
{
    void *p = malloc(n);
    sink = p;
    return p;
}

__attribute__((noinline)) static void make_known(void)
{
    int k = 0;
    for (int i = 0; i < 3; i++)
        known[k++] = alloc_a(SIZE_A);
    for (int i = 0; i < 2; i++)
        known[k++] = alloc_b(SIZE_B);
    known[k++] = alloc_a(SIZE_B);
    known[k++] = alloc_b(SIZE_C);
    printf("known_total=%zu known_count=%d\n", (size_t)3 * SIZE_A + 3 * SIZE_B + SIZE_C, k);
}

static void free_known(void)
{
    for (size_t i = 0; i < sizeof(known) / sizeof(known[0]); i++)
        free(known[i]);
}

/* Prints the leak info entries (pcs up to the first 0) and its sizes. */
static void print_leak_info(uint8_t *info, size_t overall, size_t entry, size_t total,
                            size_t frames, int raw)
{
    printf("info_size=%zu overall_size=%zu total_memory=%zu backtrace_size=%zu entries=%zu\n",
           entry, overall, total, frames, entry ? overall / entry : 0);
    for (size_t off = 0; entry && off < overall; off += entry) {
        size_t hdr[2];
        memcpy(hdr, info + off, sizeof(hdr));
        printf(raw ? "entry size=%zu num=%zu frames=" : "leak size=%zu num=%zu bt=", hdr[0],
               hdr[1]);
        for (size_t f = 0; f < frames; f++) {
            uintptr_t pc;
            memcpy(&pc, info + off + sizeof(hdr) + f * sizeof(uintptr_t), sizeof(pc));
            if (!raw && pc == 0)
                break;
            printf("%s%lx", f ? "," : "", (unsigned long)pc);
        }
        printf("\n");
    }
}

static int scenario_signal(void)
{
    uint8_t *info;
    size_t overall, entry, total, frames;
    /* The wrapper's first call looks the symbol up (dlsym may allocate): do it now. */
    if (heapscope_get_malloc_leak_info(&info, &overall, &entry, &total, &frames))
        heapscope_free_malloc_leak_info(info);
    make_known();
    fflush(stdout);

    bool got = heapscope_get_malloc_leak_info(&info, &overall, &entry, &total, &frames);
    raise(SIGRTMAX - 17);       /* delivered before raise returns: the flag is set */
    void *trigger = malloc(23); /* writes the dump, then allocates */
    printf("got_info=%d\n", got);
    print_leak_info(info, overall, entry, total, frames, 0);
    heapscope_free_malloc_leak_info(info);
    free(trigger);
    free_known();
    return 0;
}

static int scenario_exit(void)
{
    make_known();
    fflush(stdout);
    return 0; /* the known set stays live */
}

static int scenario_leakinfo(void)
{
    uint8_t *info;
    size_t overall, entry, total, frames;
    make_known();
    bool got = heapscope_get_malloc_leak_info(&info, &overall, &entry, &total, &frames);
    printf("loaded=%d got_info=%d\n", heapscope_malloc_debug_loaded(), got);
    print_leak_info(info, overall, entry, total, frames, 1);
    heapscope_free_malloc_leak_info(info);
    free_known();
    return 0;
}

static int scenario_errors(void)
{
    uint8_t *info = (uint8_t *)1;
    size_t overall = 5, entry = 5, total = 5, frames = 5;
    make_known();
    bool loaded = heapscope_malloc_debug_loaded();
    printf("loaded=%d\n", loaded);
    bool got = heapscope_get_malloc_leak_info(&info, &overall, NULL, &total, &frames);
    printf("null_arg_got=%d info_null=%d overall=%zu\n", got, info == NULL, overall);
    fflush(stdout);
    got = heapscope_get_malloc_leak_info(&info, &overall, &entry, &total, &frames);
    printf("got_info=%d info_null=%d sizes=%zu,%zu,%zu,%zu\n", got, info == NULL, overall, entry,
           total, frames);
    if (!loaded)
        printf("iterate=%d\n", heapscope_malloc_iterate(0, 0, NULL, NULL));
    heapscope_free_malloc_leak_info(info);
    free_known();
    return 0;
}

/* ---- threads ---- */

#define THREADS 4
#define THREAD_LIVE 64

static int g_stop;

__attribute__((noinline)) static void *thread_alloc(size_t n)
{
    void *p = malloc(n);
    sink = p;
    return p;
}

static void *churn(void *arg)
{
    unsigned seed = (unsigned)(uintptr_t)arg * 7919u + 1;
    void *live[THREAD_LIVE] = {0};
    while (!__atomic_load_n(&g_stop, __ATOMIC_RELAXED)) {
        int slot = rand_r(&seed) % THREAD_LIVE;
        if (live[slot]) {
            free(live[slot]);
            live[slot] = NULL;
        } else {
            live[slot] = thread_alloc(1000 + (size_t)(rand_r(&seed) % 1000));
        }
    }
    for (int i = 0; i < THREAD_LIVE; i++)
        free(live[i]);
    return NULL;
}

/* True once path exists and ends with "END\n" (the dump is complete). */
static bool dump_complete(const char *path)
{
    FILE *f = fopen(path, "r");
    if (!f)
        return false;
    char tail[4] = {0};
    bool done =
        fseek(f, -4, SEEK_END) == 0 && fread(tail, 1, 4, f) == 4 && memcmp(tail, "END\n", 4) == 0;
    fclose(f);
    return done;
}

static int scenario_threads(const char *prefix)
{
    make_known();
    pthread_t t[THREADS];
    for (uintptr_t i = 0; i < THREADS; i++)
        pthread_create(&t[i], NULL, churn, (void *)i);
    char path[4096], renamed[4200];
    snprintf(path, sizeof(path), "%s.%d.txt", prefix, (int)getpid());
    int ok = 1;
    for (int n = 0; n < 3; n++) {
        struct timespec pause = {0, 50 * 1000 * 1000};
        nanosleep(&pause, NULL);
        raise(SIGRTMAX - 17);
        free(malloc(1)); /* some thread's next call writes the dump */
        int waited = 0;
        while (!dump_complete(path) && waited < 60000) {
            struct timespec ms = {0, 1000 * 1000};
            nanosleep(&ms, NULL);
            waited++;
        }
        snprintf(renamed, sizeof(renamed), "%s.%d", path, n);
        if (rename(path, renamed) != 0)
            ok = 0;
        printf("dump%d=%s\n", n, renamed);
    }
    __atomic_store_n(&g_stop, 1, __ATOMIC_RELAXED);
    for (int i = 0; i < THREADS; i++)
        pthread_join(t[i], NULL);
    printf("threads_done=1 renamed_all=%d\n", ok);
    free_known();
    return 0;
}

int main(int argc, char **argv)
{
    if (argc < 2) {
        fprintf(stderr, "usage: md_heap signal|exit|leakinfo|errors|threads PREFIX\n");
        return 2;
    }
    printf("pid=%d\n", (int)getpid());
    fflush(stdout);
    const char *s = argv[1];
    if (strcmp(s, "signal") == 0)
        return scenario_signal();
    if (strcmp(s, "exit") == 0)
        return scenario_exit();
    if (strcmp(s, "leakinfo") == 0)
        return scenario_leakinfo();
    if (strcmp(s, "errors") == 0)
        return scenario_errors();
    if (strcmp(s, "threads") == 0 && argc > 2)
        return scenario_threads(argv[2]);
    fprintf(stderr, "unknown scenario %s\n", s);
    return 2;
}
